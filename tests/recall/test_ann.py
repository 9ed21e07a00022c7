"""The approximate nearest-neighbour index of the semantic channel (issue 30 item 3): above
its threshold it agrees with exact search (recall@10 at least 0.99), its candidates are
re-ranked exactly, and it never serves what exact search would not (dead rows, other
fields, forgotten memories, erased namespaces); below the threshold search stays exact.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from memory_ledger.commands import MemoryEngine
from memory_ledger.commands.recall import ann
from memory_ledger.commands.recall.semantic import _NamespaceVectors
from memory_ledger.ledger.ids import Namespace
from memory_ledger.projections.vectors import StoredVectors
from tests.recall.test_semantic_recall import BagProvider

pytestmark = pytest.mark.skipif(not ann.available(), reason="the ann extra is not installed")

DIM = 64


def clustered(rows: int, seed: int = 0) -> npt.NDArray[np.float32]:
    """Unit vectors around 200 random centres (embeddings of related texts cluster)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((200, DIM)).astype(np.float32)
    matrix = centres[rng.integers(0, 200, rows)]
    matrix += 0.5 * rng.standard_normal((rows, DIM)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix


def namespace_vectors(matrix: npt.NDArray[np.float32], fields: bool = False) -> _NamespaceVectors:
    count = len(matrix)
    vectors = _NamespaceVectors(DIM, 0)
    vectors.extend(
        StoredVectors(
            memory_ids=tuple(f"m{i // 2 if fields else i}" for i in range(count)),
            revisions=(1,) * count,
            digests=("d",) * count,
            last_seq=count,
            matrix=matrix,
            fields=tuple(("statement", "source")[i % 2] for i in range(count)) if fields else (),
        )
    )
    return vectors


def queries(matrix: npt.NDArray[np.float32], count: int) -> list[npt.NDArray[np.float32]]:
    rng = np.random.default_rng(1)
    picked = matrix[rng.integers(0, len(matrix), count)]
    picked = picked + 0.2 * rng.standard_normal(picked.shape).astype(np.float32)
    return list(picked / np.linalg.norm(picked, axis=1, keepdims=True))


@pytest.fixture(scope="module")
def large() -> _NamespaceVectors:
    vectors = namespace_vectors(clustered(60_000))
    vectors.ann_threshold = 50_000
    return vectors


def test_above_the_threshold_top_10_agrees_with_exact_search(large: _NamespaceVectors) -> None:
    assert large.approximate
    shares = []
    for query in queries(large.matrix[: len(large)], 40):
        approximate = large.top(query, 10)
        exact = large._top_exact(query, 10, ("statement",))
        assert len(approximate) == 10
        shares.append(ann.agreement([r for r, _ in approximate], [r for r, _ in exact[:10]]))
    assert float(np.mean(shares)) >= 0.99


def test_candidates_are_re_ranked_by_exact_cosine(large: _NamespaceVectors) -> None:
    (query,) = queries(large.matrix[: len(large)], 1)
    found = large.top(query, 20)
    scores = [score for _, score in found]
    assert scores == sorted(scores, reverse=True)
    for row, score in found:
        assert score == pytest.approx(float(large.matrix[row] @ query), abs=1e-6)


def test_retired_rows_are_never_candidates_and_come_back_when_retrievable() -> None:
    vectors = namespace_vectors(clustered(3_000, seed=2))
    vectors.ann_threshold = 1_000
    asked = queries(vectors.matrix[:3_000], 5)
    nearest = {row for query in asked for row, _ in vectors.top(query, 10)}
    for row in nearest:
        vectors.retire(f"m{row}", retrievable=False)
    assert vectors.approximate
    for query in asked:
        found = {row for row, _ in vectors.top(query, 10)}
        assert len(found) == 10 and not found & nearest
        assert found <= set(np.flatnonzero(vectors.alive[: len(vectors)]).tolist())
    for row in nearest:
        vectors.retire(f"m{row}", retrievable=True)
    assert nearest == {row for query in asked for row, _ in vectors.top(query, 10)}


def test_fields_filter_the_candidates_as_in_exact_search() -> None:
    vectors = namespace_vectors(clustered(4_000, seed=3), fields=True)
    vectors.ann_threshold = 1_000
    (query,) = queries(vectors.matrix[:4_000], 1)
    statement = vectors.top(query, 10, ("statement",))
    source = vectors.top(query, 10, ("source",))
    assert len(statement) == len(source) == 10
    assert all(vectors.fields[row] == "statement" for row, _ in statement)
    assert all(vectors.fields[row] == "source" for row, _ in source)


def test_new_rows_join_the_index_without_a_rebuild() -> None:
    matrix = clustered(3_000, seed=4)
    vectors = namespace_vectors(matrix[:2_000])
    vectors.ann_threshold = 1_000
    vectors.top(matrix[0], 5)
    built = vectors._ann
    vectors.extend(
        StoredVectors(
            memory_ids=tuple(f"m{i}" for i in range(2_000, 3_000)),
            revisions=(1,) * 1_000,
            digests=("d",) * 1_000,
            last_seq=3_000,
            matrix=matrix[2_000:],
        )
    )
    assert vectors.top(matrix[2_500], 1)[0][0] == 2_500
    assert vectors._ann is built and built is not None and built.size == 3_000


def test_below_the_threshold_search_is_exact() -> None:
    vectors = namespace_vectors(clustered(2_000, seed=5))
    (query,) = queries(vectors.matrix[:2_000], 1)
    assert not vectors.approximate  # default threshold: 50,000 rows
    assert vectors.top(query, 10) == vectors._top_exact(query, 10, ("statement",))
    assert vectors._ann is None
    vectors.ann_threshold = None
    assert not vectors.approximate
    vectors.ann_threshold = 2_000
    assert vectors.approximate
    vectors.ann_threshold = 2_001
    assert not vectors.approximate


def test_a_background_build_serves_exact_answers_until_the_index_is_ready() -> None:
    vectors = namespace_vectors(clustered(3_000, seed=6))
    vectors.ann_threshold = 1_000
    vectors.ann_background = True
    (query,) = queries(vectors.matrix[:3_000], 1)
    exact = vectors._top_exact(query, 10, ("statement",))
    assert vectors.top(query, 10) == exact  # the build has only started
    assert vectors.wait_index(60.0)
    index = vectors._ann
    assert index is not None and index.size == 3_000
    found = vectors.top(query, 10)
    assert ann.agreement([r for r, _ in found], [r for r, _ in exact]) >= 0.8


OTHER = Namespace("acme", "bob", "assistant")


def test_engine_recall_through_the_index_keeps_forgets_namespaces_and_erasure(
    tmp_path: Path, namespace: Namespace
) -> None:
    key = os.urandom(32)
    provider = BagProvider()
    with MemoryEngine.open(tmp_path / "s", master_key=key, embeddings=provider) as engine:
        assert engine.semantic is not None
        engine.semantic.ann_threshold = 1  # every namespace through the index
        engine.semantic.ann_background = False  # built by the first search
        fillers = [f"Alice noted item {i} on the list of errands." for i in range(40)]
        for text in fillers:
            engine.remember(namespace, text)
        puppy = engine.remember(namespace, "Alice has a puppy named Miso.")
        engine.remember(OTHER, "Bob keeps a puppy called Rex.")
        engine.index_vectors()
        found = [h.memory_id for h in engine.recall(namespace, "canine", 3).results]
        assert found[0] == str(puppy.memory_id)
        assert all("Rex" not in h.statement for h in engine.recall(namespace, "canine", 10).results)
        engine.forget(namespace, str(puppy.memory_id))
        assert str(puppy.memory_id) not in [
            h.memory_id for h in engine.recall(namespace, "canine", 10).results
        ]
        assert engine.recall(OTHER, "canine", 3).results
        engine.erase(OTHER.tenant, OTHER.principal, OTHER.scope_id, requested_by="test")
        assert not engine.recall(OTHER, "canine", 3).results
        assert engine.recall(namespace, "errands", 3).results
