"""mem0 stores written by mem0 itself for the import tests (one child process per script,
:mod:`tests.imports.mem0_writer`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

SECRET = "Carol's key is sk-proj-Q7h2Lm9Xc4Vb8Nz1Kp5Rt3Wy6Ud0Fg2Hj"

SCRIPT: list[dict[str, Any]] = [
    {
        "op": "add",
        "key": "a1",
        "user": "alice",
        "text": "Alice lives in Lisbon.",
        "created_at": "2023-05-08T13:56:00+00:00",
    },
    {"op": "add", "key": "a2", "user": "alice", "text": "Alice is allergic to peanuts."},
    {"op": "add", "key": "b1", "user": "bob", "text": "Bob likes green tea."},
    {"op": "add", "key": "b2", "user": "bob", "text": "Bob works at the harbour office."},
    {"op": "update", "key": "a1", "text": "Alice lives in Porto."},
    {"op": "add", "key": "c1", "user": "carol", "text": SECRET},
    {"op": "add", "key": "c2", "user": "carol", "text": "Carol plays the cello on Sundays."},
    {"op": "delete", "key": "b1"},
    {"op": "update", "key": "a1", "text": "Alice lives in Braga since March."},
    {"op": "update", "key": "b2", "text": "Bob works at the train station."},
    {"op": "update", "key": "c1", "text": "Carol keeps her keys in the blue box."},
    {"op": "delete", "key": "a2"},
    {"op": "add", "key": "b3", "user": "bob", "text": "Bob has a dog named Rex."},
]
"""Adds, updates and deletes over three users; carol's first memory holds a secret (mem0
stores it; the import refuses that row and imports her later correction as a remember)."""


def write_mem0_store(folder: Path, script: list[dict[str, Any]] = SCRIPT) -> dict[str, Any]:
    """Run mem0 on ``script`` into ``folder``; return its ``expected.json``."""
    folder.mkdir(parents=True, exist_ok=True)
    script_file = folder / "script.json"
    script_file.write_text(json.dumps(script))
    done = subprocess.run(
        [sys.executable, "-m", "tests.imports.mem0_writer", str(script_file), str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    expected: dict[str, Any] = json.loads((folder / "expected.json").read_text())
    return expected


@pytest.fixture(scope="package")
def mem0_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """A mem0 store written by mem0 from :data:`SCRIPT` (skipped without ``mem0ai``)."""
    pytest.importorskip("mem0", reason="mem0ai (the test extra) writes the history database")
    folder = tmp_path_factory.mktemp("mem0")
    return folder, write_mem0_store(folder)
