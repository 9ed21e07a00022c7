"""The approximate index persisted beside each namespace's vectors in the recall file: a
fresh process restores it instead of building it and answers as exact search does; a damaged
index block is ignored (the index rebuilt, the vectors still served from the file); an
erased namespace's index leaves the file with its vectors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.corpus import BENCH_NAMESPACE, fill, memories, queries
from benchmarks.hybrid import HashingProvider
from memory_ledger.commands import MemoryEngine
from memory_ledger.commands.recall import ann
from memory_ledger.commands.recall.served_vectors import _NamespaceVectors
from memory_ledger.ledger.ids import Namespace
from tests.recall.test_index_file_vectors import answers, index_file, open_hybrid, stored_file

pytestmark = pytest.mark.skipif(not ann.available(), reason="the ann extra (faiss) is absent")

OTHER = Namespace("bench", "user-2", "assistant")
MODEL = HashingProvider().descriptor.model_key()


def through_index(engine: MemoryEngine, threshold: int | None = 100) -> None:
    """Search every namespace of ``threshold`` live rows or more through the index, built
    (or restored) by the first search that needs it."""
    assert engine.semantic is not None
    engine.semantic.ann_threshold = threshold
    engine.semantic.ann_background = False


def held(engine: MemoryEngine, namespace: Namespace = BENCH_NAMESPACE) -> _NamespaceVectors:
    assert engine.semantic is not None
    return engine.semantic.served.cache[namespace.key()]


def exact_answers(path: Path, asked: list[str]) -> list[list[str]]:
    with open_hybrid(path) as engine:
        through_index(engine, None)
        found = answers(engine, BENCH_NAMESPACE, asked)
        assert held(engine).ann_source is None
    return found


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, list[str]]:
    corpus = memories(300)
    with open_hybrid(tmp_path / "s", sync=False) as engine:
        fill(engine, corpus)
        engine.index_vectors()
        through_index(engine)
        engine.recall(BENCH_NAMESPACE, "anything", 3)
        assert held(engine).ann_source == "built"
    return tmp_path / "s", queries(corpus, 12, seed=5)


def ann_entry(path: Path) -> Any:
    with MemoryEngine.open(path) as engine:
        head = engine.head
    opened = stored_file(path, head)
    assert opened._directory is not None
    entry = opened._directory.vectors[MODEL][BENCH_NAMESPACE.key()]
    opened.close()
    return entry


def test_a_fresh_process_restores_the_index_and_answers_as_exact_search(
    store: tuple[Path, list[str]],
) -> None:
    path, asked = store
    entry = ann_entry(path)
    assert entry.ann_length > 0 and entry.ann_rows == entry.rows
    with open_hybrid(path) as engine:
        through_index(engine)
        restored = answers(engine, BENCH_NAMESPACE, asked)
        assert held(engine).ann_source == "restored"  # loaded, not trained again
        assert held(engine).approximate
    assert restored == exact_answers(path, asked)
    assert any(restored)


def test_an_index_holding_dead_rows_is_persisted_without_them(
    store: tuple[Path, list[str]],
) -> None:
    path, asked = store
    with open_hybrid(path) as engine:
        through_index(engine)
        before = answers(engine, BENCH_NAMESPACE, asked)
        gone = {hit for found in before for hit in found[:2]}
        for memory_id in gone:
            engine.forget(BENCH_NAMESPACE, memory_id)
        assert held(engine).dead  # rows the index still holds
        index = held(engine)._ann
        assert index is not None and index.size == len(held(engine))
    entry = ann_entry(path)
    assert entry.ann_rows == entry.rows  # the forgotten rows' entries went, the rest renumbered
    with open_hybrid(path) as engine:
        through_index(engine)
        restored = answers(engine, BENCH_NAMESPACE, asked)
        assert held(engine).ann_source == "restored"
    assert restored == exact_answers(path, asked)
    assert not gone & {hit for found in restored for hit in found}


def test_rows_after_the_persisted_index_are_added_to_it(
    store: tuple[Path, list[str]],
) -> None:
    path, asked = store
    statement = "Quentin Zabriskie collects antique harmoniums."
    with open_hybrid(path) as engine:
        added = engine.remember(BENCH_NAMESPACE, statement)
        through_index(engine)
        found = engine.recall(BENCH_NAMESPACE, statement, 3)
        assert held(engine).ann_source == "restored"
        index = held(engine)._ann
        assert index is not None and index.size == len(held(engine))
        assert found[0].memory_id == str(added.memory_id)


def test_a_damaged_index_block_is_ignored_and_rebuilt(store: tuple[Path, list[str]]) -> None:
    path, asked = store
    entry = ann_entry(path)
    target = index_file(path)
    raw = bytearray(target.read_bytes())
    raw[entry.ann_offset + entry.ann_length // 2] ^= 0xFF
    target.write_bytes(bytes(raw))
    with open_hybrid(path) as engine:
        through_index(engine)
        damaged = answers(engine, BENCH_NAMESPACE, asked)
        assert held(engine).ann_source == "built"
        assert not held(engine).matrix.flags.writeable  # the vectors still came from the file
        assert engine.recall_index._stored is not None
        assert engine.recall_index._stored.reason is None
    assert damaged == exact_answers(path, asked)
    assert ann_entry(path).ann_length > 0  # the rebuilt index went into the next file


def test_an_erased_namespace_takes_its_index_out_of_the_file(tmp_path: Path) -> None:
    key = os.urandom(32)
    path = tmp_path / "enc"
    with open_hybrid(path, master_key=key, sync=False) as engine:
        through_index(engine, 1)
        engine.remember(OTHER, "Zebulon plays the theremin in Ulaanbaatar.")
        engine.remember(BENCH_NAMESPACE, "Maya keeps bees on her roof.")
        engine.recall(OTHER, "theremin", 3)
        engine.recall(BENCH_NAMESPACE, "bees", 3)
        head = engine.head
    opened = stored_file(path, head)
    assert opened._directory is not None
    stored = opened._directory.vectors[MODEL]
    assert sorted(stored) == sorted([BENCH_NAMESPACE.key(), OTHER.key()])
    assert all(entry.ann_length > 0 for entry in stored.values())
    opened.close()
    with open_hybrid(path, master_key=key) as engine:
        through_index(engine, 1)
        engine.erase(OTHER.tenant, OTHER.principal, OTHER.scope_id, requested_by="test")
        assert engine.recall(BENCH_NAMESPACE, "bees", 3).results
        head = engine.head
    opened = stored_file(path, head)
    assert opened._directory is not None
    assert list(opened._directory.vectors[MODEL]) == [BENCH_NAMESPACE.key()]
    opened.close()


def test_a_compacted_index_proposes_the_same_rows_renumbered() -> None:
    rng = np.random.default_rng(3)
    matrix = rng.standard_normal((4_000, 32)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    index = ann.ApproximateIndex(32, 4_000)
    index.train(matrix)
    index.add(matrix, 4_000)
    kept = np.flatnonzero(rng.random(4_000) > 0.2).astype(np.int64)
    data, rows = index.serialize(kept)
    assert rows == len(kept)
    restored = ann.ApproximateIndex.restore(data, 32, rows)
    assert restored is not None and index.size == 4_000  # the original is left whole
    for query in matrix[:20]:
        original = index.candidates(query, 50).tolist()
        expected = [int(np.searchsorted(kept, r)) for r in original if r in set(kept.tolist())]
        assert sorted(restored.candidates(query, len(expected)).tolist()) == sorted(expected)
