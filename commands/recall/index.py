"""Recall: lexical BM25 over canonical memory and session facts, RRF fusion, scopes, hints.

- The canonical index lives in process memory, rebuilt from the ``canonical_memory`` read
  model only when the projection position has moved (one DuckDB query costs milliseconds; a
  BM25 search over the in-process index costs microseconds). Documents are
  ``subject + " " + statement``; ties break by score, then the memory's creation position,
  then its id (docs/design.md).
- Canonical memory's lexical and semantic channels are fused by :mod:`commands.recall.fusion`
  (per-query min-max normalisation by default); rankings whose scores are not comparable
  (session facts, snapshots) by reciprocal-rank fusion (Cormack, Clarke and Buettcher,
  SIGIR 2009) with ``k = 60``: ``score(d) = sum over rankings of 1 / (k + rank(d))``.
- ``about``/``attribute`` hints only reorder (a stable partition), never filter (seed 004:
  a hint that filtered would turn a wrong guess into a missed memory).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from datetime import datetime
from typing import Any, Literal, Protocol

import msgspec

from memory_ledger.commands.recall.fusion import (
    DEFAULT_FUSION,
    LEGACY_FUSION,
    PLAIN_RRF,
    RRF_K,
    HybridFusion,
    rrf_fuse,
)
from memory_ledger.commands.recall.lexical import (
    ConversationWindows,
    WindowOf,
    analyze_document,
    analyze_query,
)
from memory_ledger.commands.recall.semantic_status import SemanticStatus
from memory_ledger.commands.recall.vector_block import StoredVectorBlock
from memory_ledger.ledger.ids import Namespace
from memory_ledger.projections.canonical import RETRIEVABLE
from memory_ledger.projections.serving.state import ServingState
from memory_ledger.projections.text_index import BM25Index, IndexedDoc, ScoredDoc


class ServedRows(Protocol):
    """Where the recall index reads canonical memory rows: the serving state
    (:class:`~memory_ledger.projections.serving.state.ServingState`, the engine's, kept
    current by the writer) or a :class:`~memory_ledger.projections.canonical.CanonicalMemory`
    (an as-of store's DuckDB file). Calls are made holding ``lock``."""

    lock: Any

    def active_memories(
        self, tenant: str, principal: str, scope_id: str, columns: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """Retrievable rows of one namespace, by creation position."""

    def changed_since(
        self, tenant: str, principal: str, scope_id: str, position: int, columns: Sequence[str] = ()
    ) -> list[dict[str, Any]]:
        """Rows of one namespace updated after ``position``."""

    def forgotten_turns(self, tenant: str, principal: str, scope_id: str) -> frozenset[int]:
        """Source turns of the namespace's forgotten memories."""


class PersistedIndex(Protocol):
    """What the recall index needs of its persisted file
    (:class:`~memory_ledger.commands.recall.index_file.RecallIndexFile`, which imports this
    module: the Protocol keeps the import one way)."""

    def namespaces(self) -> list[str]: ...

    def load(
        self, key: str
    ) -> tuple[int, frozenset[int], BM25Index, MutableMapping[str, MemoryDoc]] | None: ...

    def write(
        self,
        position: int,
        built: Iterable[
            tuple[str, tuple[int, frozenset[int], BM25Index, MutableMapping[str, MemoryDoc]]]
        ],
        keep: Iterable[str] = (),
        serving: ServingState | None = None,
        vectors: Mapping[str, Mapping[str, StoredVectorBlock]] | None = None,
    ) -> None: ...

    @property
    def position(self) -> int: ...

    def serving(self) -> bytes | memoryview | None: ...

    def load_vectors(self, model_key: str, key: str) -> StoredVectorBlock | None: ...

    def remove(self) -> None: ...


__all__ = [
    "DEFAULT_FUSION",
    "LEGACY_FUSION",
    "DOC_COLUMNS",
    "PLAIN_RRF",
    "RRF_K",
    "HybridFusion",
    "MemoryDoc",
    "NamespaceRecallIndex",
    "RecallHit",
    "RecallResult",
    "RecallScope",
    "RelatedMemory",
    "RelationKind",
    "apply_hints",
    "lexical_search",
    "rrf_fuse",
]


class RecallScope(msgspec.Struct, frozen=True):
    """What a recall searches.

    ``source``: ``session`` (this session's provisional facts), ``canonical`` (canonical
    memory) or ``both``; ``item_scope`` narrows to items of scope ``user`` or ``workspace``.
    """

    source: Literal["session", "canonical", "both"] = "both"
    item_scope: Literal["user", "workspace"] | None = None


RelationKind = Literal["supersedes", "superseded_by", "conflicts_with"]
"""How a related memory relates to a hit: the hit ``supersedes`` it, is ``superseded_by``
it, or ``conflicts_with`` it (relations recorded by ``supersedes`` / ``conflicts_with``)."""


class RelatedMemory(msgspec.Struct, frozen=True, kw_only=True):
    """A one-hop relation annotation on a hit (read only when the recall policy allows
    ``related_lookups``; seed 000): the related memory's id, statement, status and
    revision."""

    relation: RelationKind
    memory_id: str
    statement: str
    status: str
    revision: int


class RecallHit(msgspec.Struct, frozen=True, kw_only=True):
    """One recalled memory: 1-based ``rank``, ``score`` and its provenance.

    ``origin`` is ``canonical`` or ``session`` (a provisional fact of this session, not yet
    reconciled); ``revision`` is the canonical revision (None for session facts);
    ``related``: relation annotations (empty unless the recall policy allows lookups).
    """

    rank: int
    memory_id: str
    statement: str
    subject: str | None
    predicate: str | None = None
    score: float
    evidence: tuple[str, ...]
    occurred_at: datetime | None
    origin: Literal["canonical", "session"] = "canonical"
    revision: int | None = None
    tags: tuple[str, ...] = ()
    related: tuple[RelatedMemory, ...] = ()


class RecallResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a ``recall`` tool call returns to a model (JSON-serializable).

    ``position`` is the ledger position the answer reflects; ``path`` how it was served:
    ``snapshot`` (the turn's frozen snapshot), ``live`` (a search now) or ``fused`` (both,
    by RRF).
    """

    query: str
    results: tuple[RecallHit, ...]
    position: int
    path: Literal["snapshot", "live", "fused"] = "live"
    turn_id: int | None = None
    semantic: SemanticStatus | None = None
    """The semantic channel's part in this answer (None or state ``off``: lexical only)."""

    # A recall result reads like the list of its hits: ``result[0].statement``,
    # ``len(result)``, ``for hit in result``.
    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self) -> Iterator[RecallHit]:
        return iter(self.results)

    def __getitem__(self, index: int) -> RecallHit:
        return self.results[index]


_NO_STEMS: frozenset[str] = frozenset()
"""The ``own_stems`` of a memory without a window (one shared empty set, not one each)."""


class MemoryDoc(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """A searchable memory (canonical row or session fact) in the shape recall needs.

    Not tracked by the garbage collector (``gc=False``): it holds only strings, numbers,
    a datetime and tuples or frozensets of strings, so it can be in no reference cycle,
    and recall keeps one per memory."""

    memory_id: str
    position: int
    statement: str
    subject: str | None
    predicate: str | None
    value: str | None
    scope: str
    tags: tuple[str, ...]
    evidence: tuple[str, ...]
    occurred_at: datetime | None
    origin: Literal["canonical", "session"]
    revision: int | None
    importance: float
    context: str | None = None
    """The start of the transcript the memory was extracted from (indexed, not returned)."""
    window: str | None = None
    """The turns around that transcript (``commands.recall.lexical.ConversationWindows``; indexed
    lexically, not embedded, not returned)."""
    own_stems: frozenset[str] = frozenset()
    """With a window: the stems of the memory's own text (subject, statement, source turn);
    lexical recall keeps the memory only when the query shares one of them
    (:func:`lexical_search`). Empty: no window, nothing to check."""
    supersedes: tuple[str, ...] = ()
    superseded_by: str | None = None
    conflicts_with: tuple[str, ...] = ()

    @classmethod
    def from_row(
        cls, row: dict[str, Any], context: str | None = None, window: str | None = None
    ) -> MemoryDoc:
        """From a ``canonical_memory`` row (``context``: its source transcript, ``window``:
        the turns around it, if known)."""
        return cls(
            memory_id=row["memory_id"],
            position=row["created_position"],
            statement=row["statement"],
            subject=row["subject"],
            predicate=row["predicate"],
            value=row["value"],
            scope=row["scope"],
            tags=tuple(row["tags"] or ()),
            evidence=tuple(row["evidence"] or ()),
            occurred_at=row["occurred_at"],
            origin="canonical",
            revision=row["revision"],
            importance=row["importance"],
            context=context,
            window=window,
            own_stems=frozenset(analyze_document(row["subject"], row["statement"], context).split())
            if window
            else _NO_STEMS,
            supersedes=tuple(row.get("supersedes") or ()),
            superseded_by=row.get("superseded_by"),
            conflicts_with=tuple(row.get("conflicts_with") or ()),
        )

    def hit(self, rank: int, score: float) -> RecallHit:
        """This memory as the ``rank``-th hit with ``score`` (no relation annotations)."""
        return RecallHit(
            rank=rank,
            memory_id=self.memory_id,
            statement=self.statement,
            subject=self.subject,
            predicate=self.predicate,
            score=score,
            evidence=self.evidence,
            occurred_at=self.occurred_at,
            origin=self.origin,
            revision=self.revision,
            tags=self.tags,
        )


def _indexed(doc: MemoryDoc) -> IndexedDoc:
    return IndexedDoc(
        doc_id=doc.memory_id,
        position=doc.position,
        text=analyze_document(doc.subject, doc.statement, doc.context, doc.window),
    )


def build_index(docs: Iterable[MemoryDoc]) -> BM25Index:
    """BM25 index over the analyzed ``subject + statement + context + window`` of ``docs``
    (:func:`commands.recall.lexical.analyze_document`); search it with
    :func:`commands.recall.lexical.analyze_query` of the query."""
    return BM25Index.build(_indexed(d) for d in docs)


_DEEPEST = 64
""":func:`lexical_search` reads at most this many times ``k`` hits to fill ``k`` with
memories matched by their own text (the rest: window-only matches, scaled below)."""


def lexical_search(
    index: BM25Index, by_id: Mapping[str, MemoryDoc], query: str, k: int
) -> list[ScoredDoc]:
    """The top ``k`` of ``index`` for ``query`` (BM25 over :func:`_indexed` documents), a
    memory whose own text (subject, statement, source turn: :attr:`MemoryDoc.own_stems`)
    shares a stem with the query ranked before one that matches only through its
    conversation window; each tier by score, then position and id as
    :meth:`BM25Index.search`. Window-only scores are scaled below the lowest own-text score
    (order among them kept), so fusion sees the same order.

    The window lends a memory the words of the turns around it, so that a question phrased
    like the conversation finds it ("paddle" finds the kayak bought one turn before
    "paddle safely"); it must not outrank a memory that says the thing itself: "espresso
    coffee" must not put a deploy note first because the turn before it said "coffee".
    Measured on LoCoMo with the channels of ``python -m benchmarks locomo`` (MiniLM, alpha
    0.5, boost 0.4, in sample): lexical R@5 0.673 -> 0.674, fused 0.725 -> 0.724."""
    analyzed = analyze_query(query)
    wanted = frozenset(analyzed.split())
    asked = k
    while True:
        found = index.search(analyzed, asked)
        own: list[ScoredDoc] = []
        window_only: list[ScoredDoc] = []
        for scored in found:
            stems = by_id[scored.doc_id].own_stems
            (own if not stems or not wanted.isdisjoint(stems) else window_only).append(scored)
        if len(own) >= k or len(found) < asked or asked >= _DEEPEST * k:
            break
        asked *= 4
    if own and window_only:
        scale = min(1.0, 0.99 * own[-1].score / window_only[0].score)
        window_only = [msgspec.structs.replace(s, score=s.score * scale) for s in window_only]
    return (own + window_only)[:k]


def _norm(text: str | None) -> str:
    return (text or "").strip().casefold()


def apply_hints(
    docs: Sequence[MemoryDoc], about: str | None, attribute: str | None
) -> list[MemoryDoc]:
    """Stable reorder: docs matching both hints first, then either, then the rest."""
    if not about and not attribute:
        return list(docs)
    wanted_subject, wanted_predicate = _norm(about), _norm(attribute)

    def matches(doc: MemoryDoc) -> int:
        score = 0
        if wanted_subject and _norm(doc.subject) == wanted_subject:
            score += 1
        if wanted_predicate and _norm(doc.predicate) == wanted_predicate:
            score += 1
        return -score

    return sorted(docs, key=matches)


DOC_COLUMNS = (
    "memory_id",
    "status",
    "created_position",
    "statement",
    "subject",
    "predicate",
    "value",
    "scope",
    "tags",
    "evidence",
    "occurred_at",
    "revision",
    "importance",
    "transcript_positions",
    "supersedes",
    "superseded_by",
    "conflicts_with",
)
"""The ``canonical_memory`` columns a :class:`MemoryDoc` is made of (and its status): the
recall index reads only these (``tests/projections/test_recall_index_columns.py`` checks
that they are every column :meth:`MemoryDoc.from_row` and the index read)."""


REBUILD_AFTER = 1000
"""An index (in process or persisted) more than this many changed rows behind (and more
than half its size) is rebuilt rather than refreshed row by row."""


class NamespaceRecallIndex:
    """BM25 indexes of retrievable canonical memories, one per namespace, kept in step with
    the projection.

    :param changed_at: the last projection position that changed a namespace's retrievable
        content (``ProjectionRunner.changed_at``); an index built at or after it is reused,
        so writes to other namespaces, recall records and counters never force a rebuild.
        Without it, any move of the position rebuilds.
    :param context_of: reads a memory's source transcript from its ``transcript_positions``
        (``commands.recall.lexical.SourceTranscripts``); None: no source-turn expansion.
    :param windows: reads the turns around it (``commands.recall.lexical.ConversationWindows``);
        None: no window expansion. The source turns of the namespace's forgotten memories
        (``CanonicalMemory.forgotten_turns``) lend no words to any window; when they
        change (a forget, a memory back), the namespace's index is rebuilt.
    """

    def __init__(
        self,
        canonical: ServedRows,
        changed_at: Callable[[str], int] | None = None,
        context_of: Callable[[Sequence[int]], str | None] | None = None,
        windows: ConversationWindows | None = None,
    ) -> None:
        self.canonical = canonical
        self._changed_at = changed_at
        self._context_of = context_of
        self._windows = windows
        self._cache: dict[str, tuple[int, BM25Index, MutableMapping[str, MemoryDoc]]] = {}
        self._silenced: dict[str, frozenset[int]] = {}
        self._stored: PersistedIndex | None = None
        self._is_erased: Callable[[Namespace], bool] = lambda namespace: False
        self._dirty: set[str] = set()
        self._serving_refused = False
        self.loaded: dict[str, str] = {}
        """How each namespace's index came to this process: ``file`` (read from the
        persisted index, then caught up), ``built`` (read from the projections)."""

    @property
    def windowed(self) -> bool:
        """Whether documents are expanded with their source turn and window."""
        return self._windowed()

    def attach(
        self, stored: PersistedIndex, is_erased: Callable[[Namespace], bool] | None = None
    ) -> None:
        """Read namespaces' indexes from ``stored`` (the persisted index,
        :mod:`commands.recall.index_file`) on their first use instead of building them;
        ``is_erased``: whether a namespace was erased (its stored index is then never read:
        the file is removed)."""
        self._stored = stored
        if is_erased is not None:
            self._is_erased = is_erased

    def clear(self) -> None:
        """Drop every namespace's index (after an erasure), and the persisted file, which
        may hold the erased namespace's words; each is rebuilt on its next use."""
        with self.canonical.lock:
            self._cache.clear()
            self._silenced.clear()
            self._dirty.clear()
            if self._stored is not None:
                self._stored.remove()

    def stored_vectors(self, model_key: str, key: str) -> StoredVectorBlock | None:
        """Namespace ``key``'s persisted vectors of ``model_key`` (None: no file, none
        stored, or damaged: the file is then discarded and the vectors read from DuckDB)."""
        with self.canonical.lock:
            return self._stored.load_vectors(model_key, key) if self._stored is not None else None

    def silenced(self, namespace: Namespace) -> frozenset[int]:
        """The source turns of forgotten memories that lend no words to ``namespace``'s
        windows in its index as it stands (empty: none, or no windows). Call it holding
        the canonical lock, after :meth:`docs`."""
        return self._silenced.get(namespace.key(), frozenset())

    def holds(self, namespace: Namespace) -> bool:
        """Whether ``namespace``'s index is in this process (loaded or built). Call it
        holding the canonical lock."""
        return namespace.key() in self._cache

    def stored_copy(
        self, namespace: Namespace
    ) -> tuple[int, frozenset[int], BM25Index, MutableMapping[str, MemoryDoc]] | None:
        """``namespace``'s index as the persisted index holds it, read anew (the caller's
        own copy, not this process's index): ``(position it reflects, silenced turns,
        index, documents)``; None when none is attached, the file holds none for it, or
        the namespace was erased. Call it holding the canonical lock."""
        stored = self._stored
        if stored is None or self._is_erased(namespace):
            return None
        key = namespace.key()
        return stored.load(key) if key in stored.namespaces() else None

    def stored_serving(self) -> bytes | memoryview | None:
        """The serving state's snapshot in the persisted index (at the file's position), or
        None (no file, none stored, or damaged)."""
        with self.canonical.lock:
            return self._stored.serving() if self._stored is not None else None

    def serving_refused(self) -> None:
        """Note that the stored serving snapshot could not be restored (damaged, or of
        another format): the next :meth:`persist` writes the file even when no namespace
        changed, so the next process restores instead of rebuilding again."""
        with self.canonical.lock:
            self._serving_refused = True

    def persist(
        self,
        position: int,
        serving: ServingState | None = None,
        vectors: Callable[[], Mapping[str, Mapping[str, StoredVectorBlock]]] | None = None,
        *,
        vectors_changed: bool = False,
    ) -> bool:
        """Write the persisted index (when attached and some namespace, or with
        ``vectors_changed`` the served vectors, changed since it was read): the namespaces
        this process holds as of ``position`` and, copied unchanged, the ones the file holds
        that this process never read, the ``serving`` state (at ``position``) and
        ``vectors()`` (the served vectors by model key, then namespace key; the file's other
        blocks of those models are copied). Returns whether it wrote.
        Raises ``OSError`` when the file cannot be written."""
        with self.canonical.lock:
            stored = self._stored
            if stored is None or not (self._dirty or self._serving_refused or vectors_changed):
                return False
            keep = [
                key
                for key in stored.namespaces()
                if key not in self._cache and key not in self._dirty
            ]
            built = [
                (key, (at, self._silenced.get(key, frozenset()), index, by_id))
                for key, (at, index, by_id) in self._cache.items()
            ]
            stored.write(position, built, keep, serving, vectors() if vectors is not None else None)
            self._dirty.clear()
            self._serving_refused = False
            return True

    def _load_stored(self, namespace: Namespace, position: int) -> bool:
        """Put ``namespace``'s persisted index in the cache, caught up to ``position``;
        False when there is none usable (then the caller builds it)."""
        stored = self._stored
        if stored is None:
            return False
        key = namespace.key()
        if key not in stored.namespaces():
            return False
        if self._is_erased(namespace):
            stored.remove()
            return False
        loaded = stored.load(key)
        if loaded is None:
            return False
        built, silenced, index, by_id = loaded
        if built > position:
            return False  # the projections are behind the file: build from them instead
        self._silenced[key] = silenced
        if built < position:
            if not self._refresh(namespace, built, index, by_id):
                return False
            self._dirty.add(key)
        self._cache[key] = (position, index, by_id)
        self.loaded[key] = "file"
        return True

    def docs(
        self, namespace: Namespace, position: int
    ) -> tuple[BM25Index, MutableMapping[str, MemoryDoc]]:
        """The index and documents of ``namespace`` as of projection ``position``.

        A stale index is refreshed incrementally: only rows whose revision moved since it was
        built are read back, removed and (when still retrievable) added again. Holds the
        canonical lock: the index is not thread-safe.
        """
        key = namespace.key()
        with self.canonical.lock:
            cached = self._cache.get(key)
            if cached is None and self._load_stored(namespace, position):
                return self._cache[key][1], self._cache[key][2]
            if cached is not None:
                built, index, by_id = cached
                stale = built < self._changed_at(key) if self._changed_at else built != position
                if not stale:
                    return index, by_id
                if self._changed_at is not None and self._refresh(namespace, built, index, by_id):
                    self._cache[key] = (position, index, by_id)
                    self._dirty.add(key)
                    return index, by_id
            rows = self.canonical.active_memories(
                namespace.tenant, namespace.principal, namespace.scope_id, DOC_COLUMNS
            )
            if not rows:
                # A namespace with no memory (never written, erased, all forgotten) leaves
                # no state: its name is never cached nor written to the persisted index.
                self._cache.pop(key, None)
                self._silenced.pop(key, None)
                if self._stored is not None and key in self._stored.namespaces():
                    self._dirty.add(key)  # its stored entry is left out at the next write
                return build_index(()), {}
            window_of = self._window_reader(namespace, self._forgotten_turns(namespace))
            by_id = {row["memory_id"]: self._doc(row, window_of) for row in rows}
            index = build_index(by_id.values())
            self._cache[key] = (position, index, by_id)
            self._dirty.add(key)
            self.loaded[key] = "built"
            return index, by_id

    def _windowed(self) -> bool:
        return self._windows is not None and self._context_of is not None

    def _forgotten_turns(self, namespace: Namespace) -> frozenset[int]:
        """The source turns of the namespace's forgotten memories (remembered per
        namespace: an index refresh compares them to tell whether windows changed)."""
        silenced = (
            self.canonical.forgotten_turns(
                namespace.tenant, namespace.principal, namespace.scope_id
            )
            if self._windowed()
            else frozenset()
        )
        self._silenced[namespace.key()] = silenced
        return silenced

    def _window_reader(self, namespace: Namespace, silenced: frozenset[int]) -> WindowOf | None:
        if self._windows is None or not self._windowed():
            return None
        return self._windows.for_namespace(
            namespace.tenant, namespace.principal, namespace.scope_id, silenced
        )

    def _doc(self, row: dict[str, Any], window_of: WindowOf | None = None) -> MemoryDoc:
        positions = row.get("transcript_positions") or ()
        context = self._context_of(positions) if self._context_of and positions else None
        window = window_of(positions, row["created_position"]) if window_of and positions else None
        return MemoryDoc.from_row(row, context, window)

    def _refresh(
        self,
        namespace: Namespace,
        built: int,
        index: BM25Index,
        by_id: MutableMapping[str, MemoryDoc],
    ) -> bool:
        """Bring the index up to date with the rows changed since ``built``; False (nothing
        done) when the source turns of forgotten memories changed: every window may then
        differ, and the caller rebuilds the namespace's index."""
        changed = self.canonical.changed_since(
            namespace.tenant, namespace.principal, namespace.scope_id, built, DOC_COLUMNS
        )
        if len(changed) > max(REBUILD_AFTER, len(by_id) // 2):
            return False  # stale beyond the threshold: a rebuild costs no more
        silenced = self._silenced.get(namespace.key(), frozenset())
        if self._windowed() and any(
            row["status"] not in RETRIEVABLE or row["memory_id"] not in by_id for row in changed
        ):
            # A memory left recall (perhaps forgotten) or came (perhaps back): re-read.
            previous, silenced = silenced, self._forgotten_turns(namespace)
            if silenced != previous:
                return False
        window_of = self._window_reader(namespace, silenced) if changed else None
        for row in changed:
            memory_id = row["memory_id"]
            if memory_id in by_id:
                index.remove(memory_id)
                del by_id[memory_id]
            if row["status"] in RETRIEVABLE:
                doc = self._doc(row, window_of)
                by_id[memory_id] = doc
                index.add(_indexed(doc))
        return True

    def search(self, namespace: Namespace, query: str, k: int, position: int) -> list[RecallHit]:
        """Top ``k`` retrievable memories of ``namespace`` for ``query``."""
        with self.canonical.lock:
            index, by_id = self.docs(namespace, position)
            found = lexical_search(index, by_id, query, k)
        return [
            by_id[scored.doc_id].hit(rank, scored.score)
            for rank, scored in enumerate(found, start=1)
        ]
