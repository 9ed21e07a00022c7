"""The served vectors in the persisted recall index (format 3): a new process starts a
namespace's vectors from the file's block (a view of the map, no DuckDB read), answers as a
process that reads them from DuckDB, detects a damaged block, and an erased namespace's
block leaves the file; the writer holds the vectors of the namespaces it writes."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from benchmarks.corpus import BENCH_NAMESPACE, fill, memories, queries
from benchmarks.hybrid import HashingProvider
from memory_ledger.commands import MemoryEngine
from memory_ledger.commands.recall.index_file import RecallIndexFile, fingerprint
from memory_ledger.ledger.ids import Namespace

OTHER = Namespace("bench", "user-2", "assistant")


def index_file(store: Path) -> Path:
    [found] = (store / "projections").glob("slot-*.recall")
    return found


def answers(engine: MemoryEngine, namespace: Namespace, asked: list[str]) -> list[list[str]]:
    out = []
    for question in asked:
        result = engine.recall(namespace, question, 8)
        assert result.semantic is not None and result.semantic.state == "ready"
        out.append([h.memory_id for h in result])
    return out


def open_hybrid(path: Path, **options: Any) -> MemoryEngine:
    return MemoryEngine.open(
        path, embeddings=HashingProvider(), index_in_background=False, **options
    )


def duckdb_answers(path: Path, namespace: Namespace, asked: list[str]) -> list[list[str]]:
    """What a process answers that reads the vectors from DuckDB (no file)."""
    for found in (path / "projections").glob("slot-*.recall"):
        found.unlink()
    with open_hybrid(path) as engine:
        result = answers(engine, namespace, asked)
        engine.recall_index._dirty.clear()  # leave no file behind
        assert engine.semantic is not None
        engine.semantic.served.changed = False
    return result


def stored_file(path: Path, engine_head: int) -> RecallIndexFile:
    return RecallIndexFile(index_file(path), fingerprint(True), engine_head)


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, list[str]]:
    corpus = memories(400)
    with open_hybrid(tmp_path / "s", sync=False) as engine:
        fill(engine, corpus[:300])
        fill(engine, corpus[300:], OTHER)
        engine.index_vectors()
        engine.recall(BENCH_NAMESPACE, "anything", 3)
        engine.recall(OTHER, "anything", 3)
    return tmp_path / "s", queries(corpus[:300], 12, seed=5)


def test_a_new_process_serves_the_stored_vectors_as_duckdb_would(
    store: tuple[Path, list[str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    path, asked = store
    with open_hybrid(path) as engine:
        assert engine.semantic is not None
        loads: list[int] = []
        load = engine.semantic.vectors.load

        def counted(*args: Any, **kwargs: Any) -> Any:
            found = load(*args, **kwargs)
            loads.append(len(found.memory_ids))
            return found

        monkeypatch.setattr(engine.semantic.vectors, "load", counted)
        stored = answers(engine, BENCH_NAMESPACE, asked)
        held = engine.semantic.served.cache[BENCH_NAMESPACE.key()]
        assert not held.matrix.flags.writeable  # the file's map, not a copy
        assert loads == [0]  # only the rows after the block: none
    assert stored == duckdb_answers(path, BENCH_NAMESPACE, asked)
    assert any(stored)


def test_vectors_written_after_the_file_are_read_from_duckdb(
    store: tuple[Path, list[str]],
) -> None:
    path, _ = store
    statement = "Quentin Zabriskie collects antique harmoniums."
    with open_hybrid(path) as engine:
        added = engine.remember(BENCH_NAMESPACE, statement)
        assert engine.semantic is not None
        engine.semantic.flush()
        engine.recall_index._dirty.clear()  # as if the process died: the file stays older
        engine.semantic.served.changed = False
    with open_hybrid(path) as engine:
        found = engine.recall(BENCH_NAMESPACE, statement, 3)
        assert found.semantic is not None and found.semantic.state == "ready"
        held = engine.semantic.served.cache[BENCH_NAMESPACE.key()] if engine.semantic else None
        assert held is not None and (str(added.memory_id), "statement") in held.row_of
        assert found[0].memory_id == str(added.memory_id)


def test_a_damaged_vector_block_is_detected_and_read_from_duckdb(
    store: tuple[Path, list[str]],
) -> None:
    path, asked = store
    with MemoryEngine.open(path) as engine:
        head = engine.head
    opened = stored_file(path, head)
    assert opened._directory is not None
    entry = opened._directory.vectors[HashingProvider().descriptor.model_key()][
        BENCH_NAMESPACE.key()
    ]
    opened.close()
    target = index_file(path)
    raw = bytearray(target.read_bytes())
    raw[entry.matrix_offset + 4 * entry.dimension * (entry.rows // 2)] ^= 0xFF
    target.write_bytes(bytes(raw))
    with open_hybrid(path) as engine:
        damaged = answers(engine, BENCH_NAMESPACE, asked)
        assert engine.recall_index._stored is not None
        assert engine.recall_index._stored.reason == "torn"
    assert damaged == duckdb_answers(path, BENCH_NAMESPACE, asked)


def test_an_erased_namespace_leaves_no_vector_block(tmp_path: Path) -> None:
    key = os.urandom(32)
    path = tmp_path / "enc"
    with open_hybrid(path, master_key=key, sync=False) as engine:
        engine.remember(OTHER, "Zebulon plays the theremin in Ulaanbaatar.")
        engine.remember(BENCH_NAMESPACE, "Maya keeps bees on her roof.")
        engine.recall(OTHER, "theremin", 3)
        engine.recall(BENCH_NAMESPACE, "bees", 3)
        head = engine.head
    model_key = HashingProvider().descriptor.model_key()
    opened = stored_file(path, head)
    assert opened.vector_namespaces(model_key) == sorted([BENCH_NAMESPACE.key(), OTHER.key()])
    opened.close()
    with open_hybrid(path, master_key=key) as engine:
        engine.erase(OTHER.tenant, OTHER.principal, OTHER.scope_id, requested_by="test")
        assert engine.recall(BENCH_NAMESPACE, "bees", 3).results
        head = engine.head
    opened = stored_file(path, head)
    assert opened.vector_namespaces(model_key) == [BENCH_NAMESPACE.key()]
    opened.close()


def test_the_writer_holds_the_vectors_it_writes(tmp_path: Path) -> None:
    corpus = memories(200)
    with open_hybrid(tmp_path / "w", sync=False) as engine:
        for start in range(0, 200, 50):
            engine.remember_many(BENCH_NAMESPACE, [m.statement for m in corpus[start : start + 50]])
        assert engine.semantic is not None
        held = engine.semantic.served.cache[BENCH_NAMESPACE.key()]  # before any recall
        assert len(held) - held.dead == 200 and not held.missing
        assert engine.semantic.served.unpersisted == 200  # nothing was written to hold them
        asked = queries(corpus, 5, seed=2)
        writer = answers(engine, BENCH_NAMESPACE, asked)
    with open_hybrid(tmp_path / "w") as engine:
        assert answers(engine, BENCH_NAMESPACE, asked) == writer


def test_an_adopted_block_finds_rows_by_bisection_as_its_map_would() -> None:
    import numpy as np

    from memory_ledger.commands.recall.served_vectors import _NamespaceVectors
    from memory_ledger.projections.vectors import StoredVectors

    ids = [f"m-{n % 37:03d}-{n}" for n in range(120)]
    fields = ["source" if n % 3 == 0 else "statement" for n in range(120)]
    held = _NamespaceVectors(4, 7)
    held.extend(
        StoredVectors(
            memory_ids=tuple(ids),
            revisions=(1,) * 120,
            digests=tuple(f"d{n}" for n in range(120)),
            last_seq=120,
            matrix=np.arange(480, dtype=np.float32).reshape(120, 4),
            fields=tuple(fields),
        )
    )
    held.retire(ids[5], False)  # a dead row stays out of the block
    meta, matrix, _ = held.block(120)
    adopted = _NamespaceVectors(4, 0)
    adopted.adopt(meta, matrix)
    asked = [(i, f) for i in [*ids, "absent", "m-"] for f in ("statement", "source")]
    by_bisection = [adopted.find(i, f) for i, f in asked]
    assert adopted._row_of is None  # no map was built
    assert by_bisection == [adopted.row_of.get(key) for key in asked]
    assert adopted.find(ids[5], fields[5]) is None
    assert adopted.find(ids[6], fields[6]) is not None
