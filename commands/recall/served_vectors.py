"""The vectors semantic search reads, held in process per namespace and kept current by
whoever computes vectors: a command embedding its own memories before it returns
(:mod:`commands.recall.foreground`) and the background indexer (another process's writes, a
new model). Both put their rows here first; the ``memory_vectors`` read model
(:class:`projections.vectors.VectorStore`) is written behind, the buffered rows of many
commands in one bulk statement (:meth:`ServedVectors.flush`), so a fresh process opens with
them.

- :class:`_NamespaceVectors`: one namespace's rows, a growing float32 matrix with a live mask
  and the approximate index (:mod:`commands.recall.ann`) over it; ``missing`` holds the
  retrievable memories known to lack a statement vector (what a search reports as pending).
- :class:`ServedVectors`: the namespaces held (least recently used dropped), the buffer not
  yet written, and the one lock (``lock``) that guards both. Lock order: the projection lock
  (DuckDB) first, then ``lock``; a command's put takes ``lock`` only.

A namespace is read from ``memory_vectors`` only when first asked for (after the buffer is
flushed, so nothing put is missed); from then on every row reaches it through :meth:`put`.
"""

from __future__ import annotations

import bisect
import logging
import threading
from collections.abc import Callable, Sequence

import msgspec
import numpy as np
import numpy.typing as npt

from memory_ledger.commands.recall import ann
from memory_ledger.commands.recall.vector_block import StoredAnn, StoredVectorBlock, VectorMeta
from memory_ledger.ledger.ids import Namespace
from memory_ledger.projections.vectors import FIELDS, PendingMemory, StoredVectors, VectorStore

__all__ = ["ServedVectors", "VectorRows", "row_scores"]

log = logging.getLogger(__name__)


FINDS_BEFORE_MAP = 1_000
"""Row lookups by bisection after which a restored holder builds its ``(id, field) -> row``
map (:meth:`_NamespaceVectors.find`): the first recalls of a fresh process build none, warm
ones use the map."""


def row_scores(
    matrix: npt.NDArray[np.float32], query: npt.NDArray[np.float32]
) -> npt.NDArray[np.float32]:
    """The dot product of each row of ``matrix`` (``n x d`` float32) with ``query`` (``d``):
    ``n`` float32 scores, each row summed on its own in one thread (``numpy.einsum``, no
    BLAS). Every semantic score goes through here, so a row scores the same bits whether
    the whole matrix or a gathered subset is scored. BLAS's ``sgemv`` starts its worker
    threads for each product: under load on this 2-core machine a 1,600-row re-rank took
    10.4 ms that way against 1.2 ms here, and the whole 100,000-row matrix 24-34 ms against
    19-20 ms (medians of 30-300 products, load 9-11)."""
    scores: npt.NDArray[np.float32] = np.einsum("ij,j->i", matrix, query)
    return scores


class _NamespaceVectors:
    """In-process copy of one namespace's vector rows: a growing matrix plus a live mask.

    One row per vector row read; a newer row for the same memory retires the older one, and
    a memory that stops being retrievable retires its row (it comes back if the memory does).
    """

    def __init__(self, dimension: int, built_position: int) -> None:
        self.dimension = dimension
        self.ids: list[str] = []
        self.revisions: list[int] = []
        self.digests: list[str] = []
        self.fields: list[str] = []
        self._row_of: dict[tuple[str, str], int] | None = {}
        self._order: npt.NDArray[np.int64] | None = None
        """Rows sorted by ``(id, field)`` while :attr:`row_of` is not built (after
        :meth:`adopt`)."""
        self._bisected = 0
        """Lookups :meth:`find` answered by bisection since :meth:`adopt`."""
        self.matrix = np.zeros((0, dimension), dtype=np.float32)
        self.alive = np.zeros(0, dtype=bool)
        self.source = np.zeros(0, dtype=bool)
        self.last_seq = 0
        self.built_position = built_position
        self.dead = 0
        self.ann_threshold: int | None = ann.DEFAULT_THRESHOLD
        """Live rows from which :meth:`top` asks the approximate index (None: never)."""
        self.ann_background = False
        """Build the approximate index in a thread (searches stay exact until it is ready)
        instead of in the first search that needs it."""
        self._ann: ann.ApproximateIndex | None = None
        self._building: threading.Thread | None = None
        self._stored_ann: StoredAnn | None = None
        """The persisted index of an adopted block, restored instead of built when first
        needed (:meth:`_obtained`)."""
        self.ann_source: str | None = None
        """How the approximate index came: ``restored`` (from the persisted block) or
        ``built`` (trained here); None: none yet."""
        self.ann_unsaved = False
        """An index was built here and no persisted block holds it yet."""
        self.missing: set[str] = set()
        """Retrievable memories known to lack a statement vector for their current text."""

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def row_of(self) -> dict[tuple[str, str], int]:
        """The row of each ``(memory id, field)`` (built on first use after :meth:`adopt`:
        a first recall that changes nothing never needs it)."""
        if self._row_of is None:
            keys = zip(self.ids, self.fields, strict=True)
            self._row_of = dict(zip(keys, range(len(self.ids)), strict=True))
        return self._row_of

    @row_of.setter
    def row_of(self, value: dict[tuple[str, str], int]) -> None:
        self._row_of = value

    def find(self, memory_id: str, field: str) -> int | None:
        """The row of ``(memory_id, field)``, or None; by bisection over the stored order
        while :attr:`row_of` is not built (a lookup of a few memories builds no map: a
        first recall's), then, once :data:`FINDS_BEFORE_MAP` lookups were bisected, from
        the map, built then (a bisection costs about 40 us at 100,000 rows, a warm hybrid
        recall makes 200: 8 ms of its 50; the map, about 40 ms once)."""
        order = self._order
        if self._row_of is not None or order is None:
            return self.row_of.get((memory_id, field))
        self._bisected += 1
        if self._bisected > FINDS_BEFORE_MAP:
            return self.row_of.get((memory_id, field))
        ids, fields = self.ids, self.fields
        count = len(order)
        at = bisect.bisect_left(
            range(count),
            (memory_id, field),
            key=lambda k: (ids[order[k]], fields[order[k]]),
        )
        if at < count:
            row = int(order[at])
            if ids[row] == memory_id and fields[row] == field:
                return row
        return None

    def extend(self, stored: StoredVectors) -> None:
        """Append rows read from ``memory_vectors`` (in seq order)."""
        count = len(stored.memory_ids)
        if count == 0:
            return
        start = len(self.ids)
        need = start + count
        adopted = start == 0 and self.matrix.shape[0] == 0
        if adopted:  # a first read: the rows as they came (never written in place)
            self.matrix = np.ascontiguousarray(stored.matrix, dtype=np.float32)
            self.alive = np.zeros(count, dtype=bool)
            self.source = np.zeros(count, dtype=bool)
        elif need > self.matrix.shape[0]:
            capacity = max(need, self.matrix.shape[0] * 2)
            matrix = np.zeros((capacity, self.dimension), dtype=np.float32)
            matrix[:start] = self.matrix[:start]
            alive = np.zeros(capacity, dtype=bool)
            alive[:start] = self.alive[:start]
            source = np.zeros(capacity, dtype=bool)
            source[:start] = self.source[:start]
            self.matrix, self.alive, self.source = matrix, alive, source
        if not adopted:
            self.matrix[start:need] = stored.matrix
        self.alive[start:need] = True
        fields = stored.fields or ("statement",) * count
        self.source[start:need] = np.fromiter((f == "source" for f in fields), bool, count)
        keys = zip(stored.memory_ids, fields, strict=True)
        if not self.row_of:  # a first read: one dict build, the later of two rows wins
            self.row_of = dict(zip(keys, range(start, need), strict=True))
            if len(self.row_of) < count:
                self.alive[start:need] = False
                self.alive[np.fromiter(self.row_of.values(), np.intp, len(self.row_of))] = True
                self.dead += count - len(self.row_of)
        else:
            row_of, alive = self.row_of, self.alive
            for row, key in enumerate(keys, start):
                old = row_of.get(key)
                if old is not None and alive[old]:
                    alive[old] = False
                    self.dead += 1
                row_of[key] = row
        self.ids.extend(stored.memory_ids)
        self.revisions.extend(stored.revisions)
        self.digests.extend(stored.digests)
        self.fields.extend(fields)
        self.last_seq = stored.last_seq

    def block(self, last_seq: int) -> StoredVectorBlock:
        """The live rows as a persisted block (at :attr:`built_position`, covering the
        ``memory_vectors`` rows up to ``last_seq``), with the approximate index when there
        is one (serialized now, its dead rows taken out and the others renumbered as the
        block's rows; one restored from the file is passed on unread when its rows are all
        live, else left out). Call with the holder's lock held."""
        size = len(self.ids)
        keep = np.flatnonzero(self.alive[:size])
        stored_ann: StoredAnn | None = None
        index = self._ann
        if index is not None:
            index.add(self.matrix, size)
            data, covered = index.serialize(keep.astype(np.int64))
            stored_ann = (covered, lambda: data)
            self.ann_unsaved = False
        elif self._stored_ann is not None and bool(self.alive[: self._stored_ann[0]].all()):
            stored_ann = self._stored_ann  # adopted, not restored yet: passed on as it is
        if len(keep) == size:
            matrix = self.matrix[:size]
            ids, revisions, digests, fields = self.ids, self.revisions, self.digests, self.fields
        else:
            matrix = self.matrix[keep]
            rows = keep.tolist()
            ids = [self.ids[i] for i in rows]
            revisions = [self.revisions[i] for i in rows]
            digests = [self.digests[i] for i in rows]
            fields = [self.fields[i] for i in rows]
        keys = np.array([f"{i}\x00{f}" for i, f in zip(ids, fields, strict=True)], dtype=str)
        order = np.argsort(keys, kind="stable").astype("<i8")
        meta = VectorMeta(
            self.built_position,
            last_seq,
            list(ids),
            list(revisions),
            list(digests),
            list(fields),
            sorted(self.missing),
            order.tobytes(),
        )
        return meta, matrix, stored_ann

    def adopt(
        self,
        meta: VectorMeta,
        matrix: npt.NDArray[np.float32],
        stored_ann: StoredAnn | None = None,
    ) -> None:
        """Fill this empty holder from a persisted block (its matrix used as it is, never
        written in place: a read-only view of the file); :attr:`built_position` becomes the
        block's (the caller refreshes it from there). ``stored_ann``: the block's persisted
        approximate index, restored when first needed (checked then; a damaged one is
        rebuilt)."""
        self._stored_ann = stored_ann
        count = len(meta.ids)
        self.matrix = matrix
        self.alive = np.ones(count, dtype=bool)
        fields = meta.fields
        self.source = np.fromiter((f == "source" for f in fields), bool, count)
        self._row_of = None  # a block holds live rows only: one per (memory, field)
        order = np.frombuffer(meta.order, dtype="<i8")
        self._order = order if len(order) == count else None
        self._bisected = 0
        self.dead = 0
        self.ids, self.revisions, self.digests = meta.ids, meta.revisions, meta.digests
        self.fields = fields
        self.last_seq = meta.last_seq
        self.built_position = meta.built
        self.missing = set(meta.missing)

    def retire(self, memory_id: str, retrievable: bool) -> None:
        """The canonical row changed: its vectors are candidates exactly while the memory
        is retrievable (verification still checks the text)."""
        for field in FIELDS:
            row = self.find(memory_id, field)
            if row is None or bool(self.alive[row]) == retrievable:
                continue
            self.alive[row] = retrievable
            self.dead += -1 if retrievable else 1

    def compacted(self, built_position: int) -> _NamespaceVectors:
        """A copy holding only the live rows (dead rows cost every query a multiply)."""
        fresh = _NamespaceVectors(self.dimension, built_position)
        keep = np.flatnonzero(self.alive[: len(self.ids)])
        fresh.matrix = np.ascontiguousarray(self.matrix[keep])
        fresh.alive = np.ones(len(keep), dtype=bool)
        fresh.source = np.ascontiguousarray(self.source[keep])
        for new_row, old_row in enumerate(keep.tolist()):
            memory_id, field = self.ids[old_row], self.fields[old_row]
            fresh.ids.append(memory_id)
            fresh.revisions.append(self.revisions[old_row])
            fresh.digests.append(self.digests[old_row])
            fresh.fields.append(field)
            fresh.row_of[(memory_id, field)] = new_row
        fresh.last_seq = self.last_seq
        fresh.ann_threshold = self.ann_threshold  # its index is rebuilt: the rows moved
        fresh.ann_background = self.ann_background
        fresh.missing = self.missing
        return fresh

    @property
    def approximate(self) -> bool:
        """True when :meth:`top` goes through the approximate index now."""
        live = len(self.ids) - self.dead
        threshold = self.ann_threshold
        return threshold is not None and live >= threshold and ann.available()

    def top(
        self,
        query: npt.NDArray[np.float32],
        depth: int,
        fields: Sequence[str] = FIELDS,
    ) -> list[tuple[int, float]]:
        """Best ``depth`` live rows of ``fields`` by dot product: ``(row, score)``, best
        first, ties by memory id then field; rows tied with the last one are all included
        (so the result does not depend on how the partition split equal scores).

        From ``ann_threshold`` live rows the candidates come from the approximate index
        (:mod:`commands.recall.ann`), re-ranked exactly (:meth:`_top_approximate`)."""
        size = len(self.ids)
        take = min(depth, size - self.dead)
        if take <= 0:
            return []
        if self.approximate:
            found = self._top_approximate(query, take, fields)
            if found is not None:
                return found
        return self._top_exact(query, take, fields)

    def _top_exact(
        self, query: npt.NDArray[np.float32], take: int, fields: Sequence[str]
    ) -> list[tuple[int, float]]:
        """:meth:`top` by one product over the whole matrix."""
        size = len(self.ids)
        scores = row_scores(self.matrix[:size], query)
        if self.dead:
            scores[~self.alive[:size]] = -np.inf
        if "source" not in fields:
            scores[self.source[:size]] = -np.inf
        elif "statement" not in fields:
            scores[~self.source[:size]] = -np.inf
        if take < size:
            threshold = scores[np.argpartition(scores, size - take)[size - take]]
            picked = np.flatnonzero(scores >= threshold)
        else:
            picked = np.arange(size)
        values = scores[picked]
        keep = np.isfinite(values)
        out = list(zip(picked[keep].tolist(), values[keep].tolist(), strict=True))
        out.sort(key=lambda item: (-item[1], self.ids[item[0]], self.fields[item[0]]))
        return out

    def _top_approximate(
        self, query: npt.NDArray[np.float32], take: int, fields: Sequence[str]
    ) -> list[tuple[int, float]] | None:
        """:meth:`top` from the approximate index's candidates: each scored exactly over
        the matrix, dead rows and rows of other fields dropped as in exact search, the best
        ``take`` kept. The scan widens while fewer than ``take`` candidates survive; None
        when even a scan of every cell leaves too few (the caller searches exactly)."""
        size = len(self.ids)
        index = self._ann
        if index is None:
            if self.ann_background:
                self._build_in_background(size)
                return None
            index = self._ann = self._obtained(self.matrix, size)
        index.add(self.matrix, size)  # rows appended since: retired ones stay, masked
        count = max(take * 4, 64)
        widen = 1
        while True:
            rows = index.candidates(query, count, widen)
            keep = self.alive[rows]
            if "source" not in fields:
                keep &= ~self.source[rows]
            elif "statement" not in fields:
                keep &= self.source[rows]
            rows = rows[keep]
            if len(rows) >= take:
                break
            if widen >= index.exhausted_at or count >= size:
                return None
            widen, count = widen * 4, count * 4
        scores = row_scores(self.matrix[rows], query)
        out = list(zip(rows.tolist(), scores.tolist(), strict=True))
        out.sort(key=lambda item: (-item[1], self.ids[item[0]], self.fields[item[0]]))
        return out[:take]

    def _obtained(self, matrix: npt.NDArray[np.float32], size: int) -> ann.ApproximateIndex:
        """An index over rows ``0 .. size - 1`` of ``matrix``: the persisted one of the
        adopted block when it checks out (the rows after it added), else a new one."""
        stored, self._stored_ann = self._stored_ann, None
        if stored is not None:
            rows, serialized = stored
            data = serialized() if rows <= size else None
            index = (
                ann.ApproximateIndex.restore(data, self.dimension, rows)
                if data is not None
                else None
            )
            if index is not None:
                index.add(matrix, size)
                self.ann_source = "restored"
                return index
            log.warning("persisted approximate index unusable; rebuilding it")
        index = ann.ApproximateIndex(self.dimension, size)
        index.train(matrix[:size])
        index.add(matrix, size)
        self.ann_source = "built"
        self.ann_unsaved = True
        return index

    def _build_in_background(self, size: int) -> None:
        """Start building the index over the rows there are now (once). The thread reads
        only those rows of the current matrix, which later writes never change (new rows
        go after them, a grown matrix is a new array); the first search after it is done
        adds the rows appended meanwhile."""
        if self._building is not None:
            return
        matrix = self.matrix

        def build() -> None:
            try:
                self._ann = self._obtained(matrix, size)
            except Exception:  # searches stay exact; say why once
                log.exception("approximate index build failed; semantic search stays exact")

        self._building = threading.Thread(target=build, name="memory-ledger-ann", daemon=True)
        self._building.start()

    @property
    def ann_ready(self) -> bool:
        """True when the approximate index is there (restored or built)."""
        return self._ann is not None

    def wait_index(self, timeout: float | None = None) -> bool:
        """Wait for a background build (see ``ann_background``); True when the index is
        ready."""
        if self._building is not None:
            self._building.join(timeout)
        return self._ann is not None


class VectorRows(msgspec.Struct, frozen=True):
    """Vector rows computed for memories: ``matrix`` row i belongs to ``memories[i]`` (of its
    ``field``) and embeds the text whose content digest is ``digests[i]``."""

    memories: tuple[PendingMemory, ...]
    digests: tuple[str, ...]
    matrix: npt.NDArray[np.float32]


def _stored(rows: VectorRows, picked: Sequence[int], last_seq: int) -> StoredVectors:
    return StoredVectors(
        memory_ids=tuple(rows.memories[i].memory_id for i in picked),
        revisions=tuple(rows.memories[i].revision for i in picked),
        digests=tuple(rows.digests[i] for i in picked),
        last_seq=last_seq,
        matrix=rows.matrix[np.asarray(picked, dtype=np.intp)],
        fields=tuple(rows.memories[i].field for i in picked),
    )


class ServedVectors:
    """The in-process vectors of one model, per namespace, and the rows not yet written.

    :param store: the ``memory_vectors`` table (its DuckDB connection is guarded by the
        projection lock, which callers of :meth:`flush` and :meth:`namespace` hold).
    :param model_key: the model whose rows are held.
    :param dimension: vector length.
    """

    def __init__(self, store: VectorStore, model_key: str, dimension: int) -> None:
        self.store = store
        self.model_key = model_key
        self.dimension = dimension
        self.lock = threading.RLock()
        """Guards the namespaces held and the buffer (taken after the projection lock)."""
        self.cache: dict[str, _NamespaceVectors] = {}
        self.max_namespaces = 256
        """Namespaces held (least recently used ones are dropped and read back when asked
        again, after the buffer is flushed)."""
        self._buffer: list[VectorRows] = []
        self.changed = False
        """Whether a held namespace changed since the persisted file was read or written
        (the engine writes the held namespaces at close only then)."""
        self.written = 0
        """Rows written to ``memory_vectors`` by :meth:`flush` so far."""

    def put(self, rows: VectorRows, *, persist: bool = True) -> None:
        """Serve ``rows`` now: each held namespace gains its rows (a newer row of a memory
        and field retires the older one) and its ``missing`` loses their memories; with
        ``persist`` they are buffered for :meth:`flush` (False: already written)."""
        if not rows.memories:
            return
        by_parts: dict[tuple[str, str, str], list[int]] = {}
        for i, m in enumerate(rows.memories):
            by_parts.setdefault((m.tenant, m.principal, m.scope_id), []).append(i)
        by_namespace = {msgspec.json.encode(list(k)).decode(): v for k, v in by_parts.items()}
        with self.lock:
            if persist:
                self._buffer.append(rows)
            self.changed = True
            for key, picked in by_namespace.items():
                held = self.cache.get(key)
                if held is None:
                    continue
                held.extend(_stored(rows, picked, held.last_seq))
                for i in picked:
                    if rows.memories[i].field == "statement":
                        held.missing.discard(rows.memories[i].memory_id)

    def expect(self, namespace_key: str, memory_ids: Sequence[str]) -> None:
        """``memory_ids`` of a held namespace lack a statement vector until one is put
        (a command's memories while their embedding is under way or failed)."""
        with self.lock:
            held = self.cache.get(namespace_key)
            if held is not None:
                held.missing.update(memory_ids)

    def retire(self, namespace_key: str, memory_id: str) -> None:
        """``memory_id`` stopped being retrievable (superseded, forgotten, pruned): its rows
        are no longer candidates and it is no longer pending."""
        with self.lock:
            held = self.cache.get(namespace_key)
            if held is not None:
                held.retire(memory_id, False)
                held.missing.discard(memory_id)
                self.changed = True

    def drop(self, namespace_key: str) -> None:
        """Forget one namespace's held rows (read back from the table when next asked)."""
        with self.lock:
            self.cache.pop(namespace_key, None)

    def _add_buffered(self, held: _NamespaceVectors, ns: tuple[str, str, str]) -> None:
        """Add the buffered rows of namespace ``ns`` to ``held`` (just read from the table,
        which holds none of them: the projection lock is held, no flush is under way)."""
        for rows in self._buffer:
            picked = [
                i for i, m in enumerate(rows.memories) if (m.tenant, m.principal, m.scope_id) == ns
            ]
            if picked:
                held.extend(_stored(rows, picked, held.last_seq))
                for i in picked:
                    if rows.memories[i].field == "statement":
                        held.missing.discard(rows.memories[i].memory_id)

    def blocks(self, last_seq: Callable[[str], int]) -> dict[str, StoredVectorBlock]:
        """Every held namespace's live rows as a persisted block, by namespace key;
        ``last_seq(key)``: the ``memory_vectors`` seq its rows cover (call after
        :meth:`flush`, with the projection lock held)."""
        with self.lock:
            return {key: held.block(last_seq(key)) for key, held in self.cache.items()}

    @property
    def index_unsaved(self) -> bool:
        """Whether a held namespace built an approximate index no persisted file holds (the
        engine then writes the file at close even when no vector changed)."""
        with self.lock:
            return any(held.ann_unsaved for held in self.cache.values())

    @property
    def unpersisted(self) -> int:
        """Rows put but not yet written to ``memory_vectors``."""
        with self.lock:
            return sum(len(r.memories) for r in self._buffer)

    def flush(self) -> int:
        """Write every buffered row to ``memory_vectors`` in one transaction (one bulk
        insert through Arrow); returns how many. Call with the projection lock held. On an
        error the rows stay buffered and the error propagates."""
        with self.lock:
            batches, self._buffer = self._buffer, []
        if not batches:
            return 0
        memories = [m for b in batches for m in b.memories]
        digests = [d for b in batches for d in b.digests]
        matrix = batches[0].matrix if len(batches) == 1 else np.vstack([b.matrix for b in batches])
        try:
            self.store.write(self.model_key, memories, digests, matrix)
        except BaseException:
            with self.lock:
                self._buffer[:0] = batches
            raise
        self.written += len(memories)
        return len(memories)

    def clear(self, keep: Callable[[str], bool] | None = None) -> None:
        """Drop every held namespace and the buffer (after an erasure), but the buffered
        rows of the namespaces whose key ``keep`` accepts (default: none; what is dropped
        and was not yet written is embedded again by the indexer, for the namespaces that
        remain)."""
        with self.lock:
            self.cache.clear()
            buffer, self._buffer = self._buffer, []
            if keep is None:
                return
            for rows in buffer:
                picked = [
                    i
                    for i, m in enumerate(rows.memories)
                    if keep(msgspec.json.encode([m.tenant, m.principal, m.scope_id]).decode())
                ]
                if picked:
                    index = np.asarray(picked, dtype=np.intp)
                    self._buffer.append(
                        VectorRows(
                            tuple(rows.memories[i] for i in picked),
                            tuple(rows.digests[i] for i in picked),
                            rows.matrix[index],
                        )
                    )

    def namespace(
        self,
        namespace: Namespace,
        position: int,
        refresh: Callable[[_NamespaceVectors], None],
        load: Callable[[_NamespaceVectors], None] | None = None,
        *,
        may_load: bool = True,
        flush: bool = True,
    ) -> _NamespaceVectors | None:
        """The held rows of ``namespace``, then ``refresh`` (the caller retires rows of
        memories that changed). A namespace not held is read from ``memory_vectors`` (after
        :meth:`flush`) by ``load`` (default: the rows of memories retrievable in
        ``canonical_memory``, with its ``missing`` memories); call with the projection lock
        held then. ``may_load=False``: a namespace not held is None (nothing read).
        ``flush=False``: the buffer is not written first; its rows of the namespace are
        added after the load instead (a command holding its namespace writes nothing)."""
        key = namespace.key()
        ns = (namespace.tenant, namespace.principal, namespace.scope_id)
        with self.lock:
            held = self.cache.pop(key, None)
            if held is None:
                if not may_load:
                    return None
                if flush:  # under the lock: no put can fall between the read and the hold
                    self.flush()
                held = _NamespaceVectors(self.dimension, position)
                if load is not None:
                    load(held)
                else:
                    held.extend(self.store.load(self.model_key, ns, 0))  # retrievable ones
                    held.missing = set(self.store.unembedded(self.model_key, ns))
                if not flush:
                    self._add_buffered(held, ns)
            refresh(held)
            if held.dead > 1024 and held.dead * 4 > len(held):
                held = held.compacted(held.built_position)
            self.cache[key] = held  # most recently used last
            while len(self.cache) > self.max_namespaces:
                del self.cache[next(iter(self.cache))]
            return held
