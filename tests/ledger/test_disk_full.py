"""A full disk is named in one line (issue 25): ``LedgerDiskFullError`` /
``ProjectionDiskFullError`` (both ``DiskFullError``, ``reason_code`` ``disk_full``), naming
the cause and the folder, whether the driver says "No space left on device" or, as LMDB
and DuckDB may on a full file system, "Input/output error". Nothing stored is lost: the
failed command wrote nothing, and it completes once space is back.

The faults are injected at the write path's fault points (``ledger/faults.py``); one test
fills a real 2 MiB tmpfs, where mounting one is allowed (root), and is skipped otherwise.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import lmdb
import pytest

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.ledger import disk_full, faults
from memory_ledger.ledger.errors import DiskFullError, LedgerDiskFullError, LedgerOperationalError
from memory_ledger.projections.errors import ProjectionDiskFullError, ProjectionOperationalError
from memory_ledger.replay import verify_store

NS = Namespace("acme", "alice", "assistant")


@pytest.fixture
def inject() -> Iterator[Callable[[str, Callable[[], None]], None]]:
    def install(point: str, hook: Callable[[], None]) -> None:
        assert point in faults.POINTS
        faults.FAULTS[point] = hook

    yield install
    faults.FAULTS.clear()


def once(error: BaseException, before: Callable[[], None] | None = None) -> Callable[[], None]:
    done = False

    def hook() -> None:
        nonlocal done
        if not done:
            done = True
            if before is not None:
                before()
            raise error

    return hook


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text
    return text


@pytest.mark.parametrize(
    "driver_error",
    [
        lmdb.Error("mdb_txn_commit: No space left on device"),
        lmdb.DiskError("mdb_txn_commit: Input/output error"),
    ],
)
def test_a_full_disk_under_the_ledger_is_named_and_nothing_is_lost(
    tmp_path: Path,
    inject: Callable[[str, Callable[[], None]], None],
    monkeypatch: pytest.MonkeyPatch,
    driver_error: lmdb.Error,
) -> None:
    store = tmp_path / "store"
    monkeypatch.setattr(disk_full, "free_bytes", lambda folder: 0)  # the disk is full
    with MemoryEngine.open(store, sync=False) as engine:
        engine.remember(NS, "Alice drinks espresso.")
        head = engine.head
        inject("ledger.commit", once(driver_error))
        with pytest.raises(LedgerDiskFullError) as raised:
            engine.remember(NS, "Alice lives in Lisbon.")
        error = raised.value
        assert error.reason_code == "disk_full" and isinstance(error, DiskFullError)
        assert isinstance(error, LedgerOperationalError) and isinstance(error, OSError)
        text = one_line(error)
        assert "no space left on device" in text and str(store / "ledger") in text
        assert error.path == str(store / "ledger")
        assert engine.head == head, "nothing of the failed command was written"
        engine.remember(NS, "Alice lives in Lisbon.")  # space is back: the retry completes
        assert [h.statement for h in engine.recall(NS, "Lisbon", 1)] == ["Alice lives in Lisbon."]
        assert verify_store(engine).ok


def test_an_io_error_with_space_left_is_not_called_a_full_disk(
    tmp_path: Path, inject: Callable[[str, Callable[[], None]], None]
) -> None:
    with MemoryEngine.open(tmp_path / "store", sync=False) as engine:
        inject("ledger.commit", once(lmdb.DiskError("mdb_txn_commit: Input/output error")))
        with pytest.raises(LedgerOperationalError) as raised:
            engine.remember(NS, "Alice drinks espresso.")
        assert not isinstance(raised.value, DiskFullError)


def test_a_full_disk_under_the_projections_is_named_not_a_rollback_error(
    tmp_path: Path, inject: Callable[[str, Callable[[], None]], None]
) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store, sync=False) as engine:
        engine.remember(NS, "Alice drinks espresso.")
        engine.catch_up()
        engine.remember(NS, "Alice lives in Lisbon.")
        conn = engine.projections.conn
        # What DuckDB does when its WAL cannot be written: the transaction is gone.
        full = duckdb.IOException(
            f'Could not write file "{engine.projection_file}.wal": No space left on device'
        )
        inject("projections.commit", once(full, before=lambda: conn.execute("ROLLBACK")))
        # Recall is served from memory; the DuckDB catch-up (SQL, audit, debugger) meets it.
        with pytest.raises(ProjectionDiskFullError) as raised:
            engine.catch_up()
        error = raised.value
        assert error.reason_code == "disk_full" and isinstance(error, DiskFullError)
        assert isinstance(error, ProjectionOperationalError)
        text = one_line(error)
        assert "no space left on device" in text and str(store / "projections") in text
        assert "rollback" not in text
        assert not list((store / "projections").glob("*.damaged*")), "the file is sound"
        assert [h.statement for h in engine.recall(NS, "Lisbon", 1)] == ["Alice lives in Lisbon."]


@contextlib.contextmanager
def small_tmpfs(folder: Path) -> Iterator[Path]:
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="tmpfs is Linux's")
def test_a_really_full_disk_is_named_and_the_store_survives(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "small") as folder:
        store = folder / "store"
        ballast = folder / "ballast"
        ballast.write_bytes(b"\0" * (1024 * 1024))  # half the disk, given back below
        with MemoryEngine.open(store, sync=True) as engine:
            written = 0
            with pytest.raises(DiskFullError) as raised:
                while True:
                    engine.remember(NS, f"Alice fact {written} " + "lorem ipsum dolor " * 40)
                    written += 1
            assert raised.value.reason_code == "disk_full"
            assert "no space left on device" in one_line(raised.value)
            assert str(store) in str(raised.value)
            assert engine.head > 0
            with contextlib.suppress(DiskFullError):  # a read may need to write its catch-up
                engine.recall(NS, "Alice fact 0")
            ballast.unlink()  # space is back: nothing the engine said it stored is lost
            engine.remember(NS, "Alice lives in Lisbon.")
            assert [h.statement for h in engine.recall(NS, "Lisbon", 1)] == [
                "Alice lives in Lisbon."
            ]
            assert len(engine.retrievable_memories(NS)) >= written + 1  # recall caps k at 50
            assert verify_store(engine).ok
