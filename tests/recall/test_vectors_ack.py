"""Vectors before the acknowledgement (issue 35, item 2): a command's memories are embedded
before it returns, in as few provider calls as it takes, and a search right after uses
them; a provider that fails leaves the write standing and the vectors pending, reported by
the search and filled later by the indexer; the rows are written behind, so a fresh process
opens with them.

:class:`ConceptProvider` maps words to concepts ("canine" and "dog" share ``dog``), so a
memory about a dog is found by the query "canine" through its vector only: no word of the
query is in the memory, BM25 finds nothing.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.embeddings import EmbeddingDescriptor
from memory_ledger.commands.recall.foreground import OwnPositions, appended_vectors
from memory_ledger.ledger.events import ExtractedItem, MemoryActivated
from tests.conftest import make_item

DIM = 32
CONCEPTS = {"canine": "dog", "puppy": "dog", "hound": "dog", "feline": "cat", "kitten": "cat"}
DOG = "Alice walks her dog every morning."
OTHERS = [f"Alice keeps receipt number {i} in the blue folder." for i in range(20)]


class ConceptProvider:
    """Hashed bag of concepts, L2-normalized. ``fail_passages``: memory embeddings raise
    (queries, through ``embed_queries``, still work). Counts memory calls and texts."""

    def __init__(self, max_batch_size: int | None = None) -> None:
        self._descriptor = EmbeddingDescriptor(provider="fake", model_id="concepts", dimension=DIM)
        self.fail_passages = False
        self.calls = 0
        self.texts: list[str] = []
        self._lock = threading.Lock()
        if max_batch_size is not None:
            self.max_batch_size = max_batch_size

    @property
    def descriptor(self) -> EmbeddingDescriptor:
        return self._descriptor

    def _rows(self, texts: Sequence[str]) -> Any:
        out = np.zeros((len(texts), DIM))
        for i, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.casefold()) or ["empty"]:
                digest = hashlib.sha256(CONCEPTS.get(word, word).encode()).digest()
                out[i, int.from_bytes(digest[:4], "big") % DIM] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed(self, texts: Sequence[str]) -> Any:
        with self._lock:
            self.calls += 1
            self.texts.extend(texts)
        if self.fail_passages:
            raise ConnectionError("the embedding service is down")
        return self._rows(texts)

    def embed_queries(self, texts: Sequence[str]) -> Any:
        return self._rows(texts)


NS = Namespace("acme", "alice", "assistant")


def test_a_put_then_an_immediate_search_ranks_the_item_by_its_vector(tmp_path: Path) -> None:
    provider = ConceptProvider()
    with MemoryEngine.open(tmp_path / "s", embeddings=provider, index_in_background=False) as e:
        e.remember_many(NS, OTHERS)
        put = e.remember(NS, DOG)
        lexical, _, _ = e.canonical_candidates(NS, "canine", 5, semantic=False)
        assert lexical == []  # no word of the query is in any memory
        result = e.recall(NS, "canine", 3)  # no index_vectors, no wait: the vector is there
        assert result.results[0].memory_id == str(put.memory_id)
        status = result.semantic
        assert status is not None and status.state == "ready" and status.pending == 0
        assert (status.retrievable, status.embedded) == (21, 21)


def test_a_failing_provider_leaves_the_write_and_a_pending_state_the_indexer_fills(
    tmp_path: Path,
) -> None:
    provider = ConceptProvider()
    with MemoryEngine.open(tmp_path / "s", embeddings=provider, index_in_background=False) as e:
        e.remember_many(NS, OTHERS)
        provider.fail_passages = True
        put = e.remember(NS, DOG)  # durable although its vector failed
        assert e.retrievable_memory(NS, put.memory_id) is not None
        result = e.recall(NS, "canine walks", 5)
        status = result.semantic
        assert status is not None and status.state == "partial"
        assert (status.pending, status.reason) == (1, "provider_failed")
        assert str(put.memory_id) in [h.memory_id for h in result.results]  # by its words
        assert str(put.memory_id) not in [h.memory_id for h in e.recall(NS, "canine", 5).results]
        assert e.wait_for_vectors(0.0) is False
        provider.fail_passages = False
        assert e.index_vectors() == 1  # the indexer fills it
        result = e.recall(NS, "canine", 5)
        assert result.results[0].memory_id == str(put.memory_id)
        assert result.semantic is not None and result.semantic.state == "ready"


def test_the_background_indexer_fills_a_failed_commands_vectors(tmp_path: Path) -> None:
    provider = ConceptProvider()
    with MemoryEngine.open(tmp_path / "s", embeddings=provider) as e:
        provider.fail_passages = True
        put = e.remember(NS, DOG)
        provider.fail_passages = False
        assert e.wait_for_vectors(30.0) is True
        result = e.recall(NS, "canine", 5)
        assert result.results[0].memory_id == str(put.memory_id)
        assert result.semantic is not None and result.semantic.state == "ready"


@pytest.mark.parametrize(("limit", "calls"), [(None, 1), (300, 4)])
def test_remember_many_of_1000_embeds_in_as_few_calls_as_the_provider_allows(
    tmp_path: Path, limit: int | None, calls: int
) -> None:
    provider = ConceptProvider(max_batch_size=limit)
    statements = [f"Alice's locker {i} holds item {i * 7}." for i in range(1000)]
    with MemoryEngine.open(tmp_path / "s", embeddings=provider, index_in_background=False) as e:
        e.remember_many(NS, statements)
        assert provider.calls == calls and sorted(provider.texts) == sorted(statements)
        assert e.semantic is not None and e.semantic.provider_calls == calls
        status = e.semantic_status(NS)
        assert (status.state, status.retrievable, status.embedded) == ("ready", 1000, 1000)
        assert e.index_vectors() == 0  # nothing left for the indexer
        assert provider.calls == calls
    again = ConceptProvider()
    with MemoryEngine.open(tmp_path / "s", embeddings=again, index_in_background=False) as e:
        assert e.wait_for_vectors(0.0) is True  # written behind: a fresh process has them
        hit = e.recall(NS, "locker 512", 1).results[0]
        assert hit.statement == statements[512]
        assert again.calls == 0


def test_a_superseded_memory_is_never_served_after_the_commands_own_vectors(
    tmp_path: Path,
) -> None:
    provider = ConceptProvider()
    with MemoryEngine.open(tmp_path / "s", embeddings=provider, index_in_background=False) as e:
        old = e.remember(NS, "Alice's pet is a puppy.", subject="Alice", predicate="pet")
        new = e.remember(NS, "Alice's pet is a kitten.", subject="Alice", predicate="pet")
        found = [h.memory_id for h in e.recall(NS, "canine", 5).results]
        assert str(old.memory_id) not in found
        assert [h.memory_id for h in e.recall(NS, "feline", 5).results] == [str(new.memory_id)]
        e.forget(NS, new.memory_id)
        assert e.recall(NS, "feline", 5).results == ()


def test_erasure_removes_the_served_and_written_vectors(tmp_path: Path) -> None:
    provider = ConceptProvider()
    other = Namespace("globex", "bob", "assistant")
    key = os.urandom(32)
    path = tmp_path / "s"
    with MemoryEngine.open(
        path, embeddings=provider, index_in_background=False, master_key=key, sync=False
    ) as e:
        e.remember(NS, DOG)
        kept = e.remember(other, DOG)
        assert e.recall(NS, "canine", 1).results
        assert e.erase(NS.tenant, NS.principal, NS.scope_id).namespaces == 1
        assert e.recall(NS, "canine", 5).results == ()
        assert e.recall(other, "canine", 1).results[0].memory_id == str(kept.memory_id)
        with e.projections.lock:
            tenants = {
                r[0]
                for r in e.projections.conn.execute(
                    "SELECT DISTINCT tenant FROM memory_vectors"
                ).fetchall()
            }
        assert tenants <= {"globex"}


def activation(index: int, word: str) -> MemoryActivated:
    """A MemoryActivated of a new memory stating that Alice likes ``word``."""
    return MemoryActivated(
        originator_id=uuid.uuid5(uuid.NAMESPACE_URL, f"{index}-{word}"),
        originator_version=1,
        recorded_at=datetime(2024, 1, 1, tzinfo=UTC),
        namespace=NS,
        session_id="s",
        turn_id=1,
        candidate_id=uuid.uuid5(uuid.NAMESPACE_URL, f"candidate-{index}"),
        decision="auto",
        item=msgspec.convert(make_item(f"Alice likes {word}.", supersedes=[]), ExtractedItem),
        normalized=f"alice likes {word} {index}",
        occurred_at=None,
    )


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(["tea", "jazz", "chess", "rain"]), min_size=1, max_size=12))
def test_appended_vectors_is_one_statement_vector_per_activation_in_order(
    words: list[str],
) -> None:
    events = [activation(i, w) for i, w in enumerate(words)]
    memories, texts = appended_vectors(events, ("statement", "source"))
    assert [m.memory_id for m in memories] == [str(e.originator_id) for e in events]
    assert texts == [f"Alice likes {w}." for w in words]  # no transcript in the batch
    assert {m.field for m in memories} == {"statement"}
    assert all(m.revision == 1 for m in memories)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(1, 5)), min_size=1, max_size=30),
    st.integers(0, 80),
    st.integers(0, 80),
)
def test_own_positions_cover_exactly_the_runs_applied_here(
    runs: list[tuple[bool, int]], after: int, upto: int
) -> None:
    """Runs of positions, each either applied here (a command's batch) or not (another
    process's): a range is covered exactly when every position in it was applied here."""
    own = OwnPositions()
    mine: set[int] = set()
    position = 0
    for applied, length in runs:
        batch = list(range(position + 1, position + length + 1))
        position += length
        if applied:
            own.add(batch)
            mine.update(batch)
    expected = all(p in mine for p in range(after + 1, upto + 1))
    assert own.covered(after, upto) == expected
