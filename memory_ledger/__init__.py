"""memory-ledger: an embeddable, event-sourced long-term memory engine for AI agents.

Everything installs under this one import name: ``memory_ledger.ledger`` (events, the LMDB
persistence module), ``memory_ledger.projections`` (DuckDB read models),
``memory_ledger.commands`` (the engine, sessions, recall) and ``memory_ledger.replay``
(audit, replay, the CLI). This module is the short way in::

    import memory_ledger
    with memory_ledger.open("./store") as mem:
        ns = memory_ledger.Namespace("acme", "alice", "assistant")
        mem.remember(ns, "Alice only drinks espresso.")
        print(mem.recall(ns, "what does Alice drink?")[0].statement)

Hosts that run an event loop use the same operations as coroutines::

    async with memory_ledger.AsyncMemoryEngine.open("./store") as mem:
        await mem.remember(ns, "Alice only drinks espresso.")
        print((await mem.recall(ns, "what does Alice drink?"))[0].statement)

The names below are imported on first use (``import memory_ledger`` alone loads none of
the engine's dependencies).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.aio.engine import AsyncMemoryEngine
    from memory_ledger.commands.aio.session import AsyncMemorySession
    from memory_ledger.commands.engine.batch import BatchResult, Forget, Remember
    from memory_ledger.commands.engine.direct import DirectResult
    from memory_ledger.commands.engine.memory_engine import MemoryEngine
    from memory_ledger.commands.errors import EngineClosedError, MemoryLedgerError
    from memory_ledger.commands.extraction.base import RecordedExtractor
    from memory_ledger.commands.recall.index import RecallHit, RecallResult
    from memory_ledger.commands.session.memory_session import MemorySession
    from memory_ledger.ledger.ids import Namespace
    from memory_ledger.ledger.key_errors import MasterKeyError, NamespaceErasedError
    from memory_ledger.ledger.master_key import KeyWrapper, LocalMasterKey

__all__ = [
    "AsyncMemoryEngine",
    "AsyncMemorySession",
    "BatchResult",
    "DirectResult",
    "EngineClosedError",
    "Forget",
    "KeyWrapper",
    "LocalMasterKey",
    "MasterKeyError",
    "MemoryEngine",
    "MemoryLedgerError",
    "MemorySession",
    "Namespace",
    "NamespaceErasedError",
    "RecallHit",
    "RecallResult",
    "RecordedExtractor",
    "Remember",
    "open",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AsyncMemoryEngine": "memory_ledger.commands.aio.engine",
        "AsyncMemorySession": "memory_ledger.commands.aio.session",
        "BatchResult": "memory_ledger.commands.engine.batch",
        "Forget": "memory_ledger.commands.engine.batch",
        "Remember": "memory_ledger.commands.engine.batch",
        "DirectResult": "memory_ledger.commands.engine.direct",
        "MemoryEngine": "memory_ledger.commands.engine.memory_engine",
        "EngineClosedError": "memory_ledger.commands.errors",
        "MemoryLedgerError": "memory_ledger.commands.errors",
        "MemorySession": "memory_ledger.commands.session.memory_session",
        "Namespace": "memory_ledger.ledger.ids",
        "KeyWrapper": "memory_ledger.ledger.master_key",
        "LocalMasterKey": "memory_ledger.ledger.master_key",
        "MasterKeyError": "memory_ledger.ledger.key_errors",
        "NamespaceErasedError": "memory_ledger.ledger.key_errors",
        "RecallHit": "memory_ledger.commands.recall.index",
        "RecallResult": "memory_ledger.commands.recall.index",
        "RecordedExtractor": "memory_ledger.commands.extraction.base",
    },
)


def open(path: str | os.PathLike[str] | None = None, **options: Any) -> MemoryEngine:  # noqa: A001
    """Open (or create) the memory store in folder ``path``; use it as a context manager.

    ``path`` is required (None only with ``config=`` naming ``store_dir``); ``""`` is refused
    (``InvalidArgumentError``, ``reason_code`` ``"empty_path"`` / ``"path_required"``).

    The same as :meth:`MemoryEngine.open` (its keyword ``options``: ``sync``, ``config``,
    ``create``, ``embeddings``, ...). The engine it returns offers the direct commands
    ``remember`` / ``forget`` / ``correct`` (durable before they return) and
    ``recall(namespace, query, k=5)`` (a list-like :class:`RecallResult` of hits carrying
    ``memory_id``, ``statement``, ``score``, ``evidence``, ``occurred_at``); hosts that drive
    turns use ``engine.session(...)``.

    :raises MemoryLedgerError: the store cannot be opened (the error names the path and why).
    """
    from memory_ledger.commands.engine.memory_engine import MemoryEngine

    return MemoryEngine.open(path, **options)
