"""A LangGraph ``BaseStore`` backed by the ledger (the ``memory-ledger[langgraph]`` extra).

:class:`LedgerStore` records every put and delete as an engine command (history, as-of
reads, ``explain``, erasure and hybrid recall come with it); :func:`import_store` and
:func:`export_store` move items from and to any other ``BaseStore``. See
``docs/langgraph.md``.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.replay.langgraph_store.audit import ItemVersion
    from memory_ledger.replay.langgraph_store.embeddings import LangGraphEmbeddingProvider
    from memory_ledger.replay.langgraph_store.matching import FilterError
    from memory_ledger.replay.langgraph_store.migrate import (
        MigrationReport,
        export_store,
        import_store,
    )
    from memory_ledger.replay.langgraph_store.store import LedgerStore, StoreNamespaceError

__all__ = [
    "FilterError",
    "ItemVersion",
    "LangGraphEmbeddingProvider",
    "LedgerStore",
    "MigrationReport",
    "StoreNamespaceError",
    "export_store",
    "import_store",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "FilterError": "memory_ledger.replay.langgraph_store.matching",
        "ItemVersion": "memory_ledger.replay.langgraph_store.audit",
        "LangGraphEmbeddingProvider": "memory_ledger.replay.langgraph_store.embeddings",
        "LedgerStore": "memory_ledger.replay.langgraph_store.store",
        "MigrationReport": "memory_ledger.replay.langgraph_store.migrate",
        "StoreNamespaceError": "memory_ledger.replay.langgraph_store.store",
        "export_store": "memory_ledger.replay.langgraph_store.migrate",
        "import_store": "memory_ledger.replay.langgraph_store.migrate",
    },
)
