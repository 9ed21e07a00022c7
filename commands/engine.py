"""``MemoryEngine``: one store (LMDB ledger + DuckDB projections under one folder).

Layout of a store folder::

    <store>/ledger/                     LMDB environment (the source of truth)
    <store>/projections/slot-N.duckdb   read models owned by one process at a time
                                        (disposable: rebuilt from the ledger at will)

The ledger is opened the ``eventsourcing`` way, with settings passed as ``env=`` (never
process-wide environment variables): ``PERSISTENCE_MODULE=ledger.lmdb``, ``LMDB_PATH``,
``MAPPER_TOPIC=ledger.mapper:MsgspecMapper``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, NamedTuple, cast
from uuid import UUID

import duckdb
from eventsourcing.persistence import (
    ApplicationRecorder,
    InfrastructureFactory,
    Mapper,
    OperationalError,
    StoredEvent,
)
from eventsourcing.utils import get_topic

from memory_ledger.commands.config import MemoryConfig, load_config, load_config_from
from memory_ledger.commands.direct import DirectCommands, DirectResult
from memory_ledger.commands.embedding_config import provider_from_config
from memory_ledger.commands.embeddings import EmbeddingProvider
from memory_ledger.commands.errors import StoreUnavailableError
from memory_ledger.commands.extraction import Extractor, RecordedExtractor
from memory_ledger.commands.fusion import fusion_for
from memory_ledger.commands.lexical import SourceTranscripts, analyze_query, shares_term
from memory_ledger.commands.maintenance import MaintenanceHealth, maintenance_health
from memory_ledger.commands.recall import (
    DEFAULT_FUSION,
    HybridFusion,
    MemoryDoc,
    NamespaceRecallIndex,
    RecallResult,
)
from memory_ledger.commands.recall_policy import (
    DEFAULT_RECALL_POLICY,
    RecallPolicy,
    annotate_relations,
)
from memory_ledger.commands.secrets import contains_secret
from memory_ledger.commands.semantic import OFF, EmbeddingIndexer, SemanticChannel, SemanticStatus
from memory_ledger.commands.session import MemorySession
from memory_ledger.ledger.events import LedgerEvent
from memory_ledger.ledger.ids import InvalidNamespaceError, Namespace
from memory_ledger.ledger.lmdb import LMDBApplicationRecorder
from memory_ledger.ledger.mapper import MsgspecMapper
from memory_ledger.projections.canonical import CanonicalMemory
from memory_ledger.projections.memory_map import render_memory_map
from memory_ledger.projections.runner import PROJECTION_VERSION, ProjectionRunner
from memory_ledger.projections.store import ProjectionStore, ProjectionUnavailableError, is_damage

__all__ = ["EventDecoder", "MemoryEngine", "RawRecord", "ReadModels"]

RawRecord = tuple[int, bytes | str | UUID, int, str, bytes]
"""One stored ledger record, undecoded: ``(position, originator id as stored (16 raw bytes
for a UUID), originator version, topic, state)``."""

EventDecoder = Callable[[str, bytes, Any, int], LedgerEvent]
"""``decode(topic, state, originator id as stored, version) -> event``."""


class ReadModels(NamedTuple):
    """The engine's projection connection, for read-only SQL, and the ledger position its
    read models reflect. Valid only inside :meth:`MemoryEngine.read_models`."""

    conn: duckdb.DuckDBPyConnection
    position: int


class MemoryEngine:
    """An open memory store. Create with :meth:`open`; use as a context manager.

    Commands append through :meth:`append` (one LMDB write transaction per call, durable on
    return); reads catch the projections up to the ledger head first (read-your-writes).

    Other modules use its methods only. The collaborators it holds (``factory``,
    ``recorder``, ``mapper``, ``projections``, ``runner``, ``canonical``, ``transcripts``,
    ``recall_index``) are internals, open to tests of those internals; the semantic channel
    (``semantic``, ``indexer``, ``fusion``) is documented below.
    """

    def __init__(
        self,
        path: Path,
        factory: InfrastructureFactory[Any],
        recorder: ApplicationRecorder,
        mapper: Mapper[UUID],
        projections: ProjectionStore,
        config: MemoryConfig | None = None,
        embeddings: EmbeddingProvider | None = None,
        index_in_background: bool = True,
        source_vectors: bool = True,
    ) -> None:
        self.path = path
        self.config = config or MemoryConfig()
        self.appended = 0
        """Events this engine object has appended (not counting other processes)."""
        self.factory = factory
        self.recorder = recorder
        self.mapper = mapper
        self.projections = projections
        self._read_lock = projections.lock
        self.runner = ProjectionRunner(projections, recorder, mapper)
        self.canonical = CanonicalMemory(projections.conn, self._read_lock)
        self.transcripts = SourceTranscripts(recorder, mapper)
        self.recall_index = NamespaceRecallIndex(
            self.canonical, self.runner.changed_at, self.transcripts
        )
        self._memory_maps: dict[str, tuple[int, str]] = {}
        self.fusion: HybridFusion = DEFAULT_FUSION
        """How lexical and semantic rankings are fused (when a provider is attached)."""
        self.recall_policy: RecallPolicy = DEFAULT_RECALL_POLICY
        """The default policy of :meth:`recall` (result bound, minimum lexical score,
        relation reads)."""
        self.semantic: SemanticChannel | None = None
        """The semantic channel (None: lexical recall only, the default)."""
        self.indexer: EmbeddingIndexer | None = None
        self._owned_provider: EmbeddingProvider | None = None
        if embeddings is not None:
            self.semantic = SemanticChannel(
                embeddings,
                self.canonical,
                self.runner.changed_at,
                lambda: self.runner.position,
                source_of=self.transcripts if source_vectors else None,
            )
            self.indexer = EmbeddingIndexer(
                self.semantic, self.catch_up, on_damage=self.projections.mark_damaged
            )
            self.fusion = fusion_for(self.semantic.descriptor)
            if index_in_background:
                self.indexer.start()
                self.indexer.kick()

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        sync: bool = True,
        map_size: int | None = None,
        config: MemoryConfig | None = None,
        create: bool = True,
        embeddings: EmbeddingProvider | None = None,
        index_in_background: bool = True,
        source_vectors: bool = True,
    ) -> MemoryEngine:
        """Open (or create) the store folder ``path`` (default: ``config.store_dir``).

        :param embeddings: attach a semantic channel (hybrid recall): vectors of canonical
            memories are computed by this provider in a background thread and kept in the
            ``memory_vectors`` read model. None (default): the provider ``config`` names
            (``[memory] embeddings``; its default ``"none"`` means lexical recall only).
        :param index_in_background: run that thread (False: call :meth:`index_vectors`).
        :param source_vectors: also embed the start of the transcript turn each memory was
            extracted from (its ``source`` vector; the better cosine counts). False embeds
            statements only: half the vectors, and on LoCoMo the same fused Recall@5
            (``python -m benchmarks locomo``: 0.688 vs 0.687 with MiniLM).
        :param sync: fsync every command before it returns (LMDB_SYNC).
        :param map_size: initial LMDB map size in bytes (it grows when full).
        :param config: runtime configuration (default: ``memory-ledger.toml`` if present).
        :param create: create the store when absent; with False a missing store is an error
            (read-only tools such as ``memory-ledger recall`` use this).
        :raises StoreUnavailableError: the folder cannot be created or opened; names it.
        :raises ledger.lmdb.LedgerFormatError: the store was written by a newer version.
        """
        config = config or load_config()
        owned = None
        if embeddings is None:
            embeddings = owned = provider_from_config(config)
        root = Path(path if path is not None else config.store_dir).absolute()
        if not create and not (root / "ledger" / "data.mdb").is_file():
            msg = f"no memory store at {str(root)!r} (expected {str(root / 'ledger')!r})"
            raise StoreUnavailableError(msg)
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            msg = f"cannot create memory store directory {str(root)!r}: {e.strerror or e}"
            raise StoreUnavailableError(msg) from e
        env = {
            "PERSISTENCE_MODULE": "memory_ledger.ledger.lmdb",
            "LMDB_PATH": str(root / "ledger"),
            "LMDB_SYNC": "y" if sync else "n",
            "MAPPER_TOPIC": get_topic(MsgspecMapper),
        }
        if map_size is not None:
            env["LMDB_MAP_SIZE"] = str(map_size)
        try:
            factory = InfrastructureFactory.construct(env=env)
        except OperationalError as e:
            raise StoreUnavailableError(str(e)) from e
        try:
            recorder = factory.application_recorder()
            mapper = cast(Mapper[UUID], factory.mapper())
            projections = ProjectionStore.open_slot(
                root / "projections", version=PROJECTION_VERSION
            )
        except (duckdb.Error, ProjectionUnavailableError) as e:
            factory.close()
            msg = f"cannot open a projection file in {str(root)!r}: {e}"
            raise StoreUnavailableError(msg) from e
        except BaseException:
            factory.close()
            raise
        try:
            engine = cls(
                root,
                factory,
                recorder,
                mapper,
                projections,
                config,
                embeddings=embeddings,
                index_in_background=index_in_background,
                source_vectors=source_vectors,
            )
        except BaseException:
            projections.close()
            factory.close()
            closer = getattr(owned, "close", None)
            if callable(closer):
                closer()
            raise
        engine._owned_provider = owned
        return engine

    # Write side ---------------------------------------------------------------------------

    def append(self, events: Sequence[LedgerEvent]) -> list[int]:
        """Append ``events`` in ONE durable LMDB write transaction; return their positions.

        :raises eventsourcing.persistence.IntegrityError: a stream version exists already
            (a concurrent writer); nothing of the batch is written.
        """
        stored = [self.mapper.to_stored_event(e) for e in events]
        ids = list(self.recorder.insert_events(stored) or [])
        self.appended += len(ids)
        if self.indexer is not None:
            self.indexer.kick()
        return ids

    def load_stream(self, stream_id: UUID, *, after: int = 0) -> list[LedgerEvent]:
        """Events of one stream with version > ``after``, in version order."""
        stored = self.recorder.select_events(stream_id, gt=after if after else None)
        return [cast(LedgerEvent, self.mapper.to_domain_event(s)) for s in stored]

    @property
    def head(self) -> int:
        """The ledger's last position (0 when empty)."""
        return self.recorder.max_notification_id() or 0

    def lmdb_recorder(self) -> LMDBApplicationRecorder:
        """The LMDB application recorder under this engine, for the tools that read records
        exactly as stored: the hash-chained log (``iter_log``), the stream index and the
        datastore (verify, backup, lineage, export, stats).

        :raises TypeError: this engine's ledger is not the LMDB recorder.
        """
        if not isinstance(self.recorder, LMDBApplicationRecorder):
            msg = "this needs the LMDB application recorder"
            raise TypeError(msg)
        return self.recorder

    def read_records(self, after: int, limit: int, stop: int | None = None) -> list[RawRecord]:
        """Up to ``limit`` stored records with position > ``after`` (and <= ``stop`` when
        given), in position order, undecoded (:data:`RawRecord`; decode them with
        :meth:`event_decoder`). [] past the head."""
        select_raw = getattr(self.recorder, "select_raw", None)
        if select_raw is not None:
            return cast(list[RawRecord], select_raw(after, limit, stop))
        return [  # pragma: no cover (every engine uses the LMDB recorder)
            (n.id, n.originator_id, n.originator_version, n.topic, n.state)
            for n in self.recorder.select_notifications(
                start=after, limit=limit, stop=stop, inclusive_of_start=False
            )
        ]

    def event_decoder(self) -> EventDecoder:
        """A decoder for records of :meth:`read_records`: the msgspec mapper's one-call
        decoder, or the library interface for other mappers.

        :raises msgspec.DecodeError: (when called) the stored bytes do not decode.
        """
        mapper = self.mapper
        if isinstance(mapper, MsgspecMapper):
            fast = mapper

            def decode_fast(topic: str, state: bytes, raw_id: Any, version: int) -> LedgerEvent:
                return cast(LedgerEvent, fast.decode(topic, state, raw_id, version))

            return decode_fast

        def decode(topic: str, state: bytes, raw_id: Any, version: int) -> LedgerEvent:
            oid = UUID(bytes=raw_id) if isinstance(raw_id, bytes) else raw_id
            stored = StoredEvent(
                originator_id=oid, originator_version=version, topic=topic, state=state
            )
            return cast(LedgerEvent, mapper.to_domain_event(stored))

        return decode

    def projection_runner(
        self, store: ProjectionStore, *, page_size: int | None = None
    ) -> ProjectionRunner:
        """A runner that folds this engine's ledger into another projection ``store``
        (rebuilds, as-of views, benchmarks). The caller owns ``store`` and closes it.

        :param page_size: notifications per DuckDB transaction (default: the runner's).
        """
        if page_size is None:
            return ProjectionRunner(store, self.recorder, self.mapper)
        return ProjectionRunner(store, self.recorder, self.mapper, page_size=page_size)

    # Read side ----------------------------------------------------------------------------

    @contextlib.contextmanager
    def projection_guard(self) -> Iterator[None]:
        """Turn a DuckDB error that says the projection file is damaged (a short read, a bad
        checksum) into :class:`projections.store.ProjectionDamagedError` (an ``OSError``
        naming the file), after marking the file: the next open sets it aside and rebuilds
        the read models from the ledger. Other errors pass unchanged.
        """
        try:
            yield
        except duckdb.Error as e:
            if is_damage(e):
                raise self.projections.mark_damaged(e) from e
            raise

    def catch_up(self, to: int | None = None) -> int:
        """Bring the projections up to ``to`` (default: the ledger head); return position.

        Serialized per engine: the DuckDB connection is not shared between threads.
        """
        with self._read_lock, self.projection_guard():
            return self.runner.catch_up(to)

    @property
    def projection_position(self) -> int:
        """The ledger position this engine's read models reflect now (no catch-up)."""
        return self.runner.position

    @property
    def projection_file(self) -> Path:
        """The DuckDB file holding this engine's read models (one slot of the store)."""
        return Path(self.projections.path)

    @contextlib.contextmanager
    def read_models(self, *, to: int | None = None, catch_up: bool = True) -> Iterator[ReadModels]:
        """Hold the projection lock, catch the read models up to ``to`` (default: the ledger
        head; ``catch_up=False``: leave them where they are), and yield the connection for
        read-only SQL with the position it reflects. Other threads of this engine wait
        while the block runs: keep it short, and do not keep the connection after it.
        A ``to`` beyond the head stops at the head; one the read models are past leaves them
        there (compare the yielded position).
        """
        with self._read_lock:
            position = self.catch_up(to) if catch_up else self.runner.position
            yield ReadModels(self.projections.conn, position)

    def retrievable_memories(self, namespace: Namespace) -> list[MemoryDoc]:
        """Every retrievable canonical memory of ``namespace`` (the documents of the
        in-process recall index, caught up to the ledger head), in the index's order."""
        position = self.catch_up()
        with self._read_lock:
            _, by_id = self.recall_index.docs(namespace, position)
            return list(by_id.values())

    def memory_details(self, namespace: Namespace, ids: set[str]) -> dict[str, MemoryDoc]:
        """The retrievable canonical memories of ``namespace`` among ``ids``, by id, from the
        in-process recall index as it stands: no catch-up (a snapshot read wants details
        only: subject, evidence, times)."""
        with self._read_lock:
            _, by_id = self.recall_index.docs(namespace, self.runner.position)
            return {i: by_id[i] for i in ids if i in by_id}

    def vocabulary(
        self, namespace: Namespace, field: Literal["subject", "predicate"]
    ) -> list[tuple[str, int]]:
        """``(term, records)`` of one field of ``namespace``'s memories, most frequent first
        (caught up to the ledger head)."""
        self.catch_up()
        return self.canonical.vocabulary(
            namespace.tenant, namespace.principal, namespace.scope_id, field
        )

    def prunable_memories(
        self, namespace: Namespace, max_importance: float, max_uses: int
    ) -> list[dict[str, Any]]:
        """``canonical_memory`` rows of ``namespace`` that pruning may remove (active, below
        ``max_importance``, unpinned, used at most ``max_uses`` times, never consolidated,
        without relations), oldest first; caught up to the ledger head."""
        self.catch_up()
        return self.canonical.prunable(
            namespace.tenant, namespace.principal, namespace.scope_id, max_importance, max_uses
        )

    def count_active_memories(self, namespace: Namespace | None = None) -> int:
        """Retrievable memories of ``namespace`` (None: of every namespace), caught up to the
        ledger head."""
        self.catch_up()
        if namespace is None:
            return self.canonical.count_active()
        return self.canonical.count_namespace(
            namespace.tenant, namespace.principal, namespace.scope_id
        )

    def transcript_context(self, transcript_positions: Sequence[int]) -> str | None:
        """The start of the source transcript at the first of a memory's
        ``transcript_positions`` (document expansion for recall); None when there is none."""
        return self.transcripts(transcript_positions)

    def recall(
        self,
        namespace: Namespace,
        query: str,
        k: int | None = None,
        *,
        policy: RecallPolicy | None = None,
    ) -> RecallResult:
        """Top ``k`` retrievable memories of ``namespace`` for ``query``, read-your-writes.

        Lexical BM25 (:mod:`commands.lexical`) alone, or, with a semantic channel attached,
        fused with exact cosine over the namespace's verified vectors (:attr:`fusion`).
        ``RecallResult.semantic`` reports the channel's state and coverage; a query that
        cannot be embedded degrades to lexical recall, never to an error.

        :param k: how many results (default: the policy's ``limit``).
        :param policy: the recall policy for this call (default :attr:`recall_policy`):
            result bound, minimum lexical score and one-hop relation reads; relations are
            returned in ``RecallHit.related``.
        :raises ValueError: ``query`` is not a string or ``k`` is not an integer.
        :raises InvalidNamespaceError: the namespace is invalid.
        """
        namespace.validated()
        if not isinstance(query, str):
            msg = f"query must be a string, got {type(query).__name__}"
            raise ValueError(msg)
        policy = self.recall_policy if policy is None else policy
        if k is None:
            k = policy.limit
        if not isinstance(k, int) or isinstance(k, bool):
            msg = f"k must be an integer, got {k!r}"
            raise ValueError(msg)
        ranked, status, position = self.canonical_candidates(
            namespace, query, max(k, 0), min_lexical_score=policy.min_lexical_score
        )
        hits = [doc.hit(rank, score) for rank, (doc, score) in enumerate(ranked, 1)]
        if policy.related_lookups and hits:
            pairs = [(doc, hit) for (doc, _), hit in zip(ranked, hits, strict=True)]
            with self.projection_guard():
                hits = annotate_relations(self.canonical, namespace, pairs, policy.related_lookups)
        return RecallResult(query=query, results=tuple(hits), position=position, semantic=status)

    def canonical_candidates(
        self,
        namespace: Namespace,
        query: str,
        depth: int,
        *,
        semantic: bool = True,
        min_lexical_score: float = 0.0,
    ) -> tuple[list[tuple[MemoryDoc, float]], SemanticStatus, int]:
        """The best ``depth`` retrievable canonical memories for ``query`` with their
        scores (BM25, or fused with the semantic channel), the channel's status, and the
        projection position they reflect (caught up to the ledger head first).

        The query is embedded before the projection lock is taken. ``semantic=False`` asks
        for lexical matches only (commands that target a memory by its words use it: a
        nearest vector always exists, a word match may not). ``min_lexical_score``: lexical
        matches scoring below it are dropped before fusion (:class:`RecallPolicy`).
        """
        channel = self.semantic if semantic else None
        vector, status = (None, OFF)
        if channel is not None:
            vector, status = channel.embed_query(query)
        with self._read_lock, self.projection_guard():
            position = self.catch_up()
            index, by_id = self.recall_index.docs(namespace, position)
            lexical_depth = depth if channel is None else max(depth, self.fusion.depth)
            lexical = index.search(analyze_query(query), lexical_depth)
            if min_lexical_score > 0:
                lexical = [s for s in lexical if s.score >= min_lexical_score]
            if channel is None or vector is None:
                ranked = [(by_id[s.doc_id], s.score) for s in lexical[:depth]]
            else:
                fields = self.fusion.fields
                nearest = channel.search(namespace, vector, by_id, self.fusion.depth, fields)
                scores = channel.cosines(
                    namespace, vector, by_id, [s.doc_id for s in lexical], fields
                )
                scores.update(nearest)
                fused = self.fusion.fuse_scores(
                    [(s.doc_id, s.score) for s in lexical],
                    [memory_id for memory_id, _ in nearest],
                    scores,
                    lambda memory_id: by_id[memory_id].position,
                )
                ranked = [(by_id[memory_id], score) for memory_id, score in fused[:depth]]
            if channel is not None:
                coverage = channel.status(namespace)
                status = SemanticStatus(
                    state="degraded" if status.state == "degraded" else coverage.state,
                    model=coverage.model,
                    retrievable=coverage.retrievable,
                    embedded=coverage.embedded,
                    reason=status.reason,
                    query_embedding_ms=status.query_embedding_ms,
                )
        return ranked, status, position

    def retrievable_memory(self, namespace: Namespace, memory: UUID | str) -> MemoryDoc | None:
        """The retrievable canonical memory ``memory`` of ``namespace`` (caught up to the
        ledger head), or None. A memory of another namespace is None, exactly like an id that
        does not exist: callers cannot tell the two apart (the namespace comes from the host).
        """
        namespace.validated()
        with self._read_lock, self.projection_guard():
            position = self.catch_up()
            _, by_id = self.recall_index.docs(namespace, position)
            return by_id.get(str(memory))

    def best_match(self, namespace: Namespace, text: str) -> MemoryDoc | None:
        """The retrievable memory of ``namespace`` that a command naming it by ``text``
        targets: the best lexical (BM25) match that shares a word with ``text`` in its own
        subject or statement (a word found only in its source transcript does not count), or
        None. Lexical on purpose: a nearest vector always exists, a matching word may not.
        """
        ranked, _, _ = self.canonical_candidates(namespace, text, 10, semantic=False)
        for doc, _score in ranked:
            if shares_term(text, doc.subject, doc.statement):
                return doc
        return None

    # Direct commands (the short way in; see commands/direct.py) ---------------------------

    def remember(
        self,
        namespace: Namespace,
        statement: str,
        *,
        subject: str | None = None,
        predicate: str | None = None,
        value: str | None = None,
        tags: Sequence[str] = (),
    ) -> DirectResult:
        """Store ``statement`` as canonical memory of ``namespace``, durable on return
        (:meth:`DirectCommands.remember <memory_ledger.commands.direct.DirectCommands.remember>`).
        """
        return DirectCommands(self).remember(
            namespace, statement, subject=subject, predicate=predicate, value=value, tags=tags
        )

    def forget(self, namespace: Namespace, statement_or_id: str | UUID) -> DirectResult:
        """Forget one memory of ``namespace`` by id or by its words, durable on return
        (:meth:`DirectCommands.forget <memory_ledger.commands.direct.DirectCommands.forget>`).
        """
        return DirectCommands(self).forget(namespace, statement_or_id)

    def pin(self, namespace: Namespace, statement_or_id: str | UUID) -> DirectResult:
        """Pin one memory of ``namespace`` by id or by its words (never pruned), durable on
        return (:meth:`DirectCommands.pin <memory_ledger.commands.direct.DirectCommands.pin>`).
        """
        return DirectCommands(self).pin(namespace, statement_or_id)

    def correct(
        self, namespace: Namespace, statement: str, *, target: str | UUID | None = None
    ) -> DirectResult:
        """Supersede the memory ``target`` (or the best match for ``statement``) with
        ``statement``, durable on return
        (:meth:`DirectCommands.correct <memory_ledger.commands.direct.DirectCommands.correct>`).
        """
        return DirectCommands(self).correct(namespace, statement, target=target)

    def semantic_status(self, namespace: Namespace) -> SemanticStatus:
        """The semantic channel's coverage of ``namespace`` now (``off`` without one)."""
        if self.semantic is None:
            return OFF
        namespace.validated()
        self.catch_up()
        with self.projection_guard():
            return self.semantic.status(namespace)

    def wait_for_vectors(self, timeout: float, namespace: Namespace | None = None) -> bool:
        """Wait up to ``timeout`` seconds until every retrievable memory (of ``namespace``,
        or of the store) has a vector; True when ready (also when no provider is attached:
        there is nothing to wait for)."""
        if self.indexer is None:
            return True
        with self.projection_guard():
            return self.indexer.wait_ready(timeout, namespace)

    def maintenance_health(self) -> MaintenanceHealth:
        """The semantic channel's maintenance health now (:mod:`commands.maintenance`):
        vector coverage per field, pending vectors, indexer lag in positions, failed
        batches and the last completed refresh; state ``off`` without a provider.
        Catches the projections up to the ledger head first."""
        head = self.head
        position = self.catch_up(head)
        channel, indexer = self.semantic, self.indexer
        if channel is None or indexer is None:
            return maintenance_health(None, None, ledger_head=head, projection_position=position)
        error = channel.last_error
        with self._read_lock, self.projection_guard():
            return maintenance_health(
                channel.vectors,
                channel.model_key,
                ledger_head=head,
                projection_position=position,
                fields=channel.fields,
                failures=indexer.failed_batches,
                consecutive_failures=indexer.consecutive_failures,
                last_error=error.reason_code if error is not None else None,
                last_refresh=indexer.last_refresh,
            )

    def index_vectors(self) -> int:
        """Embed every retrievable memory still lacking a vector now, in this thread;
        returns how many vector rows were written (0 without a provider).

        :raises commands.embeddings.EmbeddingError: the provider failed or was rejected.
        """
        if self.indexer is None:
            return 0
        with self.projection_guard():
            return self.indexer.run_once()

    def memory_map(self, namespace: Namespace) -> str:
        """The vocabulary map of ``namespace`` (recomputed only when the projection moved)."""
        namespace.validated()
        with self._read_lock, self.projection_guard():
            position = self.catch_up()
            key = namespace.key()
            cached = self._memory_maps.get(key)
            if cached is None or cached[0] != position:
                text = render_memory_map(
                    self.canonical, namespace.tenant, namespace.principal, namespace.scope_id
                )
                cached = (position, text)
                self._memory_maps[key] = cached
            return cached[1]

    # Sessions -----------------------------------------------------------------------------

    def session(
        self,
        namespace: Namespace,
        session_id: str,
        *,
        extractor: Extractor | None = None,
        config: MemoryConfig | None = None,
        extraction_mode: Literal["blocking", "background"] = "blocking",
        **overrides: Any,
    ) -> MemorySession:
        """Open (or resume) the session ``session_id`` under ``namespace``.

        Appends SessionOpened the first time. ``extractor`` defaults to a
        :class:`RecordedExtractor` (items given per turn). ``config`` defaults to the
        engine's; keyword ``overrides`` replace single keys (e.g. ``activation_policy=
        "manual"``, ``llm_extraction_max_items=3``).

        :raises ConfigError: an override is invalid.
        :raises InvalidNamespaceError: the namespace is invalid.
        """
        namespace.validated()
        for label, value in (
            ("tenant", namespace.tenant),
            ("principal", namespace.principal),
            ("scope_id", namespace.scope_id),
            ("session_id", session_id),
        ):
            if isinstance(value, str) and contains_secret(value):
                msg = f"{label} holds a secret-shaped value; identifiers are stored in every event"
                raise InvalidNamespaceError(msg)
        base = config or self.config
        if overrides:
            base = load_config_from(base, **overrides)
        return MemorySession(
            self,
            namespace.validated(),
            session_id,
            extractor=extractor or RecordedExtractor(),
            config=base,
            extraction_mode=extraction_mode,
        )

    def close(self) -> None:
        """Stop the embedding indexer, close the projection file and release the ledger.

        The projection file is closed under the projection lock (an indexer batch still in
        flight after the indexer's 10 s grace finishes first); the ledger is released even
        when closing the projection file fails. A provider built from the configuration is
        closed too (one passed in belongs to the caller).
        """
        try:
            if self.indexer is not None:
                self.indexer.close()
            with self._read_lock:
                self.projections.close()
        finally:
            try:
                if self._owned_provider is not None:
                    closer = getattr(self._owned_provider, "close", None)
                    if callable(closer):
                        closer()
            finally:
                self.factory.close()

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
