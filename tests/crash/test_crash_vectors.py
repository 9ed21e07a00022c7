"""SIGKILL while vectors are written: after a restart nothing half-written is served, the
indexer finishes, and hybrid recall equals that of a fresh process over the same ledger.

A child process opens a store with the deterministic hashing provider of the hybrid
benchmark, embeds in batches, and blocks at the ``vectors.commit`` fault point (inside the
DuckDB transaction of its ``kill_at``-th batch, rows written, not committed) where the
parent SIGKILLs it. The parent then reopens the store (a new process's view of the same
files) and checks the invariants.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from benchmarks.corpus import BENCH_NAMESPACE, fill, memories, queries
from benchmarks.hybrid import HashingProvider
from memory_ledger.commands import MemoryEngine
from memory_ledger.replay import verify_store

REPO = Path(__file__).resolve().parents[2]
CORPUS = 300
BATCH = 16

CHILD = textwrap.dedent(
    """
    import sys, time
    from memory_ledger.ledger.faults import FAULTS
    from benchmarks.hybrid import HashingProvider
    from memory_ledger.commands import MemoryEngine

    store, kill_at, batch = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    calls = 0

    def block() -> None:
        global calls
        calls += 1
        if calls == kill_at:
            print("AT_FAULT", flush=True)
            time.sleep(600)

    FAULTS["vectors.commit"] = block
    with MemoryEngine.open(store, embeddings=HashingProvider(), index_in_background=False) as e:
        assert e.semantic is not None
        e.catch_up()
        while pending := e.semantic.pending(batch):
            e.semantic.embed_and_store(pending)
    print("DONE", flush=True)
    """
)


def vector_rows(engine: MemoryEngine) -> list[tuple[str, int, str]]:
    with engine.projections.lock:
        rows = engine.projections.conn.execute(
            "SELECT memory_id, revision, content_digest FROM memory_vectors ORDER BY memory_id"
        ).fetchall()
    return [(str(r[0]), int(r[1]), str(r[2])) for r in rows]


def run_child_until_killed(store: Path, kill_at: int) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(store), str(kill_at), str(BATCH)],
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
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)


@pytest.mark.parametrize("kill_at", [1, 3, 7])
def test_kill_inside_a_vector_batch_then_restart(tmp_path: Path, kill_at: int) -> None:
    store = tmp_path / "store"
    corpus = memories(CORPUS)
    with MemoryEngine.open(store, sync=False) as engine:
        fill(engine, corpus)
    run_child_until_killed(store, kill_at)

    asked = queries(corpus, 40)
    with MemoryEngine.open(store, embeddings=HashingProvider(), index_in_background=False) as e:
        assert verify_store(e).ok
        rows = vector_rows(e)
        # the killed batch left nothing: exactly the committed batches are there
        assert len(rows) == (kill_at - 1) * BATCH
        assert len({r[0] for r in rows}) == len(rows)
        assert e.wait_for_vectors(60.0)
        rows = vector_rows(e)
        assert len(rows) == CORPUS == len({r[0] for r in rows})
        survived = [e.recall(BENCH_NAMESPACE, q, 5) for q in asked]
        assert all(r.semantic is not None and r.semantic.state == "ready" for r in survived)

    fresh = tmp_path / "fresh"
    shutil.copytree(store / "ledger", fresh / "ledger")  # the ledger alone
    with MemoryEngine.open(fresh, embeddings=HashingProvider(), index_in_background=False) as f:
        assert f.wait_for_vectors(60.0)
        assert vector_rows(f) == rows
        expected = [f.recall(BENCH_NAMESPACE, q, 5) for q in asked]
    for got, want in zip(survived, expected, strict=True):
        assert [(h.memory_id, h.score) for h in got.results] == [
            (h.memory_id, h.score) for h in want.results
        ]
