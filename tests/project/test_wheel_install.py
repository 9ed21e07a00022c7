"""A wheel built from the repository and installed into a fresh venv exposes only
``memory_ledger`` (plus the ``memory-ledger`` console script), and loads every module once.

The fresh venv gets the wheel alone (``--no-deps``); its dependencies come from this test
run's own site-packages through ``PYTHONPATH`` (no ``.pth`` file of that folder runs there, so
the editable install of the checkout stays invisible to it).
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

PROBE = r"""
import importlib, importlib.util, pkgutil, sys
import memory_ledger

# 1. Nothing of ours under a bare folder name.
for bare in ("ledger", "projections", "commands", "replay"):
    assert importlib.util.find_spec(bare) is None, f"{bare} is importable"

# 2. Import every module of the package; each file is loaded under exactly one name.
names = [
    m.name
    for m in pkgutil.walk_packages(memory_ledger.__path__, "memory_ledger.")
    if not m.name.endswith(".__main__")  # running it would start the CLI
]
optional = {"memory_ledger.commands.embeddings.local"}
extras = ("starlette", "jinja2", "markupsafe", "uvicorn")  # the ui extra (replay/ui)
for name in names:
    try:
        importlib.import_module(name)
    except ImportError as error:
        if name not in optional and (error.name or "").split(".")[0] not in extras:
            raise
files = {}
for name, module in list(sys.modules.items()):
    path = getattr(module, "__file__", None)
    if path and "memory_ledger" in path.replace("\\", "/").split("/site-packages/")[-1]:
        assert name.startswith("memory_ledger"), f"{path} loaded as {name}"
        assert path not in files, f"{path} loaded twice: {files.get(path)} and {name}"
        files[path] = name
assert len(files) >= 40, len(files)

# 3. Class identity across packages.
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.ledger.ids import Namespace
assert memory_ledger.MemoryLedgerError is MemoryLedgerError
assert memory_ledger.Namespace is Namespace
from memory_ledger.replay import cli
assert cli.__name__ == "memory_ledger.replay.cli"

# 4. The quick start.
with memory_ledger.open("./store") as mem:
    ns = memory_ledger.Namespace("acme", "alice", "assistant")
    mem.remember(ns, "Alice only drinks espresso.")
    print(mem.recall(ns, "what does Alice drink?")[0].statement)
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
        timeout=600,
        env=clean,
    )
    (built,) = out.glob("memory_ledger-*.whl")
    return built


def test_wheel_holds_only_memory_ledger(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        tops = {name.split("/")[0] for name in names}
        info = next(t for t in tops if t.endswith(".dist-info"))
        top_level = archive.read(f"{info}/top_level.txt").decode().split()
        entry_points = archive.read(f"{info}/entry_points.txt").decode()
    assert tops == {"memory_ledger", info}
    assert top_level == ["memory_ledger"]
    assert "memory-ledger = memory_ledger.replay.cli:main" in entry_points
    for folder in ("ledger", "projections", "commands", "replay"):
        assert f"memory_ledger/{folder}/__init__.py" in names
        assert f"memory_ledger/{folder}/py.typed" in names


def test_fresh_venv_imports_once_and_runs_the_quick_start(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300, env=clean)
    python = venv / "bin" / "python"
    subprocess.run(
        [str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
        timeout=300,
        env=clean,
    )
    env = {**clean, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    work = tmp_path / "work"
    work.mkdir()
    probe = subprocess.run(
        [str(python), "-c", PROBE], cwd=work, env=env, capture_output=True, text=True, timeout=300
    )
    assert probe.returncode == 0, probe.stderr[-3000:]
    assert probe.stdout.strip().splitlines()[-1] == "Alice only drinks espresso."
    script = venv / "bin" / "memory-ledger"
    shown = subprocess.run(
        [str(script), "--help"], cwd=work, env=env, capture_output=True, text=True, timeout=120
    )
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert "recall" in shown.stdout
