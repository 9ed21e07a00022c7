"""``AsyncMemoryEngine``: the memory store for asyncio hosts (FastAPI, LangGraph, agent SDKs).

It wraps a blocking :class:`~memory_ledger.commands.MemoryEngine`: every coroutine is the
blocking method of the same name, with the same parameters and defaults, run on the
engine's one worker thread (:class:`~memory_ledger.commands.aio.worker.EngineWorker`);
``tests/aio/test_api_parity.py`` checks every public method of the blocking engine has its
twin here (the few that cannot, listed there with the reason, are used inside :meth:`run`).
One thread per engine keeps DuckDB's one-connection rule and runs calls in the order they
were awaited; the loop never waits on LMDB or DuckDB. Usage::

    async with AsyncMemoryEngine.open("./store") as mem:
        await mem.remember(ns, "Alice only drinks espresso.")
        hits = await mem.recall(ns, "what does Alice drink?")

Cancellation: a cancelled coroutine never leaves half a command. A call still queued when
its coroutine is cancelled never runs; a call already running finishes (one durable
transaction per command, a direct command also reconciled) before ``CancelledError``
reaches the caller, so after the cancel the ledger holds the whole command or none of it.

HTTP clients: an extractor or embedding provider that also has a coroutine form
(``aextract`` / ``aembed``: the shipped OpenAI-compatible ones) does its HTTP on this
event loop with ``httpx.AsyncClient`` (:mod:`memory_ledger.commands.aio.loop_bridge`); background
extraction and vector indexing keep running on their own threads and reach the loop the same
way while it runs.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Generator, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, ParamSpec, TypeVar
from uuid import UUID

from memory_ledger.commands.aio.direct import AsyncDirectCommands
from memory_ledger.commands.aio.loop_bridge import bridge_embeddings, bridge_extractor
from memory_ledger.commands.aio.reads import AsyncEngineReads
from memory_ledger.commands.aio.records import AsyncEngineRecords
from memory_ledger.commands.aio.session import AsyncMemorySession
from memory_ledger.commands.aio.worker import EngineWorker
from memory_ledger.commands.config import MemoryConfig
from memory_ledger.commands.embeddings.base import EmbeddingProvider
from memory_ledger.commands.embeddings.config import provider_from_config
from memory_ledger.commands.engine.batch import BATCH_SESSION_PREFIX, BatchOp, BatchResult, Remember
from memory_ledger.commands.engine.direct import DirectCommands, DirectResult
from memory_ledger.commands.engine.encryption import ErasureReport
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.commands.engine.receipt import SigningKeySpec
from memory_ledger.commands.extraction.base import Extractor
from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.master_key import MasterKeySpec
from memory_ledger.projections.tokens import TokenCounter

if TYPE_CHECKING:
    from memory_ledger.commands.context.compaction import CompactionPolicy
    from memory_ledger.commands.context.knowledge_context import BoundKnowledge
    from memory_ledger.commands.context.summarizers import Summarizer
    from memory_ledger.commands.session.memory_session import WorkspaceOptions

__all__ = ["AsyncEngineOpener", "AsyncMemoryEngine"]

P = ParamSpec("P")
T = TypeVar("T")


class AsyncMemoryEngine(AsyncEngineReads, AsyncEngineRecords):
    """An open memory store driven from coroutines. Create with :meth:`open`.

    ``engine`` is the blocking :class:`~memory_ledger.commands.MemoryEngine` underneath:
    read its plain attributes (``path``, ``config``) freely, but call its methods through
    :meth:`run` (the worker thread), never on the event loop. Commands, sessions and the
    lifecycle are here; memory reads in
    :class:`~memory_ledger.commands.aio.reads.AsyncEngineReads`, the ledger side in
    :class:`~memory_ledger.commands.aio.records.AsyncEngineRecords`.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        worker: EngineWorker,
        *,
        owned_provider: EmbeddingProvider | None = None,
    ) -> None:
        self.engine = engine
        self._worker = worker
        self._owned_provider = owned_provider
        self._closed = False

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
    ) -> AsyncEngineOpener:
        """Open (or create) the store in folder ``path``: ``await`` the result, or use it as
        ``async with``. The parameters are :meth:`MemoryEngine.open`'s, with its defaults;
        the blocking open (LMDB, DuckDB, an embedding model) runs on the worker thread.

        An ``embeddings`` provider with ``aembed`` (or, with a :class:`MemoryConfig` given
        and no provider, the one the configuration names) embeds over
        ``httpx.AsyncClient`` on this loop.

        :raises MemoryLedgerError: (when awaited) the store cannot be opened, as
            :meth:`MemoryEngine.open` lists.
        """
        options: dict[str, Any] = {
            "ledger": ledger,
            "sync": sync,
            "map_size": map_size,
            "config": config,
            "create": create,
            "embeddings": embeddings,
            "index_in_background": index_in_background,
            "read_only": read_only,
            "token_counter": token_counter,
            "source_vectors": source_vectors,
            "follow": follow,
            "master_key": master_key,
        }
        return AsyncEngineOpener(cls, path, options)

    # The generic way in ------------------------------------------------------------------

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """Run any blocking call on this engine's worker thread, e.g.
        ``await mem.run(replay.explain, mem.engine, memory_id)``; same cancellation rule as
        every other method.

        :raises StoreUnavailableError: the engine is closed.
        """
        return await self._worker.run(fn, *args, **kwargs)

    # Direct commands -----------------------------------------------------------------------

    async def remember(
        self,
        namespace: Namespace,
        statement: str,
        *,
        subject: str | None = None,
        predicate: str | None = None,
        value: str | None = None,
        tags: Sequence[str] = (),
        occurred_at: datetime | None = None,
    ) -> DirectResult:
        """Store ``statement`` as canonical memory, durable and reconciled on return
        (:meth:`MemoryEngine.remember`; ``occurred_at``: when it was said, its valid time).

        :raises CommandRejectedError: empty statement, a secret-shaped value, an invalid item.
        :raises InvalidNamespaceError: an invalid namespace.
        """
        return await self._worker.run(
            self.engine.remember,
            namespace,
            statement,
            subject=subject,
            predicate=predicate,
            value=value,
            tags=tags,
            occurred_at=occurred_at,
        )

    async def apply_batch(
        self,
        namespace: Namespace,
        ops: Iterable[BatchOp | str],
        *,
        session_prefix: str = BATCH_SESSION_PREFIX,
        vacant: Iterable[tuple[str, str]] = (),
    ) -> BatchResult:
        """Write ``ops`` as ONE command, durable and reconciled on return; ``session_prefix``
        names the caller in the batch's session id, ``vacant`` the keys that must hold
        nothing (:meth:`MemoryEngine.apply_batch`, whose errors it raises). ``ops`` and
        ``vacant`` are read into lists here, before the call is queued.
        """
        return await self._worker.run(
            self.engine.apply_batch,
            namespace,
            list(ops),
            session_prefix=session_prefix,
            vacant=list(vacant),
        )

    async def remember_many(
        self, namespace: Namespace, items: Iterable[Remember | str]
    ) -> BatchResult:
        """Remember every item as ONE command (:meth:`MemoryEngine.remember_many`)."""
        return await self._worker.run(self.engine.remember_many, namespace, list(items))

    async def forget(self, namespace: Namespace, statement_or_id: str | UUID) -> DirectResult:
        """Forget one memory by id or by its words (:meth:`MemoryEngine.forget`).

        :raises UnknownMemoryError: no retrievable memory of this namespace matches.
        """
        return await self._worker.run(self.engine.forget, namespace, statement_or_id)

    async def correct(
        self,
        namespace: Namespace,
        statement: str,
        *,
        target: str | UUID | None = None,
        subject: str | None = None,
        occurred_at: datetime | None = None,
    ) -> DirectResult:
        """Supersede the memory ``target`` (or the one ``statement`` corrects: the same
        subject and attribute, ``subject`` deciding whose) with ``statement``
        (:meth:`MemoryEngine.correct`; ``occurred_at``: when it was said, its valid time).

        :raises UnknownMemoryError: ``target`` names no retrievable memory of this namespace,
            or the words name none clearly (``no_clear_target``) or several
            (``ambiguous_match``).
        """
        return await self._worker.run(
            self.engine.correct,
            namespace,
            statement,
            target=target,
            subject=subject,
            occurred_at=occurred_at,
        )

    async def pin(self, namespace: Namespace, statement_or_id: str | UUID) -> DirectResult:
        """Pin one memory by id or by its words (:meth:`MemoryEngine.pin`).

        :raises UnknownMemoryError: no retrievable memory of this namespace matches.
        """
        return await self._worker.run(self.engine.pin, namespace, statement_or_id)

    async def forget_all(self, namespace: Namespace) -> int:
        """Forget every retrievable memory of exactly ``namespace`` in one command, durable
        on return; how many (:meth:`MemoryEngine.forget_all`: 0 writes nothing).

        :raises InvalidNamespaceError: a namespace part is missing or empty.
        :raises ConcurrencyConflictError: concurrent commands kept overtaking it.
        """
        return await self._worker.run(self.engine.forget_all, namespace)

    async def erase(
        self,
        tenant: str,
        principal: str | None = None,
        scope_id: str | None = None,
        *,
        requested_by: str = "",
        signing_key: SigningKeySpec | None = None,
    ) -> ErasureReport:
        """Erase a tenant's, a principal's or one namespace's memories by destroying their
        data keys (:meth:`MemoryEngine.erase`); with ``signing_key``, the report holds the
        signed erasure receipt.

        :raises EncryptionNotConfiguredError: the store keeps payloads in clear.
        :raises SigningKeyError: ``signing_key`` is not an Ed25519 private key.
        """
        return await self._worker.run(
            self.engine.erase,
            tenant,
            principal,
            scope_id,
            requested_by=requested_by,
            signing_key=signing_key,
        )

    async def rotate_master_key(self, new_master_key: MasterKeySpec) -> int:
        """Re-wrap every live data key under a new master key
        (:meth:`MemoryEngine.rotate_master_key`); how many keys."""
        return await self._worker.run(self.engine.rotate_master_key, new_master_key)

    async def remove_idle_projections(self) -> int:
        """Delete this host's projection files no process holds (after an erasure); how
        many are held by running processes (:meth:`MemoryEngine.remove_idle_projections`)."""
        return await self._worker.run(self.engine.remove_idle_projections)

    def direct(self, session_prefix: str) -> AsyncDirectCommands:
        """Direct commands whose sessions are named ``<session_prefix><hex>`` (e.g.
        ``mcp-<client>-``), so the ledger shows who issued each one.

        :raises InvalidNamespaceError: (a ``ValueError``) an empty or invalid prefix.
        """
        commands = DirectCommands(self.engine, session_prefix)
        return AsyncDirectCommands(self.engine, self._worker, commands)

    # Sessions ------------------------------------------------------------------------------

    async def session(
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
    ) -> AsyncMemorySession:
        """Open (or resume) a session (:meth:`MemoryEngine.session`, whose parameters,
        defaults and errors these are). An extractor with ``aextract`` calls its model over
        ``httpx.AsyncClient`` on this loop, in blocking and background extraction alike.

        :raises ConfigError: an override is invalid.
        :raises InvalidNamespaceError: an invalid namespace or session id.
        :raises KnowledgeBindingError: the knowledge binding is refused.
        :raises WorkspaceError: the workspace root is not a readable folder.
        """
        loop = asyncio.get_running_loop()
        session = await self._worker.run(
            self.engine.session,
            namespace,
            session_id,
            extractor=bridge_extractor(extractor, loop),
            config=config,
            extraction_mode=extraction_mode,
            token_counter=token_counter,
            knowledge=knowledge,
            workspace=workspace,
            summarizer=summarizer,
            compaction=compaction,
            **overrides,
        )
        return AsyncMemorySession(session, self._worker)

    # Lifecycle -----------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        """Whether :meth:`aclose` was called (then every call raises
        :class:`~memory_ledger.commands.errors.EngineClosedError`): the blocking engine's
        :attr:`MemoryEngine.closed`."""
        return self.engine.closed

    async def aclose(self) -> None:
        """Let queued calls finish, close the engine (indexer, projections, ledger) on the
        worker thread, then stop the worker. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self._worker.run(self.engine.close)
            owned = self._owned_provider
            if owned is not None:
                closer = getattr(owned, "close", None)
                if callable(closer):
                    await self._worker.run(closer)
                wrapped = getattr(owned, "wrapped", owned)
                async_closer = getattr(wrapped, "aclose", None)
                if callable(async_closer):
                    await async_closer()
        finally:
            await asyncio.to_thread(self._worker.shutdown)

    close = aclose
    """The same as :meth:`aclose` (the blocking API's name)."""

    async def __aenter__(self) -> AsyncMemoryEngine:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class AsyncEngineOpener:
    """What :meth:`AsyncMemoryEngine.open` returns: ``await`` it for the engine (then call
    ``aclose``), or ``async with`` it (closed on exit)."""

    def __init__(
        self,
        cls: type[AsyncMemoryEngine],
        path: str | os.PathLike[str] | None,
        options: dict[str, Any],
    ) -> None:
        self._cls = cls
        self._path = path
        self._options = options
        self._opened: AsyncMemoryEngine | None = None

    async def _open(self) -> AsyncMemoryEngine:
        loop = asyncio.get_running_loop()
        worker = EngineWorker()
        options = dict(self._options)
        owned: EmbeddingProvider | None = None
        try:
            provider = options.pop("embeddings", None)
            config = options.get("config")
            if provider is None and isinstance(config, MemoryConfig):
                provider = owned = await worker.run(provider_from_config, config)
            options["embeddings"] = bridge_embeddings(provider, loop)
            engine = await worker.run(MemoryEngine.open, self._path, **options)
        except BaseException:
            if owned is not None:
                closer = getattr(owned, "close", None)
                if callable(closer):
                    closer()
            worker.shutdown(wait=False)
            raise
        return self._cls(engine, worker, owned_provider=owned)

    def __await__(self) -> Generator[Any, None, AsyncMemoryEngine]:
        return self._open().__await__()

    async def __aenter__(self) -> AsyncMemoryEngine:
        self._opened = await self._open()
        return self._opened

    async def __aexit__(self, *exc: object) -> None:
        if self._opened is not None:
            await self._opened.aclose()
