"""A hybrid recall in the writing process waits for nothing (issue 35): the semantic
channel verifies its vectors and counts coverage against the serving state's documents,
so DuckDB's projection position stays behind while the recall finds a new memory by its
vector, and a superseded memory's vector is never served, whether the command's own events
retired it or the serving state's changes did.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory_ledger.commands import MemoryEngine
from tests.recall.test_vectors_ack import DOG, NS, OTHERS, ConceptProvider


def _duckdb_position(engine: MemoryEngine) -> int:
    return engine.runner.position


def test_a_hybrid_recall_after_a_write_finds_it_by_cosine_without_catching_duckdb_up(
    tmp_path: Path,
) -> None:
    provider = ConceptProvider()
    with MemoryEngine.open(tmp_path / "s", embeddings=provider, index_in_background=False) as e:
        e.remember_many(NS, OTHERS)
        e.recall(NS, "canine", 3)  # the namespace's vectors are held from here on
        behind = _duckdb_position(e)
        put = e.remember(NS, DOG)
        result = e.recall(NS, "canine", 3)
        assert result.results[0].memory_id == str(put.memory_id)  # by its vector only
        assert _duckdb_position(e) == behind < result.position  # DuckDB was not caught up
        status = result.semantic
        assert status is not None and status.state == "ready"
        assert (status.retrievable, status.embedded) == (21, 21)


def test_a_first_hybrid_recall_loads_vectors_while_duckdb_is_behind(tmp_path: Path) -> None:
    provider = ConceptProvider()
    with MemoryEngine.open(tmp_path / "s", embeddings=provider, index_in_background=False) as e:
        put = e.remember(NS, DOG)
        e.remember_many(NS, OTHERS)
        assert e.semantic is not None
        with e.projections.lock:
            e.semantic.flush()  # the rows are written; canonical_memory stays behind
        e.semantic.served.cache.clear()  # the next recall reads the namespace's rows from DuckDB
        behind = _duckdb_position(e)
        result = e.recall(NS, "canine", 3)
        assert result.results[0].memory_id == str(put.memory_id)
        assert _duckdb_position(e) == behind < result.position
        assert result.semantic is not None and result.semantic.state == "ready"
        assert result.semantic.embedded == 21


@pytest.mark.parametrize("own_events", [True, False])
def test_a_superseded_memorys_vector_is_never_served_without_duckdb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, own_events: bool
) -> None:
    provider = ConceptProvider()
    with MemoryEngine.open(tmp_path / "s", embeddings=provider, index_in_background=False) as e:
        assert e.semantic is not None
        old = e.remember(NS, "Alice's pet is a puppy.", subject="Alice", predicate="pet")
        assert e.recall(NS, "canine", 5).results[0].memory_id == str(old.memory_id)
        behind = _duckdb_position(e)
        if not own_events:  # as if another process wrote it: only the serving state knows
            monkeypatch.setattr(e.semantic, "embed_appended", lambda *a, **k: None)
        new = e.remember(NS, "Alice's pet is a kitten.", subject="Alice", predicate="pet")
        result = e.recall(NS, "canine", 5)
        assert str(old.memory_id) not in [h.memory_id for h in result.results]
        assert _duckdb_position(e) == behind < result.position
        status = result.semantic
        assert status is not None and status.retrievable == 1
        if own_events:
            assert status.state == "ready"
            feline = e.recall(NS, "feline", 5).results
            assert [h.memory_id for h in feline] == [str(new.memory_id)]
        else:
            assert (status.state, status.pending) == ("partial", 1)  # until the indexer
            monkeypatch.undo()
            assert e.index_vectors() == 1
            feline = e.recall(NS, "feline", 5)
            assert [h.memory_id for h in feline.results] == [str(new.memory_id)]
            assert feline.semantic is not None and feline.semantic.state == "ready"
        e.forget(NS, new.memory_id)
        assert e.recall(NS, "feline", 5).results == ()
        assert e.recall(NS, "canine", 5).results == ()
