"""More evidence per memory: a second vector for the transcript turn a memory came from,
the better of the two cosines counting; memories of one turn share the turn's embedding;
files written before the ``field`` column existed keep their vectors as statements."""

from __future__ import annotations

from pathlib import Path

import duckdb

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.commands.recall import HybridFusion
from memory_ledger.projections.vectors import VectorStore
from tests.conftest import make_item
from tests.recall.test_semantic_recall import BagProvider

NS = Namespace("acme", "alice", "assistant")


def observe(engine: MemoryEngine, transcript: str, *statements: str) -> None:
    extractor = RecordedExtractor()
    session = engine.session(NS, "s1", extractor=extractor)
    extractor.provide(1, [make_item(s) for s in statements])
    session.observe_final_transcript(1, transcript)
    session.finish()


def test_a_memory_is_found_by_the_turn_it_came_from(tmp_path: Path) -> None:
    provider = BagProvider()
    with MemoryEngine.open(tmp_path / "s", embeddings=provider, index_in_background=False) as e:
        observe(e, "user: we booked the flight to Tokyo", "Alice has plans for Friday.")
        extractor = RecordedExtractor()
        other = e.session(NS, "s2", extractor=extractor)
        extractor.provide(1, [make_item("Alice bakes bread on Sundays.")])
        other.observe_final_transcript(1, "user: my sourdough starter")
        other.finish()
        e.index_vectors()
        # "journey" shares only the concept travel, and only with the first memory's turn
        (hit,) = e.recall(NS, "journey", 1)
        assert hit.statement == "Alice has plans for Friday."
        channel = e.semantic
        assert channel is not None
        with e.read_models(catch_up=False):
            _, by_id = e.recall_index.docs(NS, e.projection_position)
            vector, _ = channel.embed_query("journey")
            assert vector is not None
            source = channel.search(NS, vector, by_id, 2, ("source",))
            statement = channel.search(NS, vector, by_id, 2, ("statement",))
            both = dict(channel.search(NS, vector, by_id, 2))
        best_source = dict(source)[hit.memory_id]
        assert best_source > dict(statement)[hit.memory_id]
        assert both[hit.memory_id] == max(best_source, dict(statement)[hit.memory_id])
        e.fusion = HybridFusion(fields=("statement",))  # the statement alone: no travel
        assert e.recall(NS, "journey", 1)[0].score < hit.score


def test_memories_of_one_turn_share_the_turn_embedding(tmp_path: Path) -> None:
    provider = BagProvider()
    with MemoryEngine.open(tmp_path / "s", embeddings=provider, index_in_background=False) as e:
        provider.texts.clear()
        observe(e, "user: coffee talk", "Alice likes espresso.", "Alice orders a latte.")
        # The statements came with the finish, in one call.
        assert provider.texts[-2:] == ["Alice likes espresso.", "Alice orders a latte."]
        provider.texts.clear()
        assert e.index_vectors() == 2  # two source rows
        assert provider.texts == ["user: coffee talk"]  # the turn's text embedded once


def test_vectors_of_a_file_without_the_field_column_count_as_statements(tmp_path: Path) -> None:
    conn = duckdb.connect(str(tmp_path / "old.duckdb"))
    conn.execute(
        "CREATE TABLE memory_vectors (tenant VARCHAR NOT NULL, principal VARCHAR NOT NULL, "
        "scope_id VARCHAR NOT NULL, memory_id VARCHAR NOT NULL, revision BIGINT NOT NULL, "
        "content_digest VARCHAR NOT NULL, model_key VARCHAR NOT NULL, dimension INTEGER NOT "
        "NULL, vector FLOAT[] NOT NULL, embedded_at TIMESTAMPTZ NOT NULL, seq BIGINT NOT NULL)"
    )
    conn.execute(
        "INSERT INTO memory_vectors VALUES ('t', 'p', 's', 'm1', 1, 'd', 'k', 2, [1.0, 0.0], "
        "now(), 1)"
    )
    VectorStore(conn)
    rows = conn.execute("SELECT memory_id, field FROM memory_vectors").fetchall()
    assert rows == [("m1", "statement")]


def test_source_vectors_can_be_turned_off(tmp_path: Path) -> None:
    provider = BagProvider()
    with MemoryEngine.open(
        tmp_path / "s", embeddings=provider, index_in_background=False, source_vectors=False
    ) as e:
        observe(e, "user: coffee talk", "Alice likes espresso.")
        assert e.index_vectors() == 0  # the statement came with the command; no source
        health = e.maintenance_health()
        assert [c.field for c in health.coverage] == ["statement"]
        assert health.state == "ready"
