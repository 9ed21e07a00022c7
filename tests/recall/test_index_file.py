"""The persisted recall index (``commands/recall/index_file.py``): a new process reads it
instead of rebuilding, catches up only what changed after its position, serves exactly
what a fresh build serves, and never serves a torn, foreign or erased file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from benchmarks.corpus import BENCH_NAMESPACE, fill, memories, queries
from memory_ledger.commands import MemoryEngine
from memory_ledger.commands.engine.memory_engine import recall_index_path
from memory_ledger.commands.recall.index_file import FORMAT_VERSION, MAGIC
from memory_ledger.ledger.ids import Namespace
from memory_ledger.projections.text_index import BM25Index, IndexedDoc

OTHER = Namespace("bench", "user-2", "assistant")
WORDS = ["espresso", "kayak", "paris", "ramen", "violin", "tango", "orchid", "granite"]


def answers(engine: MemoryEngine, namespace: Namespace, asked: list[str]) -> list[list[str]]:
    return [[h.memory_id for h in engine.recall(namespace, q, 8)] for q in asked]


def index_file(store: Path) -> Path:
    [found] = (store / "projections").glob("slot-*.recall")
    return found


def fresh_answers(store: Path, namespace: Namespace, asked: list[str]) -> list[list[str]]:
    """What a process that rebuilds the index from the projections answers."""
    for found in (store / "projections").glob("slot-*.recall"):
        found.unlink()
    with MemoryEngine.open(store) as engine:
        result = answers(engine, namespace, asked)
        assert engine.recall_index.loaded[namespace.key()] == "built"
        engine.recall_index._dirty.clear()  # leave no file behind: the caller's test decides
    return result


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, list[str]]:
    corpus = memories(600)
    with MemoryEngine.open(tmp_path / "s", sync=False) as engine:
        fill(engine, corpus[:500])
        fill(engine, corpus[500:], OTHER)
        engine.recall(BENCH_NAMESPACE, "anything", 3)
        engine.recall(OTHER, "anything", 3)
    return tmp_path / "s", queries(corpus[:500], 25, seed=3)


def test_a_new_process_reads_the_file_and_answers_as_a_fresh_build(
    store: tuple[Path, list[str]],
) -> None:
    path, asked = store
    assert index_file(path).read_bytes()[:8] == MAGIC
    with MemoryEngine.open(path) as engine:
        stored = answers(engine, BENCH_NAMESPACE, asked)
        assert engine.recall_index.loaded == {BENCH_NAMESPACE.key(): "file"}
    assert stored == fresh_answers(path, BENCH_NAMESPACE, asked)
    assert any(stored)


def test_namespaces_stay_apart_in_the_file(store: tuple[Path, list[str]]) -> None:
    path, asked = store
    with MemoryEngine.open(path) as engine:
        mine = {i for ids in answers(engine, BENCH_NAMESPACE, asked) for i in ids}
        theirs = {i for ids in answers(engine, OTHER, asked) for i in ids}
        assert engine.recall_index.loaded == {
            BENCH_NAMESPACE.key(): "file",
            OTHER.key(): "file",
        }
    assert mine and theirs and not mine & theirs


def test_catches_up_only_after_its_position_writes_forgets_and_corrections(
    store: tuple[Path, list[str]],
) -> None:
    path, asked = store
    with MemoryEngine.open(path) as engine:
        target = engine.recall(BENCH_NAMESPACE, asked[0], 1)[0]
        engine.forget(BENCH_NAMESPACE, target.memory_id)
        added = engine.remember(BENCH_NAMESPACE, "Quentin Zabriskie collects antique harmoniums.")
        engine.recall_index._dirty.clear()  # as if the process died: the file stays older
    with MemoryEngine.open(path) as engine:
        assert engine.recall_index._stored is not None
        assert engine.recall_index._stored.position < engine.head
        found = engine.recall(BENCH_NAMESPACE, "antique harmoniums", 3)
        assert engine.recall_index.loaded == {BENCH_NAMESPACE.key(): "file"}
        assert found[0].memory_id == str(added.memory_id)
        stored = answers(engine, BENCH_NAMESPACE, asked)
        assert all(target.memory_id not in ids for ids in stored)
    assert stored == fresh_answers(path, BENCH_NAMESPACE, asked)


def test_forget_all_empties_the_stored_namespace(store: tuple[Path, list[str]]) -> None:
    path, asked = store
    with MemoryEngine.open(path) as engine:
        engine.forget_all(BENCH_NAMESPACE)
        engine.recall_index._dirty.clear()
    with MemoryEngine.open(path) as engine:
        assert answers(engine, BENCH_NAMESPACE, asked) == [[] for _ in asked]
        assert any(answers(engine, OTHER, asked))


@pytest.mark.parametrize(
    "damage", ["truncate", "flip", "version", "old_version", "garbage", "empty"]
)
def test_a_damaged_file_is_detected_removed_and_rebuilt(
    store: tuple[Path, list[str]], damage: str
) -> None:
    path, asked = store
    expected = fresh_answers(path, BENCH_NAMESPACE, asked)
    with MemoryEngine.open(path) as engine:  # write the file again
        engine.recall(BENCH_NAMESPACE, "x", 1)
        engine.recall_index._dirty.add(BENCH_NAMESPACE.key())
    target = index_file(path)
    raw = bytearray(target.read_bytes())
    if damage == "truncate":
        raw = raw[: len(raw) // 2]
    elif damage == "flip":
        raw[len(raw) // 3] ^= 0xFF
    elif damage == "version":
        raw[8:12] = (FORMAT_VERSION + 1).to_bytes(4, "little")
    elif damage == "old_version":  # a file of the format before: rebuilt (format step)
        raw[8:12] = (FORMAT_VERSION - 1).to_bytes(4, "little")
    elif damage == "garbage":
        raw = bytearray(os.urandom(len(raw)))
    else:
        raw = bytearray()
    target.write_bytes(bytes(raw))
    with MemoryEngine.open(path) as engine:
        assert answers(engine, BENCH_NAMESPACE, asked) == expected
        stored = engine.recall_index._stored
        assert stored is not None and stored.reason in {"torn", "format", "damaged", "missing"}
        assert engine.recall_index.loaded[BENCH_NAMESPACE.key()] == "built"
    with MemoryEngine.open(path) as engine:  # the rebuilt index was written whole
        assert answers(engine, BENCH_NAMESPACE, asked) == expected
        assert engine.recall_index.loaded[BENCH_NAMESPACE.key()] == "file"


def test_a_file_ahead_of_the_ledger_is_not_served(
    store: tuple[Path, list[str]], tmp_path: Path
) -> None:
    path, asked = store
    other = tmp_path / "other"
    with MemoryEngine.open(other, sync=False) as engine:
        fill(engine, memories(30))
    (other / "projections").mkdir(exist_ok=True)
    target = recall_index_path(other / "projections" / "slot-0.duckdb")
    target.write_bytes(index_file(path).read_bytes())
    with MemoryEngine.open(other) as engine:
        assert engine.recall_index._stored is not None
        assert engine.recall_index._stored.reason == "ahead_of_ledger"
        assert engine.recall(BENCH_NAMESPACE, asked[0], 3).results


def test_an_erased_namespace_leaves_the_file(tmp_path: Path) -> None:
    key = os.urandom(32)
    path = tmp_path / "enc"
    with MemoryEngine.open(path, master_key=key, sync=False) as engine:
        engine.remember(OTHER, "Zebulon plays the theremin in Ulaanbaatar.")
        engine.remember(BENCH_NAMESPACE, "Maya keeps bees on her roof.")
        engine.recall(OTHER, "theremin", 3)
        engine.recall(BENCH_NAMESPACE, "bees", 3)
    assert b"theremin" in index_file(path).read_bytes()
    with MemoryEngine.open(path, master_key=key) as engine:
        engine.erase(OTHER.tenant, OTHER.principal, OTHER.scope_id, requested_by="test")
        assert engine.recall(BENCH_NAMESPACE, "bees", 3).results
        assert not engine.recall(OTHER, "theremin", 3).results
    for found in (path / "projections").glob("slot-*.recall*"):
        assert b"theremin" not in found.read_bytes()
        assert b"Ulaanbaatar" not in found.read_bytes()
    with MemoryEngine.open(path, master_key=key) as engine:
        assert not engine.recall(OTHER, "theremin", 3).results
        assert engine.recall(BENCH_NAMESPACE, "bees", 3).results


def test_a_stored_namespace_whose_key_was_erased_is_never_read(tmp_path: Path) -> None:
    """A crash between the erasure's projection commit and the file's removal leaves an old
    file: the keyring says the namespace was erased, so its blob is not read."""
    key = os.urandom(32)
    path = tmp_path / "enc"
    with MemoryEngine.open(path, master_key=key, sync=False) as engine:
        engine.remember(OTHER, "Zebulon plays the theremin in Ulaanbaatar.")
        engine.recall(OTHER, "theremin", 3)
    kept = index_file(path).read_bytes()
    with MemoryEngine.open(path, master_key=key) as engine:
        engine.erase(OTHER.tenant, OTHER.principal, OTHER.scope_id, requested_by="test")
    index_file_path = recall_index_path(path / "projections" / "slot-0.duckdb")
    index_file_path.write_bytes(kept)
    with MemoryEngine.open(path, master_key=key) as engine:
        assert not engine.recall(OTHER, "theremin", 3).results
    assert not index_file_path.exists() or b"theremin" not in index_file_path.read_bytes()


@settings(max_examples=40, deadline=None)
@given(
    docs=st.lists(st.lists(st.sampled_from(WORDS), min_size=0, max_size=6), max_size=25),
    removed=st.sets(st.integers(0, 24)),
    later=st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=4), max_size=5),
    later_removed=st.sets(st.integers(0, 24)),
)
def test_a_restored_bm25_index_scores_as_the_original_through_any_mutations(
    docs: list[list[str]],
    removed: set[int],
    later: list[list[str]],
    later_removed: set[int],
) -> None:
    original = BM25Index()
    for number, words in enumerate(docs):
        original.add(IndexedDoc(f"d{number}", number, " ".join(words)))
    for number in removed:
        if f"d{number}" in original:
            original.remove(f"d{number}")
    restored = BM25Index.from_state(original.state())
    assert restored.state() == original.state()
    for index in (original, restored):
        for number, words in enumerate(later):
            index.add(IndexedDoc(f"n{number}", 100 + number, " ".join(words)))
        for number in later_removed:
            if f"d{number}" in index:
                index.remove(f"d{number}")
    assert len(restored) == len(original)
    for query in [*WORDS, "espresso kayak", "paris paris ramen", "nothing"]:
        assert restored.search(query, 10) == original.search(query, 10)
    assert BM25Index.from_state(restored.state()).state() == restored.state()
