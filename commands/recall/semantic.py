"""The semantic recall channel: cosine over each namespace's vectors held in process,
computed before a command returns, verified against canonical memory before anything is
served.

- :class:`SemanticChannel` owns the provider (its descriptor locked when attached), the
  ``memory_vectors`` read model (:class:`projections.vectors.VectorStore`) and the vectors
  search reads (:class:`~commands.recall.served_vectors.ServedVectors`: one matrix per
  namespace, read from DuckDB once, then kept current by every row computed; rows of
  memories that stopped being retrievable are marked dead from the command's own events and
  from ``canonical_memory.updated_position``).
- Vectors before the acknowledgement: the engine hands every appended batch to
  :meth:`SemanticChannel.embed_appended`, which embeds the batch's new memories in as few
  provider calls as it takes (derived from the events: :mod:`commands.recall.foreground`),
  serves them at once and buffers them for one bulk write behind. A provider that fails or
  overruns :attr:`SemanticChannel.vector_timeout` leaves the write standing and the
  memories pending: the search's :class:`SemanticStatus` is ``partial`` with the reason code
  and the pending count, until the indexer fills them.
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
  pinned) is served its earlier vector.
- :class:`EmbeddingIndexer` is a background thread: it writes the rows commands put, and
  embeds what no command did (another process's writes, a new model, a failed or late
  call, source vectors whose turn was not in the command) a page at a time, reusing a
  stored vector of identical content (same digest, same model) instead of calling the
  provider (``projections.vectors``); ``wait_ready`` lets a host wait with a timeout.
- Any provider or validation failure on the query path drops the semantic channel for
  that query: :class:`SemanticStatus` says ``degraded`` with the reason code, and recall
  answers from the lexical channel alone.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import msgspec
import numpy as np
import numpy.typing as npt

from memory_ledger.commands.embeddings.base import (
    EmbeddingDescriptor,
    EmbeddingError,
    EmbeddingProvider,
    content_digest,
    embed_checked,
    embedding_text,
    max_batch_size,
)
from memory_ledger.commands.recall import ann
from memory_ledger.commands.recall.foreground import (
    ForegroundCalls,
    OwnPositions,
    appended_vectors,
    retired_by,
)
from memory_ledger.commands.recall.semantic_status import OFF, SemanticState, SemanticStatus
from memory_ledger.commands.recall.served_vectors import (
    ServedVectors,
    VectorRows,
    _NamespaceVectors,
    row_scores,
)
from memory_ledger.commands.recall.vector_block import StoredVectorBlock
from memory_ledger.ledger.arguments import check_timeout
from memory_ledger.ledger.ids import Namespace
from memory_ledger.projections.canonical import RETRIEVABLE, CanonicalMemory
from memory_ledger.projections.serving.state import ServingState
from memory_ledger.projections.store import ProjectionDamagedError, is_damage
from memory_ledger.projections.vectors import FIELDS, PendingMemory, StoredVectors, VectorStore

__all__ = [
    "DEFAULT_VECTOR_TIMEOUT",
    "OFF",
    "EmbeddingIndexer",
    "SemanticChannel",
    "SemanticStatus",
    "VerifiableDoc",
    "source_text",
]

log = logging.getLogger(__name__)

DEFAULT_VECTOR_TIMEOUT: float | None = None
"""Seconds a command waits for its memories' vectors before it returns with them pending.
None (the default): the provider runs in the command's thread, bounded by its own timeout
(the HTTP provider's ``timeout``); a handoff to a worker thread costs milliseconds per
command on a loaded 2-core machine (``python -m benchmarks vectors_ack``)."""


class CanonicalRows(Protocol):
    """The canonical-memory reads the channel makes (``CanonicalMemory`` and the serving
    state's ``ServingState`` both have them)."""

    def changed_since(
        self, tenant: str, principal: str, scope_id: str, position: int, columns: Sequence[str] = ()
    ) -> list[dict[str, Any]]: ...

    def active_memories(
        self, tenant: str, principal: str, scope_id: str, columns: Sequence[str] = ()
    ) -> list[dict[str, Any]]: ...

    def count_namespace(self, tenant: str, principal: str, scope_id: str) -> int: ...


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
    :param serving: the engine's serving state (:mod:`projections.serving.state`): with it,
        which rows are live, which memories are pending and how many are retrievable come
        from it (under its lock, at its position), never from DuckDB ``canonical_memory``;
        ``changed_at`` and ``position`` are then ignored. DuckDB is read only for a
        namespace's vector rows the first time it is asked for.
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
        *,
        serving: ServingState | None = None,
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
        self._serving = serving
        self._documents: CanonicalRows = canonical if serving is None else serving
        """Where a namespace's current documents are read: the serving state when given."""
        self._documents_lock: contextlib.AbstractContextManager[object] = (
            serving.lock if serving is not None else contextlib.nullcontext()
        )
        self._changed_at = changed_at if serving is None else serving.changed_at
        self._position = position if serving is None else (lambda: serving.position)
        with self.lock:
            self.vectors = VectorStore(canonical.conn)
        self.served = ServedVectors(self.vectors, self.model_key, self.descriptor.dimension)
        """The vectors search reads, per namespace, and the rows not yet written."""
        self.ann_threshold: int | None = ann.DEFAULT_THRESHOLD
        """Live vector rows of a namespace from which its search asks the approximate
        index, re-ranked exactly (:mod:`commands.recall.ann`; None: always exact)."""
        self.ann_background = True
        """Build a namespace's approximate index in a thread, searching exactly meanwhile
        (at 1,000,000 rows a build takes minutes on a loaded 2-core machine)."""
        self._digests: dict[str, str] = {}
        """content_digest by embedded text (verification runs per candidate per query)."""
        self.last_error: EmbeddingError | None = None
        """The last failed embedding call of a command or of the indexer (None once one
        succeeds); a search that finds memories pending names its reason code."""
        self.vector_timeout: float | None = DEFAULT_VECTOR_TIMEOUT
        """Seconds a command waits for its memories' vectors (None, the default: no
        deadline of ours, the provider runs in the command's thread and its own timeout
        bounds it; a number: the call runs in a worker thread). Past it the command returns,
        its memories pending (``provider_timeout``) until the late call or the indexer
        fills them."""
        self.max_batch = max_batch_size(provider)
        """Texts per provider call (:func:`~commands.embeddings.base.max_batch_size`)."""
        self.provider_calls = 0
        """Provider calls made for memories (queries not counted)."""
        self.on_pending: Callable[[], object] | None = None
        """Called when a command leaves vectors pending (the engine wakes its indexer)."""
        self._calls = ForegroundCalls()
        self._own = OwnPositions()
        self._behind = False
        self.stored_vectors: Callable[[str, str], StoredVectorBlock | None] | None = None
        """``(model key, namespace key) -> block`` of the persisted recall index (set by the
        engine): a namespace's first read starts from it and reads from DuckDB only the
        rows written after it."""

    @property
    def max_namespaces(self) -> int:
        """Namespaces whose vectors stay in memory (least recently used ones are dropped
        and read back from DuckDB when asked again)."""
        return self.served.max_namespaces

    @max_namespaces.setter
    def max_namespaces(self, value: int) -> None:
        self.served.max_namespaces = value

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

    def clear(self, keep: Callable[[str], bool] | None = None) -> None:
        """Drop every namespace's vectors held in memory and the rows not yet written
        (after an erasure), but those of the namespaces whose key ``keep`` accepts (the
        indexer embeds the remaining namespaces' dropped rows again)."""
        self.served.clear(keep)
        self._digests.clear()

    def close(self) -> None:
        """Write the buffered rows (under the projection lock) and stop the worker."""
        self._calls.close()
        with self.lock:
            self.flush()

    def flush(self) -> int:
        """Write the rows commands put to ``memory_vectors`` (one bulk statement); call
        with the projection lock held. Returns how many."""
        return self.served.flush()

    # A command's vectors ------------------------------------------------------------------

    def embed_appended(self, events: Sequence[object], positions: Sequence[int] = ()) -> None:
        """Embed the memories a command just appended (``MemoryActivated`` payloads, see
        :func:`~commands.recall.foreground.appended_vectors`) and serve their vectors at once;
        retire the memories the batch made unretrievable. Called by the engine after the
        append is durable, before the command returns; never raises.

        The texts go to the provider in as few calls as it takes (:attr:`max_batch` texts
        each), waited for up to :attr:`vector_timeout`. A failure or an overrun leaves the
        memories pending (the write stands): :attr:`last_error` names it, a search reports
        them (``partial`` with the reason code) and :attr:`on_pending` wakes the indexer.
        """
        try:
            written = self._embed_appended(events)
            self._own.add(positions)  # applied here: no re-read of canonical memory for them
            self._hold(written)
        except Exception as e:  # a defect must not fail a durable command
            log.exception("vectors of a command are pending")
            failed = f"embedding failed: {type(e).__name__}"
            self.last_error = EmbeddingError("provider_failed", failed)
            if self.on_pending is not None:
                self.on_pending()

    def _hold(self, written: Mapping[str, Namespace]) -> None:
        """Hold the vectors of the namespaces a command wrote that this process does not
        hold yet (read once, while they are small in a new store; from then on every
        command's rows reach them through ``put``), so the first recall after a large
        ingest reads nothing back. Only with a serving state (the documents' position
        needs no DuckDB catch-up)."""
        if self._serving is None:
            return
        for key, namespace in written.items():
            if key not in self.served.cache:
                self._namespace_vectors(namespace, flush=False)

    def _embed_appended(self, events: Sequence[object]) -> dict[str, Namespace]:
        """Embed and put a command's memories; returns the namespaces of its statement
        memories by key."""
        retired, forgotten = retired_by(events)
        for key, memory_id in retired:
            self.served.retire(key, memory_id)
        for key in forgotten:
            self.served.drop(key)
        memories, texts = appended_vectors(events, self.fields)
        if not memories:
            return {}
        by_namespace: dict[str, list[str]] = {}
        namespaces: dict[str, Namespace] = {}
        for m in memories:
            if m.field == "statement":
                ns = Namespace(tenant=m.tenant, principal=m.principal, scope_id=m.scope_id)
                key = ns.key()
                by_namespace.setdefault(key, []).append(m.memory_id)
                namespaces.setdefault(key, ns)
        for key, memory_ids in by_namespace.items():
            self.served.expect(key, memory_ids)  # pending until put
        finished = self._calls.run(lambda: self._embed_now(memories, texts), self.vector_timeout)
        if not finished:
            msg = f"embedding provider {self.model_key} overran {self.vector_timeout} s"
            self.last_error = EmbeddingError("provider_timeout", msg)
            log.warning("vectors of a command are pending: provider_timeout")
        if not finished or self.last_error is not None:
            if self.on_pending is not None:
                self.on_pending()
        return namespaces

    def _embed_now(self, memories: Sequence[PendingMemory], texts: Sequence[str]) -> None:
        """Embed ``texts`` (one per memory; identical texts once) in chunks of
        :attr:`max_batch` and put each chunk's rows as it comes. Never raises: a failure is
        kept in :attr:`last_error`."""
        try:
            digests = [self._digest(t) for t in texts]
            rows_of: dict[str, list[int]] = {}
            for i, d in enumerate(digests):
                rows_of.setdefault(d, []).append(i)
            unique = list(rows_of)
            for start in range(0, len(unique), self.max_batch):
                chunk = unique[start : start + self.max_batch]
                first = [rows_of[d][0] for d in chunk]
                self.provider_calls += 1
                computed = embed_checked(self.provider, self.descriptor, [texts[i] for i in first])
                picked = [i for d in chunk for i in rows_of[d]]
                slot = {d: k for k, d in enumerate(chunk)}
                matrix = computed[np.asarray([slot[digests[i]] for i in picked], dtype=np.intp)]
                rows = VectorRows(
                    tuple(memories[i] for i in picked), tuple(digests[i] for i in picked), matrix
                )
                self.served.put(rows)
            self.last_error = None
        except EmbeddingError as e:
            self.last_error = e
            log.warning("vectors of a command are pending: %s", e.reason_code)
        except Exception as e:  # a defect must not fail a durable command
            log.exception("vectors of a command are pending")
            failed = f"embedding failed: {type(e).__name__}"
            self.last_error = EmbeddingError("provider_failed", failed)

    def _digest(self, text: str) -> str:
        """``content_digest(text)``, cached for verification."""
        known = self._digests.get(text)
        if known is None:
            if len(self._digests) >= 200_000:
                self._digests.clear()
            known = self._digests[text] = content_digest(text)
        return known

    def _namespace_vectors(self, namespace: Namespace, *, flush: bool = True) -> _NamespaceVectors:
        """The namespace's served vectors, their live mask brought to the documents'
        position (the serving state's, or DuckDB's without one). Only a first read (from
        DuckDB ``memory_vectors``) takes the projection lock: with a serving state, a held
        namespace is refreshed from it alone, so a recall never waits for DuckDB."""
        key = namespace.key()
        ns = (namespace.tenant, namespace.principal, namespace.scope_id)
        with self._documents_lock:
            position = self._position()

            def refresh(held: _NamespaceVectors) -> None:
                last_change = self._changed_at(key)
                if last_change <= held.built_position:
                    pass
                elif self._own.covered(held.built_position, last_change):
                    held.built_position = position  # only this process's batches: applied
                else:
                    rows = self._documents.changed_since(
                        *ns, held.built_position, ("memory_id", "status", "subject", "statement")
                    )
                    for row in rows:
                        memory_id, retrievable = row["memory_id"], row["status"] in RETRIEVABLE
                        held.retire(memory_id, retrievable)
                        text = embedding_text(row["subject"], row["statement"])
                        found = held.find(memory_id, "statement")
                        if not retrievable or (
                            found is not None and held.digests[found] == self._digest(text)
                        ):
                            held.missing.discard(memory_id)
                        else:
                            held.missing.add(memory_id)
                            self._behind = True
                    held.built_position = position
                held.ann_threshold = self.ann_threshold
                held.ann_background = self.ann_background

            if self._serving is None:
                with self.lock:
                    found = self.served.namespace(namespace, position, refresh)
            else:
                found = self.served.namespace(namespace, position, refresh, may_load=False)
                if found is None:
                    with self.lock:  # the first read of the namespace: its DuckDB rows
                        found = self.served.namespace(
                            namespace,
                            position,
                            refresh,
                            lambda held: self._load(held, ns),
                            flush=flush,
                        )
            assert found is not None
            if self._behind and self.on_pending is not None:
                self._behind = False
                self.on_pending()  # another process's memories: the indexer embeds them
            return found

    def _load(self, held: _NamespaceVectors, ns: tuple[str, str, str]) -> None:
        """Fill a new ``held`` with the ``memory_vectors`` rows of the namespace's memories
        retrievable in the serving state (which may be ahead of DuckDB ``canonical_memory``:
        rows are read whatever it says, then kept only for those memories); ``missing``:
        the retrievable ones with no statement row. Call with the projection lock and the
        documents' lock held."""
        assert self._serving is not None
        if not self._serving.count_namespace(*ns):
            return  # nothing to serve (an erased namespace's rows are never read in)
        if self._load_stored(held, ns):
            return
        live = self._serving.retrievable_ids(*ns)
        self.served.changed = True  # read from DuckDB: the next persisted file holds it
        stored = self.vectors.load(self.model_key, ns, 0, retrievable_only=False)
        count = len(stored.memory_ids)
        known = np.fromiter((m in live for m in stored.memory_ids), bool, count)
        if count and not known.all():  # rows of memories no longer retrievable stay out
            kept = np.flatnonzero(known).tolist()
            stored = msgspec.structs.replace(
                stored,
                memory_ids=tuple(stored.memory_ids[i] for i in kept),
                revisions=tuple(stored.revisions[i] for i in kept),
                digests=tuple(stored.digests[i] for i in kept),
                matrix=stored.matrix[known],
                fields=tuple(stored.fields[i] for i in kept) if stored.fields else (),
            )
        held.extend(stored)
        row_of = held.row_of
        held.missing = {m for m in live if (m, "statement") not in row_of}
        if held.missing:
            self._behind = True

    def _load_stored(self, held: _NamespaceVectors, ns: tuple[str, str, str]) -> bool:
        """Fill a new ``held`` from the persisted block of the namespace (when there is one
        not ahead of the serving state), then the ``memory_vectors`` rows written after it
        (kept only for memories retrievable now); the caller's refresh brings it from the
        block's position to the serving state's. False: no usable block."""
        assert self._serving is not None
        if self.stored_vectors is None:
            return False
        key = Namespace(tenant=ns[0], principal=ns[1], scope_id=ns[2]).key()
        block = self.stored_vectors(self.model_key, key)
        if block is None or block[0].built > self._serving.position:
            return False
        meta, matrix, stored_ann = block
        if matrix.shape[1] != held.dimension:
            return False
        held.adopt(meta, matrix, stored_ann)
        later = self.vectors.load(self.model_key, ns, meta.last_seq, retrievable_only=False)
        if later.memory_ids:
            live = self._serving.retrievable_ids(*ns)
            kept = [i for i, m in enumerate(later.memory_ids) if m in live]
            held.extend(
                StoredVectors(
                    memory_ids=tuple(later.memory_ids[i] for i in kept),
                    revisions=tuple(later.revisions[i] for i in kept),
                    digests=tuple(later.digests[i] for i in kept),
                    last_seq=later.last_seq,
                    matrix=later.matrix[np.asarray(kept, dtype=np.intp)],
                    fields=tuple(later.fields[i] for i in kept) if later.fields else (),
                )
            )
            for i in kept:
                if (later.fields[i] if later.fields else "statement") == "statement":
                    held.missing.discard(later.memory_ids[i])
            self.served.changed = True
        return True

    def persisted_vectors(self) -> dict[str, StoredVectorBlock]:
        """Every held namespace's vectors as persisted blocks (buffered rows written first,
        so each block covers the ``memory_vectors`` rows up to its namespace's last seq);
        call with the projection lock held."""
        self.flush()

        def last_seq(key: str) -> int:
            tenant, principal, scope_id = msgspec.json.decode(key)
            return self.vectors.max_seq(self.model_key, (tenant, principal, scope_id))

        return self.served.blocks(last_seq)

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
        field has the row's content digest. Takes the documents' lock (the serving state's,
        when given), and the projection lock only for a namespace's first read: call
        without the projection lock held (the lock order of ``commands/engine/serving.py``).
        """
        wanted = tuple(fields) if fields is not None else self.fields
        vectors = self._namespace_vectors(namespace)
        with self.served.lock:  # a command's put may grow the matrix meanwhile
            return self._search(vectors, query_vector, docs, depth, wanted)

    def _search(
        self,
        vectors: _NamespaceVectors,
        query_vector: npt.NDArray[np.float32],
        docs: Mapping[str, VerifiableDoc],
        depth: int,
        wanted: tuple[str, ...],
    ) -> list[tuple[str, float]]:
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
        return self._digest(text) == digest

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
        vector are left out. Locks as :meth:`search`; call after :meth:`search` of the
        same query."""
        wanted = tuple(fields) if fields is not None else self.fields
        vectors = self._namespace_vectors(namespace)
        with self.served.lock:
            return self._cosines(vectors, query_vector, docs, memory_ids, wanted)

    def _cosines(
        self,
        vectors: _NamespaceVectors,
        query_vector: npt.NDArray[np.float32],
        docs: Mapping[str, VerifiableDoc],
        memory_ids: Sequence[str],
        wanted: tuple[str, ...],
    ) -> dict[str, float]:
        rows: list[int] = []
        ids: list[str] = []
        for memory_id in memory_ids:
            doc = docs.get(memory_id)
            if doc is None:
                continue
            for field in wanted:
                row = vectors.find(memory_id, field)
                if row is None or not vectors.alive[row]:
                    continue
                if not self._verified(doc, vectors.digests[row], field):
                    continue
                rows.append(row)
                ids.append(memory_id)
        if not rows:
            return {}
        scores = row_scores(vectors.matrix[np.asarray(rows)], query_vector)
        out: dict[str, float] = {}
        for memory_id, score in zip(ids, scores.tolist(), strict=True):
            if memory_id not in out or score > out[memory_id]:
                out[memory_id] = float(score)
        return out

    def status(self, namespace: Namespace, retrievable: int | None = None) -> SemanticStatus:
        """Coverage of ``namespace`` now, as search serves it: ``retrievable`` memories
        (default: counted in canonical memory), of which those not known to lack a
        statement vector for their current text are ``embedded``; the others are pending
        (a command's embedding failed or is late, or the indexer has not reached them).
        Takes the projection lock."""
        vectors = self._namespace_vectors(namespace)
        if retrievable is None:
            reading = self.lock if self._serving is None else self._documents_lock
            with reading:
                retrievable = self._documents.count_namespace(
                    namespace.tenant, namespace.principal, namespace.scope_id
                )
        with self.served.lock:
            pending = len(vectors.missing)
        embedded = max(0, retrievable - pending)
        state: SemanticState = "ready" if pending == 0 else "partial"
        reason: str | None = None
        try:
            drifted = self.provider.descriptor != self.descriptor
        except Exception:
            drifted = True
        if drifted:  # every query would be refused: say so before one is asked
            state, reason = "degraded", "descriptor_drift"
        elif state == "partial":
            error = self.last_error  # why a command's vectors or the indexer are behind
            reason = error.reason_code if error is not None else "indexing"
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
        canonical lock; the rows commands put are written first)."""
        with self.lock:
            self.flush()
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
            self.flush()
            return self.vectors.count_pending(self.model_key, ns, self.fields)

    def _text(self, memory: PendingMemory) -> str:
        """What ``memory``'s pending vector embeds (see :func:`source_text`)."""
        statement = embedding_text(memory.subject, memory.statement)
        if memory.field != "source":
            return statement
        context = self._source_of(memory.transcript_positions) if self._source_of else None
        return context if context else statement

    def embed_and_store(self, batch: Sequence[PendingMemory], chunk: int | None = None) -> int:
        """Embed ``batch`` (reusing stored vectors of identical content), write it in one
        transaction and serve it.

        The provider runs without the canonical lock held, ``chunk`` texts a call (default
        :attr:`max_batch`). When a call fails, the rows of the calls before it are written
        and served, then the error is raised.

        :returns: how many vectors were computed by the provider (reused ones excluded).
        :raises EmbeddingError: the provider failed or its answer was rejected.
        """
        if not batch:
            return 0
        size = max(1, min(chunk or self.max_batch, self.max_batch))
        texts = [self._text(m) for m in batch]
        digests = [self._digest(t) for t in texts]
        with self.lock:
            known = self.vectors.reusable(self.model_key, digests)
        by_digest = dict(zip(digests, texts, strict=True))
        missing = sorted(d for d in by_digest if d not in known)
        failure: EmbeddingError | None = None
        computed = 0
        for start in range(0, len(missing), size):
            part = missing[start : start + size]
            try:
                self.provider_calls += 1
                texts_of_part = [by_digest[d] for d in part]
                vectors = embed_checked(self.provider, self.descriptor, texts_of_part)
            except EmbeddingError as e:
                failure = e
                break
            known.update(zip(part, vectors, strict=True))
            computed += len(part)
        done = [i for i, d in enumerate(digests) if d in known]
        if done:
            rows = VectorRows(
                tuple(batch[i] for i in done),
                tuple(digests[i] for i in done),
                np.stack([known[digests[i]] for i in done]),
            )
            with self.lock:
                self.vectors.write(self.model_key, rows.memories, rows.digests, rows.matrix)
                self.served.put(rows, persist=False)
        if failure is not None:
            raise failure
        return computed


PAGE_SIZE = 4096
"""Pending memories the indexer reads at once: embedded in provider calls of its
``batch_size`` and written in one transaction, with no catch-up or count in between."""


class EmbeddingIndexer:
    """Background thread that persists the vectors commands computed and fills the ones
    they could not: another process's writes (caught up from the ledger), a new model
    (every memory re-embedded), a command whose provider call failed or overran, source
    vectors whose transcript turn was not in the command.

    :param channel: the semantic channel whose model is indexed.
    :param catch_up: brings the projections to the ledger head (``MemoryEngine.catch_up``).
    :param batch_size: texts per provider call (at most the provider's
        :func:`~commands.embeddings.base.max_batch_size`). 64 by default: a recall's query
        embedding may wait behind one call of a local model (bundled MiniLM on this 2-core
        CPU: 41 ms for 16 texts, 77 ms for 32).
    :param poll_seconds: how often an idle indexer looks for work written by other
        processes (a command that left vectors pending wakes it at once through
        :meth:`kick`).
    :param on_damage: called with the DuckDB error when the projection file turns out
        damaged (the engine marks the file; the thread then stops).
    """

    def __init__(
        self,
        channel: SemanticChannel,
        catch_up: Callable[[], int],
        *,
        batch_size: int = 64,
        poll_seconds: float = 1.0,
        on_damage: Callable[[BaseException], object] | None = None,
    ) -> None:
        self.channel = channel
        self._on_damage = on_damage
        self._catch_up = catch_up
        self.batch_size = batch_size
        self.page_size = PAGE_SIZE
        """Pending memories read at once (one bulk write each)."""
        self.flush_delay = 0.1
        """Seconds the rows commands put wait for more before they are written together."""
        self.poll_seconds = poll_seconds
        self._wake = threading.Event()
        self._scan = threading.Event()
        self._scan.set()  # the first pass looks for work left by earlier processes
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
        self._batch: Sequence[PendingMemory] = ()
        channel.on_pending = self.kick  # a command that left vectors pending wakes it

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

    def kick(self, scan: bool = True) -> None:
        """Wake the thread (cheap): it writes the vectors commands put and, with ``scan``,
        looks for memories still lacking one (False: a command embedded all of its own)."""
        if scan:
            self._scan.set()
        self._wake.set()

    def _embed_page(self, page: Sequence[PendingMemory]) -> None:
        """Embed one page: provider calls of ``batch_size``, one write."""
        self.embedded += self.channel.embed_and_store(page, self.batch_size)
        self._failures = 0
        self.channel.last_error = None

    def run_once(self) -> int:
        """Index everything pending now, in this thread, a page at a time (each page in
        provider calls of ``batch_size`` and one write); returns vectors written.

        :raises EmbeddingError: a call failed (what was computed before it is written).
        """
        position = self._catch_up()
        written = 0
        while True:
            page = self.channel.pending(self.page_size)
            if not page:
                self._completed(position)
                return written
            try:
                self._embed_page(page)
            except EmbeddingError as e:
                self.channel.last_error = e
                self.failed_batches += 1
                self._failures += 1
                raise
            written += len(page)

    def _pass(self) -> None:
        """One round of the thread: write what commands put; when asked to scan, embed
        every pending page (no catch-up or count between pages)."""
        if not self._scan.is_set() and self.channel.served.unpersisted < self.page_size:
            # Only rows to write: let the next commands' rows join them (one statement).
            self._stop.wait(self.flush_delay)
        with self.channel.lock:
            self.channel.flush()
        if not self._scan.is_set() and not self._skip:
            return
        self._scan.clear()
        position = self._catch_up()
        now = time.monotonic()
        self._skip = {k: v for k, v in self._skip.items() if v > now}
        stamp = self.channel.content_stamp()
        if stamp == self._clean and not self._skip:
            return  # nothing can have become pending since the last clean pass
        while not self._stop.is_set():
            page = self.channel.pending(self.page_size, tuple(self._skip))
            if not page:
                break
            self._batch = page
            self._embed_page(page)
        if not self._skip:
            self._clean = stamp
            self._completed(position)

    def _run(self) -> None:
        while not self._stop.is_set():
            self._batch = ()
            try:
                self._pass()
            except EmbeddingError as e:
                self._scan.set()  # come back to what is left
                self.channel.last_error = e
                self._failures += 1
                self.failed_batches += 1
                delay = min(30.0, 0.25 * 2 ** min(self._failures, 7))
                batch = self._batch
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
                self._scan.set()
                self._failures += 1
                delay = min(30.0, 0.25 * 2 ** min(self._failures, 7))
                log.exception("embedding indexer failed; retrying in %.1f s", delay)
                if self._stop.wait(delay):
                    return
                continue
            if not self._wake.wait(self.poll_seconds):
                self._scan.set()  # the poll: another process's writes
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
            # No background thread: do the work here, a page at a time, until the deadline.
            batch = self.channel.pending(self.page_size)
            try:
                self._embed_page(batch)
            except EmbeddingError as e:
                self.channel.last_error = e
                self.failed_batches += 1
                return False

    def close(self, timeout: float = 10.0) -> None:
        """Stop the thread (waits up to ``timeout`` seconds for a batch in flight), then
        write the vectors commands put that are not written yet."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        try:
            self.channel.close()
        except Exception:  # derived rows: the next open embeds them again
            log.exception("vectors not written at close; they are embedded again when needed")
