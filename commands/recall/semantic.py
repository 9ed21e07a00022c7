"""The semantic recall channel: exact cosine over ``memory_vectors``, filled off the
command path, verified against canonical memory before anything is served.

- :class:`SemanticChannel` owns the provider (its descriptor locked when attached), the
  ``memory_vectors`` read model (:class:`projections.vectors.VectorStore`) and one in-process
  matrix per namespace, refreshed incrementally (new vector rows by ``seq``; rows of
  memories that stopped being retrievable marked dead from
  ``canonical_memory.updated_position``).
- A memory has up to two vectors: its statement and, when it has provenance, the start of
  the transcript turn it was extracted from (``field`` ``source``; more evidence per memory,
  the transcript says what the one-line statement leaves out). A memory's semantic score is
  the better of its vectors' cosines.
- Search is exact: one matrix-vector product over the namespace's live rows (unit vectors,
  so the dot product is the cosine), ties broken by memory id. Every candidate is checked
  against the current canonical document before it is returned: the memory must be
  retrievable now and its current text must have the vector's content digest, so a vector
  of a superseded, forgotten or pruned memory, or of other text, is never served (after
  seed 000's durable semantic recall, which re-reads every candidate and requires Active
  status plus a matching revision and digest). A revision that kept its text (reinforced,
  pinned) is served its earlier vector until its own row is written.
- :class:`EmbeddingIndexer` is a background thread: after a write (``kick``) it writes a
  vector row for every retrievable memory whose current revision lacks one, in batches,
  reusing a stored vector of identical content (same digest, same model) instead of
  calling the provider (``projections.vectors``).
  Commands never wait for it; ``wait_ready`` lets a host wait with a timeout.
- Any provider or validation failure on the query path drops the semantic channel for
  that query: :class:`SemanticStatus` says ``degraded`` with the reason code, and recall
  answers from the lexical channel alone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Protocol

import numpy as np
import numpy.typing as npt

from memory_ledger.commands.embeddings.base import (
    EmbeddingDescriptor,
    EmbeddingError,
    EmbeddingProvider,
    content_digest,
    embed_checked,
    embedding_text,
)
from memory_ledger.commands.recall import ann
from memory_ledger.commands.recall.semantic_status import OFF, SemanticState, SemanticStatus
from memory_ledger.ledger.arguments import check_timeout
from memory_ledger.ledger.ids import Namespace
from memory_ledger.projections.canonical import RETRIEVABLE, CanonicalMemory
from memory_ledger.projections.store import ProjectionDamagedError, is_damage
from memory_ledger.projections.vectors import FIELDS, PendingMemory, StoredVectors, VectorStore

__all__ = [
    "OFF",
    "EmbeddingIndexer",
    "SemanticChannel",
    "SemanticStatus",
    "VerifiableDoc",
    "source_text",
]

log = logging.getLogger(__name__)


class VerifiableDoc(Protocol):
    """What verification needs of a current canonical document (``MemoryDoc`` has it)."""

    @property
    def subject(self) -> str | None: ...

    @property
    def statement(self) -> str: ...

    @property
    def context(self) -> str | None: ...


def source_text(doc: VerifiableDoc) -> str:
    """The text a memory's ``source`` vector embeds: the start of its source transcript
    (``MemoryDoc.context``), or its statement when the transcript cannot be read."""
    return doc.context if doc.context else embedding_text(doc.subject, doc.statement)


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
        self.row_of: dict[tuple[str, str], int] = {}
        self.rows_of: dict[str, list[int]] = {}
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

    def __len__(self) -> int:
        return len(self.ids)

    def extend(self, stored: StoredVectors) -> None:
        """Append rows read from ``memory_vectors`` (in seq order)."""
        count = len(stored.memory_ids)
        if count == 0:
            return
        start = len(self.ids)
        need = start + count
        if need > self.matrix.shape[0]:
            capacity = max(need, self.matrix.shape[0] * 2)
            matrix = np.zeros((capacity, self.dimension), dtype=np.float32)
            matrix[:start] = self.matrix[:start]
            alive = np.zeros(capacity, dtype=bool)
            alive[:start] = self.alive[:start]
            source = np.zeros(capacity, dtype=bool)
            source[:start] = self.source[:start]
            self.matrix, self.alive, self.source = matrix, alive, source
        self.matrix[start:need] = stored.matrix
        self.alive[start:need] = True
        fields = stored.fields or ("statement",) * count
        for offset, memory_id in enumerate(stored.memory_ids):
            row = start + offset
            field = fields[offset]
            old = self.row_of.get((memory_id, field))
            if old is not None and self.alive[old]:
                self.alive[old] = False
                self.dead += 1
            self.row_of[(memory_id, field)] = row
            self.rows_of.setdefault(memory_id, []).append(row)
            self.source[row] = field == "source"
            self.ids.append(memory_id)
            self.revisions.append(stored.revisions[offset])
            self.digests.append(stored.digests[offset])
            self.fields.append(field)
        self.last_seq = stored.last_seq

    def retire(self, memory_id: str, retrievable: bool) -> None:
        """The canonical row changed: its vectors are candidates exactly while the memory
        is retrievable (verification still checks the text)."""
        for field in FIELDS:
            row = self.row_of.get((memory_id, field))
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
            fresh.rows_of.setdefault(memory_id, []).append(new_row)
        fresh.last_seq = self.last_seq
        fresh.ann_threshold = self.ann_threshold  # its index is rebuilt: the rows moved
        fresh.ann_background = self.ann_background
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
        scores = self.matrix[:size] @ query  # float32: one sgemv
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
            index = self._ann = self._built(self.matrix, size)
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
        scores = self.matrix[rows] @ query
        out = list(zip(rows.tolist(), scores.tolist(), strict=True))
        out.sort(key=lambda item: (-item[1], self.ids[item[0]], self.fields[item[0]]))
        return out[:take]

    def _built(self, matrix: npt.NDArray[np.float32], size: int) -> ann.ApproximateIndex:
        """A new index over rows ``0 .. size - 1`` of ``matrix``."""
        index = ann.ApproximateIndex(self.dimension, size)
        index.train(matrix[:size])
        index.add(matrix, size)
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
                self._ann = self._built(matrix, size)
            except Exception:  # searches stay exact; say why once
                log.exception("approximate index build failed; semantic search stays exact")

        self._building = threading.Thread(target=build, name="memory-ledger-ann", daemon=True)
        self._building.start()

    def wait_index(self, timeout: float | None = None) -> bool:
        """Wait for a background build (see ``ann_background``); True when the index is
        ready."""
        if self._building is not None:
            self._building.join(timeout)
        return self._ann is not None


class SemanticChannel:
    """Exact-cosine search over a namespace's verified vectors, plus the indexer's work.

    :param provider: the embedding provider; its descriptor is read once here and every
        later call must present the same one (``descriptor_drift`` otherwise).
    :param canonical: canonical-memory queries; its ``lock`` guards the DuckDB connection.
    :param changed_at: ``ProjectionRunner.changed_at`` (last content-changing position per
        namespace key).
    :param position: the projection position now (``ProjectionRunner.position``).
    :param source_of: reads a memory's source transcript from its
        ``transcript_positions`` (``commands.recall.lexical.SourceTranscripts``); with it each
        memory with provenance also gets a ``source`` vector.
    :raises EmbeddingError: the provider's descriptor cannot be read
        (``provider_failed``).
    """

    def __init__(
        self,
        provider: EmbeddingProvider,
        canonical: CanonicalMemory,
        changed_at: Callable[[str], int],
        position: Callable[[], int],
        source_of: Callable[[Sequence[int]], str | None] | None = None,
    ) -> None:
        self.provider = provider
        self._source_of = source_of
        self.fields: tuple[str, ...] = FIELDS if source_of is not None else ("statement",)
        """The vector fields indexed (``source`` only with a transcript reader)."""
        try:
            descriptor = provider.descriptor
        except Exception as e:
            raise EmbeddingError("provider_failed", f"provider descriptor failed: {e!r}") from e
        if not isinstance(descriptor, EmbeddingDescriptor):
            msg = (
                f"provider descriptor is a {type(descriptor).__name__}, not an EmbeddingDescriptor"
            )
            raise EmbeddingError("malformed", msg)
        self.descriptor: EmbeddingDescriptor = descriptor
        self.model_key = self.descriptor.model_key()
        self.canonical = canonical
        self.lock = canonical.lock
        self._changed_at = changed_at
        self._position = position
        with self.lock:
            self.vectors = VectorStore(canonical.conn)
            self._written = self.vectors.last_seq()
        self._cache: dict[str, _NamespaceVectors] = {}
        self.ann_threshold: int | None = ann.DEFAULT_THRESHOLD
        """Live vector rows of a namespace from which its search asks the approximate
        index, re-ranked exactly (:mod:`commands.recall.ann`; None: always exact)."""
        self.ann_background = True
        """Build a namespace's approximate index in a thread, searching exactly meanwhile
        (at 1,000,000 rows a build takes minutes on a loaded 2-core machine)."""
        self.max_namespaces = 256
        """Namespaces whose vectors stay in memory (least recently used ones are dropped
        and read back from DuckDB when asked again)."""
        self._digests: dict[str, str] = {}
        """content_digest by embedded text (verification runs per candidate per query)."""
        self._coverage: dict[str, tuple[tuple[int, int], tuple[int, int]]] = {}
        self.last_error: EmbeddingError | None = None
        """The indexer's last failed batch (None once a batch succeeds)."""

    # Query path -----------------------------------------------------------------------------

    def embed_query(self, query: str) -> tuple[npt.NDArray[np.float32] | None, SemanticStatus]:
        """The query's unit vector, or None with a ``degraded`` status (never raises)."""
        started = time.perf_counter()
        try:
            vector = embed_checked(self.provider, self.descriptor, [query], query=True)[0]
        except EmbeddingError as e:
            elapsed = (time.perf_counter() - started) * 1000
            log.warning("semantic channel degraded for a query: %s", e.reason_code)
            return None, SemanticStatus(
                state="degraded",
                model=self.model_key,
                reason=e.reason_code,
                query_embedding_ms=elapsed,
            )
        elapsed = (time.perf_counter() - started) * 1000
        return vector, SemanticStatus(
            state="ready", model=self.model_key, query_embedding_ms=elapsed
        )

    def clear(self) -> None:
        """Drop every namespace's vectors held in memory (after an erasure)."""
        self._cache.clear()

    def _namespace_vectors(self, namespace: Namespace) -> _NamespaceVectors:
        key = namespace.key()
        ns = (namespace.tenant, namespace.principal, namespace.scope_id)
        position = self._position()
        cached = self._cache.pop(key, None)
        if cached is None:
            cached = _NamespaceVectors(self.descriptor.dimension, position)
            cached.extend(self.vectors.load(self.model_key, ns, 0))  # retrievable ones
        else:
            if cached.last_seq < self._written:
                cached.extend(self.vectors.load(self.model_key, ns, cached.last_seq))
            if self._changed_at(key) > cached.built_position:
                changed = self.canonical.changed_since(
                    *ns, cached.built_position, ("memory_id", "status")
                )
                for row in changed:
                    cached.retire(row["memory_id"], row["status"] in RETRIEVABLE)
                cached.built_position = position
        if cached.dead > 1024 and cached.dead * 4 > len(cached):
            cached = cached.compacted(cached.built_position)
        cached.ann_threshold = self.ann_threshold
        cached.ann_background = self.ann_background
        self._cache[key] = cached  # most recently used last
        while len(self._cache) > self.max_namespaces:
            del self._cache[next(iter(self._cache))]
        return cached

    def search(
        self,
        namespace: Namespace,
        query_vector: npt.NDArray[np.float32],
        docs: Mapping[str, VerifiableDoc],
        depth: int,
        fields: Sequence[str] | None = None,
    ) -> list[tuple[str, float]]:
        """Top ``depth`` memory ids of ``namespace`` by semantic score: ``(memory_id,
        score)``, best first; a memory's score is the best cosine of its vectors of
        ``fields`` (default: every field indexed).

        ``docs`` are the namespace's current retrievable documents by memory id (the
        lexical index's map, at the projection position of this recall); a vector row is
        used only when its memory is in ``docs`` and the document's current text of that
        field has the row's content digest. Call with the canonical lock held.
        """
        wanted = tuple(fields) if fields is not None else self.fields
        vectors = self._namespace_vectors(namespace)
        out: dict[str, float] = {}
        fetch = max(depth * 2 * len(wanted), 16)
        while True:
            ranked = vectors.top(query_vector, fetch, wanted)
            out = {}
            for row, score in ranked:
                memory_id = vectors.ids[row]
                if memory_id in out:
                    continue  # rows come best first: the memory's best vector is in
                doc = docs.get(memory_id)
                if doc is None or not self._verified(
                    doc, vectors.digests[row], vectors.fields[row]
                ):
                    continue
                out[memory_id] = score
                if len(out) >= depth:
                    return list(out.items())
            if len(ranked) < fetch:
                return list(out.items())
            fetch *= 4

    def _verified(self, doc: VerifiableDoc, digest: str, field: str = "statement") -> bool:
        """The vector's digest is that of the document's current text of ``field``."""
        text = source_text(doc) if field == "source" else embedding_text(doc.subject, doc.statement)
        known = self._digests.get(text)
        if known is None:
            if len(self._digests) >= 200_000:
                self._digests.clear()
            known = self._digests[text] = content_digest(text)
        return known == digest

    def cosines(
        self,
        namespace: Namespace,
        query_vector: npt.NDArray[np.float32],
        docs: Mapping[str, VerifiableDoc],
        memory_ids: Sequence[str],
        fields: Sequence[str] | None = None,
    ) -> dict[str, float]:
        """Verified semantic scores of the given memories: the best cosine of each one's
        vectors of ``fields`` (default: every field indexed); memories without a current
        vector are left out. Call with the canonical lock held, after :meth:`search` of the
        same query."""
        wanted = tuple(fields) if fields is not None else self.fields
        vectors = self._namespace_vectors(namespace)
        rows: list[int] = []
        ids: list[str] = []
        for memory_id in memory_ids:
            doc = docs.get(memory_id)
            if doc is None:
                continue
            for field in wanted:
                row = vectors.row_of.get((memory_id, field))
                if row is None or not vectors.alive[row]:
                    continue
                if not self._verified(doc, vectors.digests[row], field):
                    continue
                rows.append(row)
                ids.append(memory_id)
        if not rows:
            return {}
        scores = vectors.matrix[np.asarray(rows)] @ query_vector
        out: dict[str, float] = {}
        for memory_id, score in zip(ids, scores.tolist(), strict=True):
            if memory_id not in out or score > out[memory_id]:
                out[memory_id] = float(score)
        return out

    def status(self, namespace: Namespace) -> SemanticStatus:
        """Coverage of ``namespace`` now (cached until its content or the vectors move)."""
        key = namespace.key()
        ns = (namespace.tenant, namespace.principal, namespace.scope_id)
        stamp = (self._changed_at(key), self._written)
        with self.lock:
            cached = self._coverage.get(key)
            if cached is None or cached[0] != stamp:
                cached = (stamp, self.vectors.coverage(self.model_key, ns))
                self._coverage[key] = cached
        retrievable, embedded = cached[1]
        state: SemanticState = "ready" if embedded >= retrievable else "partial"
        reason: str | None = None
        try:
            drifted = self.provider.descriptor != self.descriptor
        except Exception:
            drifted = True
        if drifted:  # every query would be refused: say so before one is asked
            state, reason = "degraded", "descriptor_drift"
        elif state == "partial" and self.last_error is not None:
            reason = self.last_error.reason_code  # why the indexer is behind
        return SemanticStatus(
            state=state,
            model=self.model_key,
            retrievable=retrievable,
            embedded=embedded,
            reason=reason,
        )

    # Indexing ------------------------------------------------------------------------------

    def pending(self, limit: int, skip: Sequence[str] = ()) -> list[PendingMemory]:
        """Retrievable memories without a current vector of a field indexed (takes the
        canonical lock)."""
        with self.lock:
            return self.vectors.pending(self.model_key, limit, skip, self.fields)

    def content_stamp(self) -> tuple[int, int]:
        """``(max updated_position, rows)`` of canonical memory: unchanged means no memory
        can have become pending (a cheap check before the anti-join of :meth:`pending`)."""
        with self.lock:
            return self.vectors.content_stamp()

    def count_pending(self, namespace: Namespace | None = None) -> int:
        """How many retrievable memories (of ``namespace``, or all) lack a current vector."""
        ns = (namespace.tenant, namespace.principal, namespace.scope_id) if namespace else None
        with self.lock:
            return self.vectors.count_pending(self.model_key, ns, self.fields)

    def _text(self, memory: PendingMemory) -> str:
        """What ``memory``'s pending vector embeds (see :func:`source_text`)."""
        statement = embedding_text(memory.subject, memory.statement)
        if memory.field != "source":
            return statement
        context = self._source_of(memory.transcript_positions) if self._source_of else None
        return context if context else statement

    def embed_and_store(self, batch: Sequence[PendingMemory]) -> int:
        """Embed ``batch`` (reusing stored vectors of identical content) and write it.

        The provider runs without the canonical lock held.

        :returns: how many vectors were computed by the provider (reused ones excluded).
        :raises EmbeddingError: the provider failed or its answer was rejected (nothing of
            the batch is written).
        """
        if not batch:
            return 0
        texts = [self._text(m) for m in batch]
        digests = [content_digest(t) for t in texts]
        with self.lock:
            reused = self.vectors.reusable(self.model_key, digests)
        missing = sorted({d: t for d, t in zip(digests, texts, strict=True) if d not in reused})
        fresh: dict[str, npt.NDArray[np.float32]] = {}
        if missing:
            by_digest = dict(zip(digests, texts, strict=True))
            computed = embed_checked(
                self.provider, self.descriptor, [by_digest[d] for d in missing]
            )
            fresh = {d: computed[i] for i, d in enumerate(missing)}
        matrix = np.stack([reused[d] if d in reused else fresh[d] for d in digests])
        with self.lock:
            self._written = self.vectors.write(self.model_key, batch, digests, matrix)
        return len(missing)


BULK_BATCH_SIZE = 64
"""Memories per provider call when indexing in the caller's thread (``run_once``)."""


class EmbeddingIndexer:
    """Background thread that fills ``memory_vectors`` after writes.

    :param channel: the semantic channel whose model is indexed.
    :param catch_up: brings the projections to the ledger head (``MemoryEngine.catch_up``).
    :param batch_size: memories per provider call. 16 by default: a recall's query embedding
        may wait behind one batch (bundled MiniLM on this 2-core CPU: 41 ms for 16 texts,
        77 ms for 32, for 390 vs 416 texts/s).
    :param poll_seconds: how often an idle indexer looks for work written by other
        processes (writes of this engine wake it at once through :meth:`kick`).
    :param on_damage: called with the DuckDB error when the projection file turns out
        damaged (the engine marks the file; the thread then stops).
    """

    def __init__(
        self,
        channel: SemanticChannel,
        catch_up: Callable[[], int],
        *,
        batch_size: int = 16,
        poll_seconds: float = 1.0,
        on_damage: Callable[[BaseException], object] | None = None,
    ) -> None:
        self.channel = channel
        self._on_damage = on_damage
        self._catch_up = catch_up
        self.batch_size = batch_size
        self.poll_seconds = poll_seconds
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._failures = 0
        self._skip: dict[str, float] = {}
        self._last_failed: str | None = None
        self._same_batch = 0
        self._clean: tuple[int, int] | None = None
        self.embedded = 0
        """Vectors computed by the provider so far (reused ones not counted)."""
        self.failed_batches = 0
        """Provider calls that failed or were rejected since the indexer started."""
        self.last_refresh: tuple[datetime, int] | None = None
        """When (UTC) and at which projection position the indexer last found every
        retrievable memory embedded (None: not yet in this process)."""
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start the background thread (idempotent)."""
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, name="memory-ledger-embeddings", daemon=True
            )
            self._thread.start()

    @property
    def consecutive_failures(self) -> int:
        """Failed batches since the last one that succeeded."""
        return self._failures

    def _completed(self, position: int) -> None:
        self.last_refresh = (datetime.now(UTC), position)

    def kick(self) -> None:
        """Ask the thread to look for work now (cheap; called after every append)."""
        self._wake.set()

    def run_once(self) -> int:
        """Index everything pending now, in this thread, in batches of
        :data:`BULK_BATCH_SIZE` (no recall waits on this thread's batches); returns vectors
        written.

        :raises EmbeddingError: a batch failed (what was written before it stays).
        """
        position = self._catch_up()
        written = 0
        while True:
            batch = self.channel.pending(max(self.batch_size, BULK_BATCH_SIZE))
            if not batch:
                self._completed(position)
                return written
            try:
                self.embedded += self.channel.embed_and_store(batch)
            except EmbeddingError as e:
                self.channel.last_error = e
                self.failed_batches += 1
                self._failures += 1
                raise
            self._failures = 0
            self.channel.last_error = None
            written += len(batch)

    def _run(self) -> None:
        while not self._stop.is_set():
            batch: list[PendingMemory] = []
            try:
                position = self._catch_up()
                now = time.monotonic()
                self._skip = {k: v for k, v in self._skip.items() if v > now}
                stamp = self.channel.content_stamp()
                if stamp != self._clean or self._skip:
                    batch = self.channel.pending(self.batch_size, tuple(self._skip))
                    if batch:
                        self.embedded += self.channel.embed_and_store(batch)
                        self._failures = 0
                        self.channel.last_error = None
                        continue
                    if not self._skip:
                        self._clean = stamp  # nothing to do until canonical memory moves
                        self._completed(position)
            except EmbeddingError as e:
                self.channel.last_error = e
                self._failures += 1
                self.failed_batches += 1
                delay = min(30.0, 0.25 * 2 ** min(self._failures, 7))
                first = batch[0].memory_id if batch else None
                self._same_batch = self._same_batch + 1 if first == self._last_failed else 1
                self._last_failed = first
                # A rejected answer, or the same batch failing again, is about its texts,
                # not an outage: embed the batch in halves so that the texts that fail are
                # set aside (as long as the back-off) and the others go in now.
                if batch and (e.reason_code != "provider_failed" or self._same_batch >= 2):
                    until = time.monotonic() + delay
                    failing = self._isolate(batch)
                    self._skip.update({memory_id: until for memory_id in failing})
                    if len(failing) < len(batch):
                        continue  # some went in: no back-off
                log.warning("embedding batch failed (%s); retrying in %.1f s", e.reason_code, delay)
                if self._stop.wait(delay):
                    return
                continue
            except Exception as e:  # log, back off, try again; a damaged file stops it
                if self._stop.is_set():
                    return
                if is_damage(e) or isinstance(e, ProjectionDamagedError):
                    if self._on_damage is not None and not isinstance(e, ProjectionDamagedError):
                        self._on_damage(e)
                    log.error("embedding indexer stopped: the projection file is damaged")
                    return
                self._failures += 1
                delay = min(30.0, 0.25 * 2 ** min(self._failures, 7))
                log.exception("embedding indexer failed; retrying in %.1f s", delay)
                if self._stop.wait(delay):
                    return
                continue
            self._wake.wait(self.poll_seconds)
            self._wake.clear()

    def _isolate(self, batch: Sequence[PendingMemory]) -> list[str]:
        """Embed ``batch`` in halves, recursively; return the ids of the memories whose
        own single-item call failed (the rest are written)."""
        if self._stop.is_set():
            return [m.memory_id for m in batch]
        try:
            self.embedded += self.channel.embed_and_store(batch)
            return []
        except EmbeddingError:
            if len(batch) == 1:
                return [batch[0].memory_id]
        middle = len(batch) // 2
        return self._isolate(batch[:middle]) + self._isolate(batch[middle:])

    def wait_ready(self, timeout: float, namespace: Namespace | None = None) -> bool:
        """Wait up to ``timeout`` seconds until every retrievable memory (of ``namespace``,
        or of the store) has a vector of the model at the ledger head; True when ready.
        Without the background thread the caller's thread embeds, a batch at a time (a
        batch started before the deadline finishes); a failed batch returns False.

        :raises InvalidArgumentError: (a ``ValueError``) ``timeout`` is not a finite number
            >= 0 (NaN included).
        """
        seconds = check_timeout("timeout", timeout, allow_none=False)
        assert seconds is not None
        deadline = time.monotonic() + seconds
        background = self._thread is not None and self._thread.is_alive()
        while True:
            position = self._catch_up()
            if self.channel.count_pending(namespace) == 0:
                if namespace is None:
                    self._completed(position)
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            if background:
                self.kick()
                time.sleep(min(0.05, remaining))
                continue
            # No background thread: do the work here, a batch at a time, until the deadline.
            batch = self.channel.pending(self.batch_size)
            try:
                self.embedded += self.channel.embed_and_store(batch)
            except EmbeddingError as e:
                self.channel.last_error = e
                self.failed_batches += 1
                return False

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread (waits up to ``timeout`` seconds for a batch in flight)."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
