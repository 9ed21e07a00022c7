"""Start-up stays cheap: a command imports only what it uses (issue 19, a fast CLI).

Each check runs a fresh interpreter and inspects ``sys.modules`` after the command, so it
holds whatever this test process imported already. No timing here: the figures are in
``python -m benchmarks cli``.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memory_ledger.commands import MemoryEngine, Namespace
from tests.conftest import REPO_ROOT

HEAVY = ("duckdb", "numpy", "pyarrow", "lmdb")
"""What ``--help`` must not load (the store's and the semantic channel's libraries)."""

NOT_FOR_LEXICAL_RECALL = (
    "numpy",
    "pyarrow",
    "detect_secrets",
    "sentence_transformers",
    "httpx",
    "pydantic",  # typer 0.29 coerces arguments through it (60-70 ms): pinned below 0.29
    "opentelemetry",  # the host's to load (commands/telemetry looks in sys.modules only)
)
"""What a lexical recall of a caught-up store must not load."""

PACKAGES = (
    "memory_ledger",
    "memory_ledger.commands",
    "memory_ledger.projections",
    "memory_ledger.replay",
)

_PROBE = """
import json, sys
from memory_ledger.replay.cli.app import main
sys.argv = ["memory-ledger", *json.loads(sys.argv[1])]
try:
    main()
except SystemExit as exit:
    code = exit.code or 0
else:
    code = 0
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def loaded_by(args: list[str]) -> tuple[int, set[str]]:
    """Exit code and top-level modules loaded by ``memory-ledger ARGS`` in a fresh process."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, json.dumps(args)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["code"], {name.split(".")[0] for name in report["modules"]}


def test_help_imports_no_store_or_vector_library() -> None:
    code, modules = loaded_by(["--help"])
    assert code == 0
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))


@pytest.mark.parametrize("command", ["recall", "run", "events", "replay", "mcp"])
def test_command_help_imports_no_store_library(command: str) -> None:
    code, modules = loaded_by([command, "--help"])
    assert code == 0
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))


def test_lexical_recall_imports_neither_vectors_nor_secret_scanning(tmp_path: Path) -> None:
    ns = Namespace("acme", "alice", "assistant")
    store = tmp_path / "store"
    with MemoryEngine.open(store) as engine:
        engine.remember(ns, "Alice only drinks espresso.")
        engine.catch_up()
    code, modules = loaded_by(
        [
            "recall",
            "--store",
            str(store),
            "--tenant",
            ns.tenant,
            "--principal",
            ns.principal,
            "--scope-id",
            ns.scope_id,
            "--embeddings",
            "none",
            "--json",
            "espresso",
        ]
    )
    assert code == 0
    assert {"duckdb", "lmdb"} <= modules
    assert not modules & set(NOT_FOR_LEXICAL_RECALL), sorted(modules & set(NOT_FOR_LEXICAL_RECALL))


def test_import_memory_ledger_loads_no_engine() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *sys.path])}
    probe = "import json, sys, memory_ledger; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
    )
    modules = {name.split(".")[0] for name in json.loads(done.stdout)}
    assert not modules & {*HEAVY, "eventsourcing", "detect_secrets"}


@pytest.mark.parametrize("package", PACKAGES)
def test_lazy_exports_are_the_defining_modules_objects(package: str) -> None:
    module = importlib.import_module(package)
    names = [name for name in module.__all__ if name != "open"]
    assert names
    for name in names:
        value = getattr(module, name)
        origin = getattr(value, "__module__", None)
        if isinstance(origin, str) and origin.startswith("memory_ledger."):
            assert getattr(importlib.import_module(origin), name) is value, (package, name)
        assert name in dir(module)
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = module.nope


def test_from_import_and_isinstance_see_one_class(tmp_path: Path) -> None:
    import memory_ledger
    from memory_ledger import MemoryEngine as FromFacade
    from memory_ledger.commands.engine import MemoryEngine as FromModule

    assert FromFacade is FromModule is MemoryEngine
    with memory_ledger.open(tmp_path / "store") as engine:
        assert isinstance(engine, memory_ledger.MemoryEngine)
        assert isinstance(Namespace("a", "b", "c"), memory_ledger.Namespace)
