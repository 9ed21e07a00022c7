"""``MemoryEngine``: one store (a ledger + this process's DuckDB projections).

Layout of a store folder::

    <store>/ledger/                     LMDB environment (the source of truth), unless the
                                        ledger is on PostgreSQL (``ledger="postgresql://..."``)
    <store>/projections/slot-N.duckdb   read models owned by one process at a time
                                        (disposable: rebuilt from the ledger at will)

The ledger is opened the ``eventsourcing`` way, with settings passed as ``env=`` (never
process-wide environment variables): ``PERSISTENCE_MODULE=memory_ledger.ledger.lmdb`` with
``LMDB_PATH``, or ``memory_ledger.ledger.postgres`` with the ``POSTGRES_*`` settings of the
ledger URL; ``MAPPER_TOPIC`` names the msgspec mapper. With a PostgreSQL ledger several hosts
share one ledger and each keeps its own projections in its own store folder.

No side effects on the host process: opening a store reads no ``memory-ledger.toml``
unless given one (``config=PATH``), sets no environment variable and leaves the garbage
collector alone.

Read-only stores: a store this process cannot write (a read-only folder or mount; an
auditor without write access) is opened read-only when ``create=False`` (or with
``read_only=True``): the ledger with LMDB's ``MDB_RDONLY`` (and no lock file when even
``lock.mdb`` is not writable), the read models in the store's projection folder when it
can be written, otherwise in a temporary file removed on close. Audits work; commands
raise :class:`~memory_ledger.ledger.errors.LedgerReadOnlyError`.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, cast
from uuid import UUID

from eventsourcing.dcb.api import DCBAppendCondition
from eventsourcing.persistence import (
    ApplicationRecorder,
    InfrastructureFactory,
    Mapper,
)

from memory_ledger.commands.canonical.boundary import DECISION_DEADLINE_SECONDS
from memory_ledger.commands.canonical.word_targets import (
    correction_match,
    description_target,
    holds_every_word,
)
from memory_ledger.commands.config import MemoryConfig, load_config, load_config_from
from memory_ledger.commands.engine.commands import EngineCommands
from memory_ledger.commands.engine.encryption import check_erasures, record_erasures
from memory_ledger.commands.engine.follower import Follower
from memory_ledger.commands.engine.opening import check_store_path, open_store_parts
from memory_ledger.commands.engine.reads import EngineReads, EventDecoder, RawRecord, ReadModels
from memory_ledger.commands.engine.vectors import EngineVectors
from memory_ledger.commands.errors import (
    EngineClosedError,
    MemoryLedgerError,
    StoreUnavailableError,
    UnknownMemoryError,
)
from memory_ledger.commands.recall.fusion import fusion_for
from memory_ledger.commands.recall.index import (
    DEFAULT_FUSION,
    HybridFusion,
    MemoryDoc,
    NamespaceRecallIndex,
    RecallResult,
)
from memory_ledger.commands.recall.lexical import ConversationWindows, SourceTranscripts
from memory_ledger.commands.recall.policy import (
    DEFAULT_RECALL_POLICY,
    RecallPolicy,
    annotate_relations,
    check_recall_k,
)
from memory_ledger.commands.recall.ranking import rank_candidates
from memory_ledger.commands.recall.semantic_status import OFF, SemanticStatus
from memory_ledger.commands.telemetry.options import Telemetry
from memory_ledger.commands.telemetry.spans import catching_up, traced, traced_method
from memory_ledger.ledger.arguments import check_count
from memory_ledger.ledger.digests import IdDigests
from memory_ledger.ledger.errors import InvalidArgumentTypeError
from memory_ledger.ledger.events import ExtractedItem, LedgerEvent
from memory_ledger.ledger.ids import (
    Namespace,
    check_namespace,
    check_session_id,
)
from memory_ledger.ledger.key_store import FileKeyStore
from memory_ledger.ledger.keyring import Keyring
from memory_ledger.ledger.master_key import MasterKeySpec
from memory_ledger.ledger.tags import TaggedRecorder, event_tags
from memory_ledger.projections.canonical import CanonicalMemory
from memory_ledger.projections.memory_map import render_memory_map
from memory_ledger.projections.runner import ProjectionRunner
from memory_ledger.projections.serving.state import ServingState
from memory_ledger.projections.store import ProjectionStore
from memory_ledger.projections.tokens import TokenCounter, estimate_tokens

if TYPE_CHECKING:
    # Imported where used: a lexical recall (the CLI's) needs neither the semantic channel
    # (numpy) nor sessions and secret scanning (detect_secrets).
    from memory_ledger.commands.context.compaction import CompactionPolicy
    from memory_ledger.commands.context.knowledge_context import BoundKnowledge
    from memory_ledger.commands.context.summarizers import Summarizer
    from memory_ledger.commands.embeddings.base import EmbeddingProvider
    from memory_ledger.commands.extraction.base import Extractor
    from memory_ledger.commands.recall.semantic import EmbeddingIndexer, SemanticChannel
    from memory_ledger.commands.recall.vector_block import StoredVectorBlock
    from memory_ledger.commands.session.memory_session import MemorySession, WorkspaceOptions
    from memory_ledger.commands.store import MemoryStore
    from memory_ledger.projections.derived import ErasedNamespaces

__all__ = ["EventDecoder", "MemoryEngine", "RawRecord", "ReadModels", "check_engine"]


def recall_index_path(projection_file: Path) -> Path:
    """The persisted recall index beside a projection file (``slot-N.recall``)."""
    return projection_file.with_suffix(".recall")


def check_engine(engine: object, parameter: str = "engine") -> MemoryEngine:
    """``engine`` if it is an open :class:`MemoryEngine` (audit functions take the engine,
    not a path: ``with memory_ledger.open(path, create=False) as engine: ...``).

    :raises InvalidArgumentTypeError: anything else, e.g. a path (``"not_an_engine"``).
    """
    if not isinstance(engine, MemoryEngine):
        msg = (
            f"{parameter} must be an open MemoryEngine (memory_ledger.open(path)), "
            f"got {type(engine).__name__}"
        )
        raise InvalidArgumentTypeError(msg, parameter=parameter, reason_code="not_an_engine")
    return engine


class MemoryEngine(EngineCommands, EngineVectors, EngineReads):
    """An open memory store. Create with :meth:`open`; use as a context manager.

    Commands append through :meth:`append` (one LMDB write transaction per call, durable on
    return); reads catch the projections up to the ledger head first (read-your-writes).

    Other modules use its methods only: the ones here, and the ledger and read-model reads
    of its base :class:`~memory_ledger.commands.engine.reads.EngineReads`
    (``read_models``, ``read_records``, ...). The collaborators it holds (``factory``,
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
        *,
        token_counter: TokenCounter | None = None,
        read_only: bool = False,
        source_vectors: bool = True,
    ) -> None:
        self.path = path
        self.config = config or MemoryConfig()
        self.token_counter: TokenCounter = token_counter or estimate_tokens
        """Estimates the tokens of a text: the memory map's budget, admissions' sizes and
        (through :meth:`session`) context assembly use this one function."""
        self.read_only = read_only
        """The store is open read-only (audits only; commands raise)."""
        self.appended = 0
        """Events this engine object has appended (not counting other processes)."""
        self.ledger_name = str(path / "ledger")
        """Where the ledger is: the LMDB folder, or the PostgreSQL URL without password."""
        self._ledger_secret = ""
        self.follower: Follower | None = None
        """The background follower (see :meth:`follow`), or None."""
        self.telemetry = Telemetry(store_id=self._store_id)
        """What this engine's OpenTelemetry spans and metrics record (docs/observability.md):
        set ``telemetry.content``, ``telemetry.namespace_key``, ``telemetry.enabled``."""
        self.factory = factory
        self.recorder = recorder
        if not isinstance(recorder, TaggedRecorder):
            msg = f"{type(recorder).__name__} cannot record tags and append conditions"
            raise StoreUnavailableError(msg)
        self.tagged_recorder: TaggedRecorder = recorder
        """The recorder as the consistency boundary uses it (tags, conditions, tagged reads)."""
        self.consistency_boundary = True
        """Append decisions with their append condition (commands/canonical/boundary.py). False
        only to measure its cost (``python -m benchmarks engine``): decisions are then
        unguarded."""
        self.decision_deadline = DECISION_DEADLINE_SECONDS
        """Seconds a decision is re-read and re-decided after conflicts (jittered back-off)
        before :class:`ConcurrencyConflictError`
        (``commands.canonical.boundary.append_decision``)."""
        self.decision_conflicts = 0
        """How many decisions were refused by a conflict and re-decided (a figure)."""
        self.mapper = mapper
        self.projections = projections
        self._read_lock = projections.lock
        self.runner = ProjectionRunner(projections, recorder, mapper)
        self.runner.on_erasure.append(self._drop_erased_read_models)
        self.keyring: Keyring = getattr(mapper, "keyring", None) or Keyring(
            FileKeyStore(path / "keys", read_only=True), None, read_only=True
        )
        """Data keys of encryption at rest (``ledger.keyring``); without a master key it
        encrypts nothing and reads sealed payloads of erased keys as erased."""
        self.canonical = CanonicalMemory(projections.conn, self._read_lock, projections.guard)
        projections.on_reconnect.append(self._take_connection)
        self.transcripts = SourceTranscripts(recorder, mapper)
        self.serving = ServingState(self.keyring.namespace_id)
        """The serving read models (``projections.serving``): what recall, get, search and
        list read, applied by :meth:`append` to its own events and tailed from the ledger
        for other processes' (see docs/design.md, "Serving read models")."""
        self.recall_index = NamespaceRecallIndex(
            self.serving,
            self.serving.changed_at,
            self.transcripts,
            ConversationWindows(self.transcripts, self.serving.session_turns),
        )
        if projections.path != ":memory:":
            from memory_ledger.commands.recall.index_file import RecallIndexFile, fingerprint

            self.recall_index.attach(
                RecallIndexFile(
                    recall_index_path(Path(projections.path)),
                    fingerprint(self.recall_index.windowed),
                    recorder.max_notification_id() or 0,
                    erased=projections.erased,
                ),
                projections.erased.is_erased,
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
            from memory_ledger.commands.recall.semantic import EmbeddingIndexer, SemanticChannel

            self.semantic = SemanticChannel(
                embeddings,
                self.canonical,
                self.runner.changed_at,
                lambda: self.runner.position,
                source_of=self.transcripts if source_vectors else None,
                serving=self.serving,
            )
            self.semantic.stored_vectors = self.recall_index.stored_vectors
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
        ledger: str | None = None,
        sync: bool = True,
        map_size: int | None = None,
        config: MemoryConfig | str | os.PathLike[str] | None = None,
        create: bool = True,
        embeddings: EmbeddingProvider | None = None,
        index_in_background: bool = True,
        read_only: bool | None = None,
        token_counter: TokenCounter | None = None,
        source_vectors: bool = True,
        follow: bool | None = None,
        master_key: MasterKeySpec | None = None,
    ) -> MemoryEngine:
        """Open (or create) the store folder ``path``.

        :param path: the store folder. None only with ``config`` given: its ``store_dir``
            (a relative one in a TOML file is relative to that file's folder). There is no
            implicit default folder, and ``""`` is refused: neither ever creates the store's
            ``ledger/`` and ``projections/`` in the current directory unasked.

        :param ledger: where the ledger is: None or ``""`` for the LMDB ledger inside the
            store folder (default: ``config.ledger``), or a ``postgresql://`` URL (see
            :class:`memory_ledger.ledger.postgres.PostgresLedgerURL`); the store folder then
            holds only this host's projection files. The password comes from the URL, the
            variable its ``password_env`` names, or ``PGPASSWORD``, and is never shown.

        :param embeddings: attach a semantic channel (hybrid recall): vectors of canonical
            memories are computed by this provider in a background thread and kept in the
            ``memory_vectors`` read model. None (default): the provider ``config`` names
            (``[memory] embeddings``; its default ``"none"`` means lexical recall only).
        :param index_in_background: run that thread (False: call :meth:`index_vectors`).
        :param source_vectors: also embed the start of the transcript turn each memory was
            extracted from (its ``source`` vector; the better cosine counts). False embeds
            statements only: half the vectors, and on LoCoMo the same fused Recall@5
            (``python -m benchmarks locomo``: 0.688 vs 0.687 with MiniLM).
        :param follow: keep the projections following the ledger in a background thread,
            woken by other hosts' appends
            (:class:`~memory_ledger.commands.engine.follower.Follower`);
            default: on for a PostgreSQL ledger opened with ``create=True``.
        :param sync: fsync every command before it returns (LMDB_SYNC).
        :param map_size: initial LMDB map size in bytes (it grows when full).
        :param config: runtime configuration: a :class:`MemoryConfig`, or the path of a
            ``memory-ledger.toml`` to load. Default: the built-in defaults; the library never
            reads a ``memory-ledger.toml`` from the current directory on its own (the CLI
            does, and says so).
        :param create: create the store when absent; with False a missing store is an error
            (read-only tools such as ``memory-ledger recall`` use this).
        :param read_only: open the store read-only (it must exist): audits work, commands
            raise ``LedgerReadOnlyError``. None (default): read-only exactly when
            ``create`` is False and this process cannot write the store's ledger.
        :param token_counter: ``text -> estimated tokens`` used by the memory map, admissions
            and sessions' context assembly (default: :func:`projections.tokens.estimate_tokens`).
        :param master_key: encryption at rest (``commands.engine.encryption``): a 32-byte key file
            path, 32 bytes, a callable returning them, or a ``KeyWrapper`` (a KMS). Default:
            ``config.master_key_file``, else the file ``MEMORY_LEDGER_MASTER_KEY_FILE``
            names, else none: payloads stay in clear. Once a store was opened with a master
            key, it needs that key to open.
        :raises MasterKeyError: the store needs a master key and none or another is given,
            or the key file cannot be read; nothing was written.
        :raises StoreUnavailableError: the folder cannot be created or opened, or is missing
            with ``create=False``; names it (``reason_code`` of the cause when known).
        :raises ForeignStoreError: the folder holds another application's LMDB, an empty or a
            non-LMDB ``data.mdb``; names it and leaves it untouched.
        :raises LedgerUnavailableError: the PostgreSQL ledger cannot be reached (or, with
            ``create=False``, holds no ledger); names it without its password.
        :raises LedgerFormatError: the ledger was written by a newer version.
        :raises ConfigError: ``config`` is a path that cannot be read or is invalid.
        :raises InvalidArgumentError: ``map_size`` is not a positive integer; ``path`` is
            ``""`` (``reason_code`` ``"empty_path"``) or None without ``config``
            (``"path_required"``); nothing is created.
        :raises InvalidArgumentTypeError: ``path``, ``token_counter`` or ``embeddings`` is of
            the wrong kind (checked before anything is created).
        """
        check_store_path(path, configured=config is not None)
        if config is None:
            config = MemoryConfig()
        elif not isinstance(config, MemoryConfig):
            config = load_config(config)
        if map_size is not None:
            check_count("map_size", map_size)
        if token_counter is not None and not callable(token_counter):
            msg = f"token_counter must be a callable text -> int, got {token_counter!r}"
            raise InvalidArgumentTypeError(msg, parameter="token_counter")
        if path is not None and not isinstance(path, str | os.PathLike):
            msg = f"path must be a folder path (str or os.PathLike), got {type(path).__name__}"
            raise InvalidArgumentTypeError(msg, parameter="path", reason_code="not_a_path")
        if embeddings is not None and not (
            hasattr(embeddings, "descriptor") and callable(getattr(embeddings, "embed", None))
        ):
            msg = (
                "embeddings must be an embedding provider (an object with descriptor and "
                f"embed), got {type(embeddings).__name__}; to choose one by name, set "
                "MemoryConfig(embeddings='local') or [memory] embeddings in the config file"
            )
            raise InvalidArgumentTypeError(msg, parameter="embeddings")
        root = Path(path if path is not None else config.store_dir).absolute()
        url = ledger if ledger is not None else config.ledger
        parts = open_store_parts(
            root,
            url or None,
            config,
            sync=sync,
            map_size=map_size,
            create=create,
            read_only=read_only,
            master_key=master_key,
            embeddings=embeddings,
        )
        factory, recorder, projections, keyring = (
            parts.factory,
            parts.recorder,
            parts.projections,
            parts.keyring,
        )
        read_only, owned = parts.read_only, parts.owned_provider
        try:
            engine = cls(
                root,
                factory,
                recorder,
                parts.mapper,
                projections,
                config,
                embeddings=parts.embeddings,
                index_in_background=index_in_background,
                token_counter=token_counter,
                read_only=read_only,
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
        engine.ledger_name = parts.ledger_name
        engine._ledger_secret = parts.ledger_secret
        engine.keyring = keyring
        if not read_only and any(r.erase_command for r in keyring.records()):
            record_erasures(engine)  # an erasure interrupted after its commit point
        check_erasures(engine)  # no key the ledger says was destroyed is live
        if follow if follow is not None else bool(url) and create:
            engine.follow()
        return engine

    # Write side ---------------------------------------------------------------------------

    def append(
        self,
        events: Sequence[LedgerEvent],
        *,
        condition: DCBAppendCondition | None = None,
        cleared: Collection[ExtractedItem] = (),
        digests: IdDigests | None = None,
    ) -> list[int]:
        """Append ``events`` in ONE durable LMDB write transaction; return their positions.

        ``cleared``: items of ``events`` that the command's validation already put to the
        secret door's questions (:func:`~memory_ledger.commands.secret_door.check_events`,
        by identity); the door walks every other string. ``digests``: the call digests the
        decision of ``events`` derived its tags with (``DecisionReads.digests``); the events
        are tagged with them when the keyring, refreshed here, has not reloaded since they
        were made (``Keyring.still_current``: the same keys and id format), else with fresh
        ones.

        Each event is indexed under its tags (:func:`ledger.tags.event_tags`). With a
        ``condition`` (the consistency boundary of a decision, see
        :mod:`commands.canonical.boundary`)
        the batch is refused when an event matching it was appended after its position.

        :raises eventsourcing.persistence.IntegrityError: a stream version exists already
            (a concurrent writer), or the condition failed
            (:class:`ledger.tag_index.AppendConditionFailedError`); nothing of the batch is
            written.
        :raises SecretRefusedError: an event holds a secret-shaped value in any string field
            (:mod:`commands.secret_door`); nothing of the batch is written.
        :raises LedgerUnavailableError: the ledger server stayed unreachable; the batch is
            entirely written or not at all (retrying the command is safe).

        After the commit, before returning, the events are applied to the serving read
        models (:attr:`serving`, the inline projection; the positions of another process's
        appends before them are tailed first), so a read in this process right after
        waits for nothing.
        """
        from memory_ledger.commands.secret_door import check_events  # detect_secrets: on a write

        check_events(events, cleared)  # the one secret scan at the door: before any encoding
        to_stored_event = self.mapper.to_stored_event
        with self.ledger_guard():
            self.keyring.refresh()  # a key erased by another process is never used again
            stored = [to_stored_event(e) for e in events]
            if digests is None or not self.keyring.still_current(digests):
                digests = self.keyring.digests.for_call()  # one namespace tag for the batch
            tags = [event_tags(e, digests) for e in events]
            ids = list(self.recorder.insert_events(stored, tags=tags, condition=condition) or [])
            # Written: the records and tags go now, not after the inline apply, so the
            # collector's passes during it neither walk nor promote thousands of them.
            del stored, tags
        self.appended += len(ids)
        self._apply_inline(events, ids)
        if self.semantic is not None:  # the batch's vectors, served before the command returns
            self.semantic.embed_appended(events, ids)
        if self.indexer is not None:
            self.indexer.kick(scan=False)  # written behind, in one bulk statement
        return ids

    def _store_id(self) -> str:
        """The ledger's random store id (``gen_ai.memory.store.id`` of the spans)."""
        from memory_ledger.commands.engine.receipt import store_id_of

        with self.ledger_guard():
            return store_id_of(self.recorder)

    def load_stream(self, stream_id: UUID, *, after: int = 0) -> list[LedgerEvent]:
        """Events of one stream with version > ``after``, in version order."""
        with self.ledger_guard():
            stored = self.recorder.select_events(stream_id, gt=after if after else None)
        return [cast(LedgerEvent, self.mapper.to_domain_event(s)) for s in stored]

    @property
    def head(self) -> int:
        """The ledger's last position (0 when empty)."""
        with self.ledger_guard():
            return self.recorder.max_notification_id() or 0

    # Read side ----------------------------------------------------------------------------

    @property
    def erased_namespaces(self) -> ErasedNamespaces:
        """The store's erased namespaces as the one writer of derived files sees them
        (:class:`~memory_ledger.projections.derived.ErasedNamespaces`): what a file written
        outside the engine (an export, a rebuild) passes its rows through."""
        return self.projections.erased

    def scrub_erased_projections(self) -> int:
        """Delete from the projection file the rows of every namespace erased since its last
        scrub (an erasure by another process that catch-up has not reached yet); a file that
        lost rows is rewritten when closed. Returns how many rows went
        (:meth:`~memory_ledger.projections.store.ProjectionStore.scrub_erased`).

        :raises duckdb.Error: DuckDB cannot read or write the file (inside
            :meth:`projection_guard`: the projection error it becomes).
        """
        return self.projections.scrub_erased()

    def projection_guard(self) -> contextlib.AbstractContextManager[None]:
        """Translate DuckDB errors raised inside the block (the projection store's
        :meth:`~memory_ledger.projections.store.ProjectionStore.guard`).

        A DuckDB error that says the projection file is damaged (a short read, a bad
        checksum) becomes :class:`~memory_ledger.projections.errors.ProjectionDamagedError`
        (an ``OSError`` naming the file), after marking the file: the next open sets it
        aside and rebuilds the read models from the ledger. Any other DuckDB error becomes
        the :class:`~memory_ledger.projections.errors.ProjectionError` subclass of its
        DB-API class, naming the file. Other errors pass unchanged.
        """
        return self.projections.guard()

    def catch_up(self, to: int | None = None) -> int:
        """Bring the projections up to ``to`` (default: the ledger head); return position.

        Serialized per engine: the DuckDB connection is not shared between threads. When
        catch-up (or the open's scrub) deleted an erased namespace's rows, the projection
        file is rewritten before this returns (:meth:`ProjectionStore.rewrite_erased`), so
        no old DuckDB block keeps their bytes, whatever happens to this process next.
        """
        with catching_up(self, to), self._read_lock:
            with self.projection_guard(), self.ledger_guard():
                position = self.runner.catch_up(to)
                self.projections.rewrite_erased()
                return position

    def follow(self, poll_interval: float = 1.0) -> Follower:
        """Start (once) the background thread that keeps the projections following the
        ledger: woken by appends of any host (LISTEN/NOTIFY on PostgreSQL), polling every
        ``poll_interval`` seconds otherwise. Stopped by :meth:`close`."""
        if self.follower is None:
            self.follower = Follower(self.catch_up, self.recorder, poll_interval)
        return self.follower

    def recall(
        self,
        namespace: Namespace,
        query: str,
        k: int | None = None,
        *,
        policy: RecallPolicy | None = None,
    ) -> RecallResult:
        """Top ``k`` retrievable memories of ``namespace`` for ``query`` (:meth:`_recall`
        says how, and what it raises), in a ``search_memory`` span (docs/observability.md).
        """
        with traced(self, "recall", namespace, text=query) as span:
            return span.result(self._recall(namespace, query, k, policy=policy))

    def _recall(
        self,
        namespace: Namespace,
        query: str,
        k: int | None = None,
        *,
        policy: RecallPolicy | None = None,
    ) -> RecallResult:
        """Top ``k`` retrievable memories of ``namespace`` for ``query``, read-your-writes.

        Lexical BM25 (:mod:`commands.recall.lexical`) alone, or, with a semantic channel attached,
        fused with exact cosine over the namespace's verified vectors (:attr:`fusion`).
        ``RecallResult.semantic`` reports the channel's state and coverage; a query that
        cannot be embedded degrades to lexical recall, never to an error.

        :param k: how many results (default: the policy's ``limit``), at most
            ``config.recall_max_k`` (:func:`~commands.recall.policy.check_recall_k`, shared
            with session recall, the CLI and the MCP server; :meth:`AsyncMemoryEngine.recall`
            passes here too).
        :param policy: the recall policy for this call (default :attr:`recall_policy`):
            result bound, minimum lexical score and one-hop relation reads; relations are
            returned in ``RecallHit.related``.
        :raises InvalidArgumentError: (a ``ValueError``) ``query`` is not a string, or ``k``
            is not an integer of at least 1; ``parameter`` names it.
        :raises RecallLimitError: ``k`` (or, without one, the policy's ``limit``) is above
            ``config.recall_max_k`` (``k_too_large``); nothing is read.
        :raises InvalidNamespaceError: the namespace is invalid.
        """
        check_namespace(namespace)
        if not isinstance(query, str):
            msg = f"query must be a string, got {type(query).__name__}"
            raise InvalidArgumentTypeError(msg, parameter="query", reason_code="not_a_string")
        policy = self.recall_policy if policy is None else policy
        if k is None:
            k = check_recall_k(policy.limit, self.config.recall_max_k, parameter="limit")
        k = check_recall_k(k, self.config.recall_max_k)
        ranked, status, position = self.canonical_candidates(
            namespace, query, k, min_lexical_score=policy.min_lexical_score
        )
        hits = [doc.hit(rank, score) for rank, (doc, score) in enumerate(ranked, 1)]
        if policy.related_lookups and hits:
            pairs = [(doc, hit) for (doc, _), hit in zip(ranked, hits, strict=True)]
            hits = annotate_relations(self.serving, namespace, pairs, policy.related_lookups)
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
        matches scoring below it are dropped before fusion (:class:`RecallPolicy`). When
        the query names a calendar day or month (:func:`commands.recall.temporal.query_dates`),
        fused scores of memories that occurred near it gain the fusion's
        ``temporal_boost`` (:meth:`HybridFusion.boost_dated`).
        """
        channel = self.semantic if semantic else None
        vector, status = (None, OFF)
        if channel is not None:
            vector, status = channel.embed_query(query)
        # The semantic channel verifies its vectors and counts coverage against the serving
        # state (the documents this recall ranks): no recall waits for DuckDB, which is
        # caught up behind. Only a namespace's first semantic read takes the projection lock
        # (its vector rows come from DuckDB; the lock order of commands/engine/serving.py).
        with self.serving.lock, self.projection_guard():
            position = self._serve()
            index, by_id = self.recall_index.docs(namespace, position)
            scores = None
            if channel is not None and vector is not None:
                scores = _ChannelScores(channel, namespace, vector, by_id, self.fusion.fields)
            ranked = rank_candidates(
                query,
                depth,
                index,
                by_id,
                self.fusion,
                semantic=scores,
                min_lexical_score=min_lexical_score,
            )
            if channel is not None:
                coverage = channel.status(namespace, len(by_id))
                status = SemanticStatus(
                    state="degraded" if status.state == "degraded" else coverage.state,
                    model=coverage.model,
                    retrievable=coverage.retrievable,
                    embedded=coverage.embedded,
                    reason=status.reason if status.state == "degraded" else coverage.reason,
                    query_embedding_ms=status.query_embedding_ms,
                )
        return ranked, status, position

    def retrievable_memory(self, namespace: Namespace, memory: UUID | str) -> MemoryDoc | None:
        """The retrievable canonical memory ``memory`` of ``namespace`` (the serving state
        at the ledger head), or None. A memory of another namespace is None, exactly like an
        id that does not exist: callers cannot tell the two apart (the namespace comes from
        the host).
        """
        check_namespace(namespace)
        with self.serving.lock:
            position = self._serve()
            _, by_id = self.recall_index.docs(namespace, position)
            return by_id.get(str(memory))

    def best_match(self, namespace: Namespace, text: str) -> MemoryDoc | None:
        """The retrievable memory of ``namespace`` that a ``forget`` or ``pin`` naming it by
        ``text`` targets (the description rule of
        :mod:`~memory_ledger.commands.canonical.word_targets`: the one memory holding every
        content word of ``text``), or None when the words name none or several. Lexical on
        purpose: a nearest vector always exists, a matching word may not."""
        ranked, _, _ = self.canonical_candidates(namespace, text, 10, semantic=False)
        try:
            return description_target(text, [doc for doc, _ in ranked])
        except UnknownMemoryError:
            return None

    def named_memories(
        self, namespace: Namespace, text: str, depth: int = 10, *, strict: bool = False
    ) -> list[MemoryDoc]:
        """The retrievable memories of ``namespace`` that ``text`` names (best BM25 first,
        at most ``depth``), by the rules of
        :mod:`~memory_ledger.commands.canonical.word_targets`: each one holding every
        content word of ``text``, or with ``strict`` each one ``text`` corrects (the same
        subject and attribute, another value). Lexical on purpose."""
        ranked, _, _ = self.canonical_candidates(namespace, text, depth, semantic=False)
        docs = [doc for doc, _ in ranked]
        if strict:
            return [doc for doc in docs if correction_match(text, doc) == "same"]
        return [doc for doc in docs if holds_every_word(text, doc)]

    @traced_method("memory_map", lambda self, namespace, *_: (self, namespace))
    def memory_map(self, namespace: Namespace, *, token_counter: TokenCounter | None = None) -> str:
        """The vocabulary map of ``namespace`` from the serving state at the ledger head
        (recomputed only when the state moved),
        within its token budget as ``token_counter`` (default: the engine's) counts.

        :raises InvalidNamespaceError: the namespace is invalid.
        """
        check_namespace(namespace)
        counter = token_counter or self.token_counter
        with self.serving.lock:
            position = self._serve()
            key = namespace.key() if counter is self.token_counter else None
            cached = self._memory_maps.get(key) if key is not None else None
            if cached is None or cached[0] != position:
                text = render_memory_map(
                    self.serving,
                    namespace.tenant,
                    namespace.principal,
                    namespace.scope_id,
                    token_counter=counter,
                )
                if key is None:
                    return text
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
        token_counter: TokenCounter | None = None,
        knowledge: BoundKnowledge | None = None,
        workspace: WorkspaceOptions | None = None,
        summarizer: Summarizer | None = None,
        compaction: CompactionPolicy | None = None,
        **overrides: Any,
    ) -> MemorySession:
        """Open (or resume) the session ``session_id`` under ``namespace``.

        Appends SessionOpened the first time. ``extractor`` defaults to a
        :class:`RecordedExtractor` (items given per turn). ``config`` defaults to the
        engine's; keyword ``overrides`` replace single keys (e.g. ``activation_policy=
        "manual"``, ``llm_extraction_max_items=3``). ``token_counter`` (default: the
        engine's) sizes the session's admissions, memory map and context assembly
        (``session.token_counter``, to give a ``ContextAssembler``). ``knowledge`` binds the
        session to an exact knowledge package generation (recorded as KnowledgeBound when it
        starts); ``workspace`` gives it workspace retrieval (off without); ``summarizer``
        and ``compaction`` set up :meth:`MemorySession.compact` (off by default).

        :raises ConfigError: an override is invalid.
        :raises InvalidNamespaceError: the namespace or ``session_id`` is invalid (empty, over
            256 UTF-8 bytes, or holding a control, bidi-override or tag character).
        :raises InvalidArgumentTypeError: ``token_counter`` is not callable.
        :raises KnowledgeBindingError: the binding is refused (see ``MemorySession``).
        :raises WorkspaceError: the workspace root is not a readable folder.
        """
        from memory_ledger.commands.extraction.base import RecordedExtractor
        from memory_ledger.commands.secret_door import check_identifiers  # detect_secrets
        from memory_ledger.commands.session.memory_session import MemorySession

        check_namespace(namespace)
        check_session_id(session_id)
        if token_counter is not None and not callable(token_counter):
            msg = f"token_counter must be a callable text -> int, got {token_counter!r}"
            raise InvalidArgumentTypeError(msg, parameter="token_counter")
        check_identifiers(
            (
                ("tenant", namespace.tenant),
                ("principal", namespace.principal),
                ("scope_id", namespace.scope_id),
                ("session_id", session_id),
            ),
            "identifiers are stored in every event",
        )
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
            token_counter=token_counter or self.token_counter,
            knowledge=knowledge,
            workspace=workspace,
            summarizer=summarizer,
            compaction=compaction,
        )

    def close(self) -> None:
        """Stop the embedding indexer, catch the DuckDB read models up to the ledger head,
        close the projection file and release the ledger.

        The projection file is closed under the projection lock (an indexer batch still in
        flight after the indexer's 10 s grace finishes first); the ledger is released even
        when closing the projection file fails. A provider built from the configuration is
        closed too (one passed in belongs to the caller).
        """
        try:
            if self.follower is not None:
                self.follower.close()
            if self.indexer is not None:
                self.indexer.close()
            with contextlib.suppress(MemoryLedgerError):  # left behind: caught up when next used
                self.catch_up()  # the DuckDB read models, caught up behind the serving state

            semantic = self.semantic

            def persist() -> None:
                # At the head first: an erasure another process made since this engine last
                # read drops the erased namespaces' documents before the file is written.
                with contextlib.suppress(MemoryLedgerError):
                    self._serve()
                vectors = None
                if semantic is not None:

                    def vectors() -> dict[str, dict[str, StoredVectorBlock]]:
                        return {semantic.model_key: semantic.persisted_vectors()}

                changed = semantic is not None and (
                    semantic.served.changed or semantic.served.index_unsaved
                )
                with contextlib.suppress(OSError):  # a folder it cannot write: rebuilt
                    self.recall_index.persist(
                        self.serving.position, self.serving, vectors, vectors_changed=changed
                    )

            with self.serving.lock, self._read_lock:  # the lock order of engine/serving.py
                # The recall index is written while the slot is held, before the slot's
                # files are scrubbed of namespaces erased meanwhile (projections/derived.py).
                self.projections.close(before=persist)
        finally:
            try:
                if self._owned_provider is not None:
                    closer = getattr(self._owned_provider, "close", None)
                    if callable(closer):
                        closer()
            finally:
                try:
                    self.factory.close()
                finally:
                    # From now on every public attribute raises EngineClosedError (one
                    # check, costing nothing while the engine is open).
                    self.__class__ = _ClosedMemoryEngine

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (then every other public attribute raises
        :class:`~memory_ledger.commands.errors.EngineClosedError`)."""
        return False

    def __enter__(self) -> MemoryEngine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


_USABLE_AFTER_CLOSE = frozenset({"close", "closed", "path"})


class _ClosedMemoryEngine(MemoryEngine):
    """What a :class:`MemoryEngine` becomes on :meth:`~MemoryEngine.close`: its public
    methods and properties (and so its sessions' calls) raise
    :class:`~memory_ledger.commands.errors.EngineClosedError`; ``close`` is a no-op."""

    def __getattribute__(self, name: str) -> Any:
        if name.startswith("_") or name in _USABLE_AFTER_CLOSE:
            return object.__getattribute__(self, name)
        path = object.__getattribute__(self, "path")
        msg = (
            f"the memory engine of {str(path)!r} is closed (engine.{name} after close()); "
            "open the store again"
        )
        raise EngineClosedError(msg)

    def close(self) -> None:
        """Nothing to do: the engine is closed."""

    @property
    def closed(self) -> bool:
        """True: the engine is closed."""
        return True


def _is_a_memory_store(engine: MemoryEngine) -> MemoryStore:
    """The static pin of issue 26: mypy checks here that ``MemoryEngine`` satisfies the
    :class:`~memory_ledger.commands.store.MemoryStore` Protocol the lower wings type
    against (a member renamed or retyped on one side fails the type check)."""
    return engine


class _ChannelScores:
    """The semantic channel's scores for one query vector, as the ranking pipeline asks
    for them (:class:`~memory_ledger.commands.recall.ranking.SemanticScores`)."""

    def __init__(
        self,
        channel: SemanticChannel,
        namespace: Namespace,
        vector: Any,
        by_id: Mapping[str, MemoryDoc],
        fields: Sequence[str] | None,
    ) -> None:
        self._channel, self._namespace, self._vector = channel, namespace, vector
        self._by_id, self._fields = by_id, fields

    def nearest(self, depth: int) -> list[tuple[str, float]]:
        return self._channel.search(self._namespace, self._vector, self._by_id, depth, self._fields)

    def cosines(self, memory_ids: Sequence[str]) -> dict[str, float]:
        return self._channel.cosines(
            self._namespace, self._vector, self._by_id, memory_ids, self._fields
        )
