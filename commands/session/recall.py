"""Recall paths of a session: snapshot fast path, live search, fused, scoped and listings.

``recall`` reads the turn's frozen snapshot when it plainly covers the query, otherwise runs
a live search (canonical memory, lexical or hybrid, plus the session's provisional facts,
fused by RRF) and fuses the snapshot into it. Every recall is recorded (RecallServed) through
the session's read buffer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, Protocol
from uuid import UUID

from memory_ledger.commands.recall.index import (
    MemoryDoc,
    RecallHit,
    RecallResult,
    RecallScope,
    apply_hints,
    build_index,
    rrf_fuse,
)
from memory_ledger.commands.recall.lexical import analyze_query
from memory_ledger.commands.recall.policy import check_recall_k
from memory_ledger.commands.recall.semantic_status import OFF, SemanticStatus
from memory_ledger.commands.secrets import redact
from memory_ledger.commands.session.overlay import Overlay, build_overlay
from memory_ledger.commands.session.stream import SessionStream, check_turn_id
from memory_ledger.commands.telemetry.spans import traced, traced_method
from memory_ledger.ledger.arguments import check_count, check_encodable
from memory_ledger.ledger.errors import InvalidArgumentTypeError
from memory_ledger.ledger.events import (
    RecalledItem,
    RecallServed,
    SnapshotPrepared,
)
from memory_ledger.projections.text_index import tokenize

__all__ = ["OpenGate", "RecallGate", "SessionRecall", "check_query"]

SNAPSHOT_COVERAGE = 0.8


def check_query(query: object, parameter: str = "query") -> str:
    """``query`` if it is a string that encodes as UTF-8.

    :raises InvalidArgumentTypeError: (a ValueError) not a string (``not_a_string``).
    :raises InvalidArgumentError: a lone surrogate (``not_utf8``): it could never be recorded
        (its RecallServed record would block the session's next write).
    """
    if not isinstance(query, str):
        msg = f"{parameter} must be a string, got {type(query).__name__}"
        raise InvalidArgumentTypeError(msg, parameter=parameter, reason_code="not_a_string")
    return check_encodable(parameter, query)


class RecallGate(Protocol):
    """Whether a session's memory recall is open (the knowledge concern closes it for a
    session bound to a knowledge package: ``commands.session.knowledge``)."""

    def suppressed(self, what: str) -> None:
        """Raise ``KnowledgeBindingError`` (``recall_suppressed``, naming ``what``) when
        memory recall is suppressed; return otherwise."""

    def live_silenced(self) -> bool:
        """Whether a live search must find nothing now."""


class OpenGate:
    """The gate of a session bound to no knowledge package: recall is never suppressed."""

    def suppressed(self, what: str) -> None:
        """Never suppressed."""

    def live_silenced(self) -> bool:
        """Never silenced."""
        return False


class SessionRecall:
    """Reads of a session: recall paths, the session overlay and memory listings.

    :param stream: the session's stream (state, read buffer).
    """

    def __init__(self, stream: SessionStream) -> None:
        self.stream = stream
        self.gate: RecallGate = OpenGate()
        """Set by the knowledge concern of a bound session."""
        self._overlay: tuple[int, Overlay] | None = None

    def overlay(self) -> Overlay:
        """The session facts and what they hide (cached per session version)."""
        with self.stream.lock:
            state = self.stream.state
            if self._overlay is None or self._overlay[0] != state.version:
                self._overlay = (
                    state.version,
                    build_overlay(self.stream.namespace, state, self.stream.engine.keyring.digests),
                )
            return self._overlay[1]

    def canonical_docs(self) -> list[MemoryDoc]:
        """Every retrievable canonical memory of the session's namespace."""
        return self.stream.engine.retrievable_memories(self.stream.namespace)

    def live(
        self,
        query: str,
        k: int,
        scope: RecallScope,
        about: str | None,
        attribute: str | None,
        *,
        semantic: bool = True,
    ) -> tuple[list[tuple[MemoryDoc, float]], SemanticStatus]:
        """Live search: canonical memories (lexical, or hybrid with the semantic channel)
        and session facts (shadowing applied), fused by RRF; plus the semantic status."""
        if self.gate.live_silenced():
            return [], OFF
        overlay = self.overlay()
        depth = max(k * 4, 20)
        status = OFF
        rankings: list[list[str]] = []
        docs: dict[str, MemoryDoc] = {}
        scores: dict[str, float] = {}

        def admit(doc: MemoryDoc) -> bool:
            return scope.item_scope is None or doc.scope == scope.item_scope

        if scope.source in ("canonical", "both"):
            candidates, status, _ = self.stream.engine.canonical_candidates(
                self.stream.namespace, query, depth * 2, semantic=semantic
            )
            ranking = []
            for doc, score in candidates:
                if overlay.visible(doc) and admit(doc):
                    ranking.append(doc.memory_id)
                    docs[doc.memory_id] = doc
                    scores[doc.memory_id] = score
                if len(ranking) >= depth:
                    break
            rankings.append(ranking)
        if scope.source in ("session", "both") and overlay.docs:
            session_docs = [d for d in overlay.docs if admit(d)]
            index = build_index(session_docs)
            by_session = {d.memory_id: d for d in session_docs}
            ranking = []
            for scored in index.search(analyze_query(query), depth):
                if scored.doc_id in docs:
                    continue  # the canonical item with the same id answers
                docs[scored.doc_id] = by_session[scored.doc_id]
                scores[scored.doc_id] = scored.score
                ranking.append(scored.doc_id)
            rankings.append(ranking)
        rankings = [r for r in rankings if r]
        if len(rankings) > 1:
            fused = rrf_fuse(rankings)
        elif rankings:
            fused = [(doc_id, scores[doc_id]) for doc_id in rankings[0]]
        else:
            fused = []
        ordered = apply_hints([docs[doc_id] for doc_id, _ in fused], about, attribute)
        fused_scores = dict(fused)
        return [(doc, fused_scores[doc.memory_id]) for doc in ordered[:k]], status

    def _covers(self, snapshot: SnapshotPrepared, query: str) -> bool:
        """The fast-path test: the snapshot plainly covers the query by word overlap."""
        wanted = set(tokenize(query))
        if not snapshot.items or not wanted:
            return False
        have: set[str] = set()
        for item in snapshot.items:
            have.update(tokenize(item.statement))
        return len(wanted & have) / len(wanted) >= SNAPSHOT_COVERAGE

    def recall(
        self,
        query: str,
        turn_id: int | None = None,
        k: int | None = None,
        *,
        record: bool = True,
    ) -> RecallResult:
        """Serve a ``recall`` tool call (:meth:`_recall` says how and what it raises), in a
        ``search_memory`` span (docs/observability.md)."""
        with traced(
            self.stream.engine, "session.recall", self.stream.namespace, text=query
        ) as span:
            return span.result(self._recall(query, turn_id, k, record=record))

    def _recall(
        self,
        query: str,
        turn_id: int | None = None,
        k: int | None = None,
        *,
        record: bool = True,
    ) -> RecallResult:
        """Serve a ``recall`` tool call.

        Reads the turn's frozen snapshot when it plainly covers the query; otherwise runs a
        live search and fuses the snapshot into it (RRF, k = 60). Records RecallServed
        unless ``record`` is False (a replay that must write nothing, e.g. a re-run).

        :raises RecallLimitError: ``k`` is above ``recall_max_k`` (``k_too_large``).
        """
        self.gate.suppressed("memory recall")
        self.stream.check_open()
        check_query(query)
        if turn_id is not None:
            check_turn_id(turn_id)
        k = self._bounded_k(k)
        snapshot = self.stream.state.frozen_snapshot(turn_id) if turn_id is not None else None
        if snapshot is not None and self._covers(snapshot, query):
            by_id = {
                doc.memory_id: doc
                for doc in self._docs_by_id({str(item.memory_id) for item in snapshot.items[:k]})
            }
            hits: list[RecallHit] = []
            for item in snapshot.items[:k]:
                doc = by_id.get(str(item.memory_id))
                hits.append(
                    RecallHit(
                        rank=len(hits) + 1,
                        memory_id=str(item.memory_id),
                        statement=item.statement,
                        subject=doc.subject if doc else None,
                        predicate=doc.predicate if doc else None,
                        score=item.score,
                        evidence=doc.evidence if doc else (),
                        occurred_at=doc.occurred_at if doc else None,
                        origin=doc.origin if doc else "canonical",
                        revision=item.revision or None,
                        tags=doc.tags if doc else (),
                    )
                )
            return self._served(query, turn_id, "snapshot", hits, record=record)
        live, semantic = self.live(query, k, RecallScope(), None, None)
        if snapshot is not None and snapshot.items:
            live_ids = [doc.memory_id for doc, _ in live]
            snapshot_ids = [str(i.memory_id) for i in snapshot.items]
            known = {doc.memory_id: doc for doc, _ in live}
            for doc in self._docs_by_id(set(snapshot_ids) - set(known)):
                known[doc.memory_id] = doc
            fused = [(d, s) for d, s in rrf_fuse([live_ids, snapshot_ids]) if d in known]
            hits = [known[d].hit(rank, s) for rank, (d, s) in enumerate(fused[:k], start=1)]
            return self._served(query, turn_id, "fused", hits, semantic, record=record)
        hits = [doc.hit(rank, score) for rank, (doc, score) in enumerate(live, start=1)]
        return self._served(query, turn_id, "live", hits, semantic, record=record)

    def _docs_by_id(self, ids: set[str]) -> list[MemoryDoc]:
        if not ids:
            return []
        overlay = self.overlay()
        # Details only (subject, evidence, times): the in-process index as it stands serves,
        # without a catch-up on the snapshot path.
        by_id = self.stream.engine.memory_details(self.stream.namespace, ids)
        found = [doc for doc in by_id.values() if overlay.visible(doc)]
        found += [d for d in overlay.docs if d.memory_id in ids]
        return found

    @traced_method(
        "session.recall",
        lambda self, *_: (self.stream.engine, self.stream.namespace),
        text_at=1,
    )
    def recall_scoped(
        self,
        query: str,
        turn_id: int | None,
        scope: RecallScope,
        about: str | None = None,
        attribute: str | None = None,
        k: int | None = None,
    ) -> RecallResult:
        """A recall restricted to a scope and/or reordered by ``about``/``attribute`` hints.

        Always a live search (the snapshot knows neither the restriction nor the hints);
        hints only reorder, never filter.

        :raises RecallLimitError: ``k`` is above ``recall_max_k`` (``k_too_large``).
        """
        self.gate.suppressed("memory recall")
        self.stream.check_open()
        check_query(query)
        if turn_id is not None:
            check_turn_id(turn_id)
        live, semantic = self.live(query, self._bounded_k(k), scope, about, attribute)
        hits = [doc.hit(rank, score) for rank, (doc, score) in enumerate(live, start=1)]
        return self._served(query, turn_id, "live", hits, semantic)

    def _bounded_k(self, k: int | None) -> int:
        """``k`` (default ``recall_k``) checked against ``recall_max_k``
        (:func:`check_recall_k`: RecallLimitError above it, InvalidArgumentError when it is
        not a positive int)."""
        if k is None:
            return self.stream.config().recall_k
        return check_recall_k(k, self.stream.config().recall_max_k)

    def _served(
        self,
        query: str,
        turn_id: int | None,
        path: Literal["snapshot", "live", "fused"],
        hits: Sequence[RecallHit],
        semantic: SemanticStatus | None = None,
        *,
        record: bool = True,
    ) -> RecallResult:
        position = max(self.stream.engine.projection_position, self.stream.last_position)
        result = RecallResult(
            query=query,
            results=tuple(hits),
            position=position,
            path=path,
            turn_id=turn_id,
            semantic=semantic,
        )
        if not record:
            return result
        canonical = [h for h in hits if h.origin == "canonical"]
        self.stream.buffer_read(
            RecallServed(
                **self.stream.read_envelope(),
                turn_id=turn_id,
                query=redact(query).text[:2000],
                path=path,
                results=tuple(
                    RecalledItem(
                        memory_id=UUID(h.memory_id),
                        revision=h.revision or 0,
                        rank=h.rank,
                        score=h.score,
                    )
                    for h in canonical
                ),
            )
        )
        self.stream.touch()
        return result

    def memory_map(self) -> str:
        """The vocabulary a model needs to fill recall's about/attribute fields."""
        self.gate.suppressed("the memory map")
        return self.stream.engine.memory_map(
            self.stream.namespace, token_counter=self.stream.token_counter
        )

    def recall_similar(self, query: str, k: int = 5) -> list[RecallHit]:
        """Canonical and session memories similar to ``query`` (live BM25, fused)."""
        self.gate.suppressed("memory recall")
        return list(self.recall_scoped(query, None, RecallScope(), k=k).results)

    def memory_recent(self, k: int = 10) -> list[RecallHit]:
        """The ``k`` most recent retrievable memories (session facts first)."""
        self.gate.suppressed("memory recall")
        check_count("k", k)
        overlay = self.overlay()
        canonical = [d for d in self.canonical_docs() if overlay.visible(d)]
        canonical.sort(key=lambda d: (-d.position, d.memory_id))
        docs = [*overlay.docs, *canonical][: max(k, 0)]
        return [doc.hit(rank, 0.0) for rank, doc in enumerate(docs, start=1)]

    def recall_by_tags(self, tags: Sequence[str], k: int = 10) -> list[RecallHit]:
        """Retrievable memories carrying any of ``tags``: most matching tags first, then the
        most recent."""
        self.gate.suppressed("memory recall")
        check_count("k", k)
        wanted = {t.strip().casefold() for t in tags if t.strip()}
        overlay = self.overlay()
        docs = [*overlay.docs, *(d for d in self.canonical_docs() if overlay.visible(d))]
        scored = []
        for doc in docs:
            matches = len(wanted & {t.casefold() for t in doc.tags})
            if matches:
                scored.append((doc, matches))
        recent = {d.memory_id: n for n, d in enumerate(docs)}
        scored.sort(key=lambda pair: (-pair[1], recent[pair[0].memory_id]))
        return [doc.hit(rank, float(m)) for rank, (doc, m) in enumerate(scored[: max(k, 0)], 1)]
