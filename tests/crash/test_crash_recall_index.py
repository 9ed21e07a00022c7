"""SIGKILL while the persisted recall index is written: the store opens, a torn file is
detected and never served, and recall answers exactly as a process that rebuilt the index.

A child process opens a store, changes it (a new memory, a forget), recalls (its index
is now newer than the file) and closes, which writes ``slot-N.recall``; it blocks at the
``recall_index.write`` fault point (the temporary file holds its header and first blob) or
at ``recall_index.replace`` (written and fsynced, not renamed), where the parent SIGKILLs
it. The parent then reopens the store and compares every answer with a fresh build. A torn
file put under the final name (what a file system that reordered the rename would leave)
is detected by its length and checksums.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks.corpus import BENCH_NAMESPACE, fill, memories, queries
from memory_ledger.commands import MemoryEngine
from memory_ledger.ledger.ids import Namespace

REPO = Path(__file__).resolve().parents[2]
OTHER = Namespace("bench", "user-2", "assistant")

CHILD = textwrap.dedent(
    """
    import sys, time
    from memory_ledger.ledger.faults import FAULTS
    from benchmarks.corpus import BENCH_NAMESPACE
    from memory_ledger.commands import MemoryEngine

    store, point, forget = sys.argv[1], sys.argv[2], sys.argv[3]

    def block() -> None:
        print("AT_FAULT", flush=True)
        time.sleep(600)

    engine = MemoryEngine.open(store)
    engine.remember(BENCH_NAMESPACE, "Quentin Zabriskie collects antique harmoniums.")
    engine.forget(BENCH_NAMESPACE, forget)
    engine.recall(BENCH_NAMESPACE, "harmoniums", 3)
    FAULTS[point] = block
    engine.close()
    print("DONE", flush=True)
    """
)


def answers(engine: MemoryEngine, asked: list[str]) -> list[list[str]]:
    return [[h.memory_id for h in engine.recall(BENCH_NAMESPACE, q, 8)] for q in asked]


def kill_while_writing(store: Path, point: str, forget: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(store), point, forget],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=REPO,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline().strip()
        assert line == "AT_FAULT", child.stderr.read() if child.stderr else line
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def rebuilt_answers(store: Path, asked: list[str]) -> list[list[str]]:
    """A process that reads no file (rebuilds from the projections) and writes none."""
    kept = {p: p.read_bytes() for p in (store / "projections").glob("slot-*.recall*")}
    for p in kept:
        p.unlink()
    try:
        with MemoryEngine.open(store) as engine:
            result = answers(engine, asked)
            engine.recall_index._dirty.clear()
    finally:
        for p, raw in kept.items():
            p.write_bytes(raw)
    return result


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, list[str], str]:
    corpus = memories(400)
    path = tmp_path / "s"
    with MemoryEngine.open(path, sync=False) as engine:
        fill(engine, corpus[:300])
        fill(engine, corpus[300:], OTHER)
        asked = queries(corpus[:300], 20, seed=5)
        target = engine.recall(BENCH_NAMESPACE, asked[0], 1)[0].memory_id
    return path, asked, target


@pytest.mark.parametrize("earlier_file", [False, True])
@pytest.mark.parametrize("point", ["recall_index.write", "recall_index.replace"])
def test_killed_while_writing_the_index_the_store_serves_correct_results(
    store: tuple[Path, list[str], str], point: str, earlier_file: bool
) -> None:
    path, asked, target = store
    final = path / "projections" / "slot-0.recall"
    if not earlier_file:
        final.unlink()
    before = final.read_bytes() if earlier_file else None
    kill_while_writing(path, point, target)
    leftovers = list((path / "projections").glob("slot-0.recall.tmp-*"))
    assert leftovers, "the child was killed before its temporary file was renamed"
    assert (final.read_bytes() if final.exists() else None) == before
    expected = rebuilt_answers(path, [*asked, "antique harmoniums"])
    with MemoryEngine.open(path) as engine:
        got = answers(engine, [*asked, "antique harmoniums"])
        how = engine.recall_index.loaded[BENCH_NAMESPACE.key()]
    assert got == expected
    assert how == ("file" if earlier_file else "built")
    assert all(target not in ids for ids in got)
    assert got[-1], "the memory written before the kill is found"
    assert not list((path / "projections").glob("slot-0.recall.tmp-*"))


def test_a_torn_file_under_the_final_name_is_detected_and_rebuilt(
    store: tuple[Path, list[str], str],
) -> None:
    path, asked, target = store
    final = path / "projections" / "slot-0.recall"
    kill_while_writing(path, "recall_index.write", target)
    [torn] = (path / "projections").glob("slot-0.recall.tmp-*")
    os.replace(torn, final)  # as if the rename had reached the disk before the data
    expected = rebuilt_answers(path, asked)
    with MemoryEngine.open(path) as engine:
        got = answers(engine, asked)
        stored = engine.recall_index._stored
        assert stored is not None and stored.reason == "torn"
        assert engine.recall_index.loaded[BENCH_NAMESPACE.key()] == "built"
    assert got == expected
    with MemoryEngine.open(path) as engine:  # and the file written at that close is whole
        assert answers(engine, asked) == expected
        assert engine.recall_index.loaded[BENCH_NAMESPACE.key()] == "file"
