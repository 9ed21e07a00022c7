"""Recall indexes of past points, kept to derive the index of a new point from.

Building a namespace's BM25 index from scratch costs about the same at any point (each
memory analysed and indexed: seconds at 100,000 memories). Two points of one ledger differ
only by the memories with a revision between them, so the index at a new point P is the
index at a kept point B with those memories taken out and their revision at P (when
retrievable then) put back: the work of the changes between B and P, plus a copy of B's
index (:meth:`~memory_ledger.projections.text_index.BM25Index.copy`: a few list copies
for an index restored from the persisted file, whose arrays are shared).

The result ranks exactly as a build at P: the same documents (an unchanged memory has the
same row, source turn and conversation window at both points, since its window counts only
turns recorded before it was created), and BM25 scores that do not depend on the order of
additions and removals (:mod:`memory_ledger.projections.text_index`). When the source turns
of forgotten memories differ between the two points (every window may change), or the
changes are many (:data:`~memory_ledger.commands.recall.index.REBUILD_AFTER`, half the
documents), the index is built from scratch instead.

The first point asked in a namespace has no kept index: it derives from a copy of the live
engine's recall index (at the engine's serving position, loaded from the persisted index or
kept current by the writer), which is the same index at that position (the same documents
and BM25 statistics as a build from ``memory_history`` there; the live documents also carry
relations, which recall hits do not show), and keeps it for the next points. So no point
builds from every memory unless the changes are many.

:class:`PastIndexes` keeps a few built indexes per namespace, for one ledger head (a new
head, an erasure among its causes, drops them at the next look-up or keep; the debugger
also drops them all when its engine applies an erasure). A :class:`~.past_recall.PastRecall` hands
its recall index a :class:`DerivedIndexes` view on them through the recall index's
persisted-index interface (``NamespaceRecallIndex.attach``/``persist``), so the ranking code
is the recall index's own.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, MutableMapping, Sequence
from typing import Any, NamedTuple

from memory_ledger.commands.recall.index import DOC_COLUMNS, REBUILD_AFTER, MemoryDoc
from memory_ledger.commands.recall.index_file import LazyDocs
from memory_ledger.commands.recall.lexical import WindowOf, analyze_document
from memory_ledger.commands.recall.vector_block import StoredVectorBlock
from memory_ledger.ledger.ids import Namespace
from memory_ledger.projections.canonical import RETRIEVABLE
from memory_ledger.projections.history import CanonicalMemoryAt
from memory_ledger.projections.serving.state import ServingState
from memory_ledger.projections.text_index import BM25Index, IndexedDoc

__all__ = ["DerivedIndexes", "PastIndexes"]

LiveIndex = tuple[int, frozenset[int], BM25Index, MutableMapping[str, MemoryDoc]]
"""``(position, silenced turns, index, documents by id)``: a copy of the live engine's
recall index of a namespace (``MemoryEngine.recall_index_snapshot``)."""

Built = tuple[int, frozenset[int], BM25Index, MutableMapping[str, MemoryDoc]]
"""``(position, silenced turns, index, documents by id)``: a namespace's recall index as
the recall index's persisted-index interface passes it."""


class _Base(NamedTuple):
    head: int
    position: int
    silenced: frozenset[int]
    bm25: BM25Index
    docs: MutableMapping[str, MemoryDoc]


class PastIndexes:
    """Built indexes of past points, at most ``kept`` per namespace (the latest built
    first out), valid for one ledger head. Thread-safe."""

    def __init__(self, kept: int = 2) -> None:
        self.kept = max(1, kept)
        self._lock = threading.Lock()
        self._bases: dict[str, list[_Base]] = {}

    def nearest(self, key: str, head: int, position: int) -> _Base | None:
        """The kept index of namespace ``key`` (at ledger ``head``) nearest ``position``."""
        with self._lock:
            # another head's indexes go (a new head may be an erasure: no erased text stays)
            self._bases = {
                k: kept
                for k, v in self._bases.items()
                if (kept := [b for b in v if b.head == head])
            }
            bases = self._bases.get(key, [])
        return min(bases, key=lambda b: abs(b.position - position), default=None)

    def keep(self, key: str, base: _Base) -> None:
        """Keep ``base`` for namespace ``key`` (dropping every index of another head and,
        beyond :attr:`kept`, the namespace's oldest)."""
        with self._lock:
            self._bases = {  # an older head's indexes are of no use (and may hold erased text)
                k: kept
                for k, v in self._bases.items()
                if (kept := [b for b in v if b.head == base.head])
            }
            self._bases[key] = [*self._bases.get(key, ()), base][-self.kept :]

    def clear(self) -> None:
        """Drop every kept index."""
        with self._lock:
            self._bases.clear()


class DerivedIndexes:
    """One point's view on :class:`PastIndexes`, in the shape of the recall index's
    persisted index (``commands.recall.index.PersistedIndex``): :meth:`load` derives the
    point's index of a namespace from the nearest kept one, :meth:`write` keeps the ones
    the recall index built.

    :param canonical: the point's canonical memory (its :attr:`~CanonicalMemoryAt.position`).
    :param head: the ledger head the point was taken at.
    :param context_of: a memory's source transcript (the engine's ``transcript_context``).
    :param window_reader: ``(namespace, silenced) -> WindowOf`` of the point (None: no
        windows).
    :param live: ``namespace -> (position, silenced, index, documents)``: a copy of the
        live engine's recall index of the namespace (``MemoryEngine.recall_index_snapshot``,
        the read models caught up to its position), or None when it has no memory. When no
        index is kept for the namespace, the point's is derived from it (and it is kept for
        later points); None: the first point of a namespace builds its index.
    """

    def __init__(
        self,
        bases: PastIndexes,
        canonical: CanonicalMemoryAt,
        head: int,
        context_of: Callable[[Sequence[int]], str | None],
        window_reader: Callable[[Namespace, frozenset[int]], WindowOf] | None,
        live: Callable[[Namespace], LiveIndex | None] | None = None,
    ) -> None:
        self.bases = bases
        self.canonical = canonical
        self.head = head
        self._context_of = context_of
        self._window_reader = window_reader
        self.asked: dict[str, Namespace] = {}
        """The namespaces recalled at this point, by key (filled before each search)."""
        self._live = live
        self._derived: set[str] = set()
        self.from_live: set[str] = set()
        """Keys of the namespaces whose index was derived from the live engine's."""

    def namespaces(self) -> list[str]:
        """Keys of the namespaces with a kept index to derive from."""
        position = self.canonical.position
        if self._live is not None:
            return list(self.asked)
        return [k for k in self.asked if self.bases.nearest(k, self.head, position) is not None]

    def _base(self, key: str, namespace: Namespace) -> _Base | None:
        """The kept index of ``key`` nearest the point; else a copy of the live engine's,
        kept from now on (None: neither)."""
        base = self.bases.nearest(key, self.head, self.canonical.position)
        if base is not None or self._live is None:
            return base
        live = self._live(namespace)
        if live is None:
            return None
        position, silenced, index, docs = live
        base = _Base(self.head, position, silenced, index, docs)
        self.bases.keep(key, base)
        self.from_live.add(key)
        return base

    def load(self, key: str) -> Built | None:
        """The index of namespace ``key`` at the point, derived from the nearest kept one;
        None when it is better built (see the module doc)."""
        namespace = self.asked.get(key)
        if namespace is None:
            return None
        base = self._base(key, namespace)
        if base is None:
            return None
        parts = (namespace.tenant, namespace.principal, namespace.scope_id)
        silenced = (
            self.canonical.forgotten_turns(*parts) if self._window_reader else frozenset[int]()
        )
        if silenced != base.silenced:
            return None
        changed = self.canonical.changed_between(*parts, base.position, DOC_COLUMNS)
        if len(changed) > max(REBUILD_AFTER, len(base.docs) // 2):
            return None
        index = base.bm25.copy()
        by_id: MutableMapping[str, MemoryDoc] = (
            base.docs.fork(index.slot_map())  # keyed as the copy: same slots
            if isinstance(base.docs, LazyDocs)
            else dict(base.docs)
        )
        window_of = (
            self._window_reader(namespace, silenced) if self._window_reader and changed else None
        )
        for row in changed:
            memory_id = row["memory_id"]
            if memory_id in index:
                index.remove(memory_id)
                del by_id[memory_id]
            if row["status"] in RETRIEVABLE:
                doc = self._doc(row, window_of)
                by_id[memory_id] = doc
                text = analyze_document(doc.subject, doc.statement, doc.context, doc.window)
                index.add(IndexedDoc(doc_id=memory_id, position=doc.position, text=text))
        self._derived.add(key)
        return self.canonical.position, silenced, index, by_id

    def _doc(self, row: dict[str, Any], window_of: WindowOf | None) -> MemoryDoc:
        """The recall document of ``row`` (as the recall index makes it)."""
        positions = row.get("transcript_positions") or ()
        context = self._context_of(positions) if positions else None
        window = window_of(positions, row["created_position"]) if window_of and positions else None
        return MemoryDoc.from_row(row, context, window)

    @property
    def position(self) -> int:
        """The point these indexes answer for."""
        return self.canonical.position

    def serving(self) -> bytes | None:
        """No serving state is kept for a past point (its rows are ``memory_history``'s)."""
        return None

    def load_vectors(self, model_key: str, key: str) -> StoredVectorBlock | None:
        """No vectors are kept for a past point."""
        return None

    def write(
        self,
        position: int,
        built: Iterable[tuple[str, Built]],
        keep: Iterable[str] = (),
        serving: ServingState | None = None,
        vectors: Mapping[str, Mapping[str, StoredVectorBlock]] | None = None,
    ) -> None:
        """Keep the indexes the recall index built at this point (not those derived here;
        ``keep``, ``serving`` and ``vectors`` are ignored)."""
        for key, (at, silenced, index, by_id) in built:
            if key in self._derived:
                continue
            docs = (
                by_id.fork(dict(index.slot_map())) if isinstance(by_id, LazyDocs) else dict(by_id)
            )
            self.bases.keep(key, _Base(self.head, at, silenced, index.copy(), docs))

    def remove(self) -> None:
        """Drop every kept index (the recall index was cleared)."""
        self.bases.clear()
