"""The workspace wing: session-owned workspace retrieval (catalog, chunking, search, admission).

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.workspace.chunking import (
        ByteWindows,
        LineWindows,
        RecursiveSeparators,
    )
    from memory_ledger.commands.workspace.retrieval import (
        WorkspaceError,
        WorkspaceRetrieval,
        WorkspaceStatus,
    )

__all__ = [
    "ByteWindows",
    "LineWindows",
    "RecursiveSeparators",
    "WorkspaceError",
    "WorkspaceRetrieval",
    "WorkspaceStatus",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ByteWindows": "memory_ledger.commands.workspace.chunking",
        "LineWindows": "memory_ledger.commands.workspace.chunking",
        "RecursiveSeparators": "memory_ledger.commands.workspace.chunking",
        "WorkspaceError": "memory_ledger.commands.workspace.retrieval",
        "WorkspaceRetrieval": "memory_ledger.commands.workspace.retrieval",
        "WorkspaceStatus": "memory_ledger.commands.workspace.retrieval",
    },
)
