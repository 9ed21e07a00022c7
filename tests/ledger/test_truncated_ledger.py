"""A ledger file cut short (a full disk during a copy, a partial restore) is refused on open
with a typed ``LedgerDamagedError`` (``ledger_truncated``) naming the file and the bytes
missing, before LMDB maps a page past its end: before the fix every reader (``memory_ledger
.open``, every CLI command) died with ``SIGBUS`` (exit 135, no message). The damaged cases
run in a child process, so a regression fails the test instead of killing pytest. Stores
that are whole (new, empty, grown past their first map size, written meanwhile) still open.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import lmdb
import pytest

import memory_ledger
from memory_ledger.ledger.errors import LedgerDamagedError
from memory_ledger.ledger.lmdb import LMDBDatastore
from memory_ledger.ledger.lmdb_meta import check_data_length, read_meta
from tests.conftest import REPO_ROOT

_ENV = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "NO_COLOR": "1", "COLUMNS": "400"}
_NS = ("t", "u", "s")

_OPEN_CHILD = """
import json, sys, memory_ledger
try:
    memory_ledger.open(sys.argv[1]).close()
    print(json.dumps({"opened": True}))
except memory_ledger.MemoryLedgerError as e:
    from memory_ledger.ledger.errors import LedgerDamagedError
    print(json.dumps({"opened": False, "class": type(e).__name__, "reason": e.reason_code,
                      "damaged": isinstance(e, LedgerDamagedError), "message": str(e)}))
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("truncated") / "store"
    with memory_ledger.open(folder) as engine:
        for n in range(40):
            engine.remember(memory_ledger.Namespace(*_NS), f"Fact number {n} about the garden.")
    return folder


def _cut(store: Path, to: Path, size: int) -> Path:
    target = to / f"cut-{size}"
    shutil.copytree(store, target)
    os.truncate(target / "ledger" / "data.mdb", size)
    return target


def _open_in_child(folder: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", _OPEN_CHILD, str(folder)],
        capture_output=True,
        text=True,
        env=_ENV,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, (done.returncode, done.stderr[-500:])
    return dict(json.loads(done.stdout))


def _sizes(store: Path) -> dict[str, int]:
    meta = read_meta(store / "ledger" / "data.mdb")
    assert meta is not None and meta.last_page > 4
    needed = meta.needed_bytes
    return {"8192": 8192, "half": needed // 2, "last-page-minus-one-byte": needed - 1}


@pytest.mark.parametrize("cut", ["8192", "half", "last-page-minus-one-byte"])
def test_a_cut_short_ledger_is_a_typed_error_on_open(store: Path, tmp_path: Path, cut: str) -> None:
    size = _sizes(store)[cut]
    folder = _cut(store, tmp_path, size)
    needed = _sizes(store)["last-page-minus-one-byte"] + 1
    answer = _open_in_child(folder)
    assert answer["opened"] is False, answer
    assert answer["damaged"] and answer["class"] == "LedgerDamagedError", answer
    assert answer["reason"] == "ledger_truncated"
    message = answer["message"]
    assert "\n" not in message
    assert str(folder / "ledger" / "data.mdb") in message
    assert f"{needed - size} bytes missing" in message


@pytest.mark.parametrize("cut", ["8192", "half", "last-page-minus-one-byte"])
def test_cli_recall_of_a_cut_short_ledger_is_one_line_exit_2(
    store: Path, tmp_path: Path, cut: str
) -> None:
    folder = _cut(store, tmp_path, _sizes(store)[cut])
    done = subprocess.run(
        [sys.executable, "-m", "memory_ledger.replay", "recall", "--store", str(folder)]
        + ["--tenant", _NS[0], "--principal", _NS[1], "--scope-id", _NS[2], "garden"],
        capture_output=True,
        text=True,
        env=_ENV,
        check=False,
        timeout=120,
    )
    assert done.returncode == 2, (done.returncode, done.stderr[-500:])
    assert done.stderr.startswith("error: LedgerDamagedError: "), done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert "data.mdb" in done.stderr and "cut short" in done.stderr


def test_whole_stores_still_open(store: Path, tmp_path: Path) -> None:
    # The store as written, and a new one reopened while still empty of memories.
    with memory_ledger.open(store) as engine:
        assert engine.recall(memory_ledger.Namespace(*_NS), "garden", k=1)
    new = tmp_path / "new"
    memory_ledger.open(new).close()
    with memory_ledger.open(new) as engine:
        assert not engine.recall(memory_ledger.Namespace(*_NS), "garden", k=1)
    # A bare LMDB environment with nothing written: its two meta pages only.
    bare = tmp_path / "bare"
    lmdb.open(str(bare), map_size=1 << 20).close()
    meta = read_meta(bare / "data.mdb")
    assert meta is not None and meta.last_page == 1
    check_data_length(bare)


def test_a_store_whose_map_grew_still_opens(tmp_path: Path) -> None:
    folder = str(tmp_path / "grown")
    datastore = LMDBDatastore(folder, map_size=64 * 1024, sync=False)
    first = int(datastore.env.info()["map_size"])
    for n in range(40):
        datastore.write(lambda txn, n=n: txn.put(b"k%d" % n, b"x" * 20_000))
    assert int(datastore.env.info()["map_size"]) > first
    datastore.close()
    check_data_length(folder)
    LMDBDatastore(folder, map_size=64 * 1024, sync=False).close()


def test_a_store_written_meanwhile_is_never_refused(tmp_path: Path) -> None:
    """A writer commits while the check reads the meta page and the file's length (the meta
    page is read first: the pages it names were written before it)."""
    folder = str(tmp_path / "busy")
    datastore = LMDBDatastore(folder, map_size=1 << 20, sync=False)
    stop = threading.Event()

    def write() -> None:
        n = 0
        while not stop.is_set():
            datastore.write(lambda txn, n=n: txn.put(b"k%d" % n, b"y" * 3000))
            n += 1

    writer = threading.Thread(target=write)
    writer.start()
    refused: list[LedgerDamagedError] = []
    try:
        for _ in range(500):
            try:
                check_data_length(folder)
            except LedgerDamagedError as e:
                refused.append(e)
    finally:
        stop.set()
        writer.join()
        datastore.close()
    assert refused == []
