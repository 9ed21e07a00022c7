"""The asyncio wing: the engine and sessions for asyncio hosts.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.aio.direct import AsyncDirectCommands
    from memory_ledger.commands.aio.engine import AsyncMemoryEngine
    from memory_ledger.commands.aio.session import AsyncMemorySession

__all__ = [
    "AsyncDirectCommands",
    "AsyncMemoryEngine",
    "AsyncMemorySession",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AsyncDirectCommands": "memory_ledger.commands.aio.direct",
        "AsyncMemoryEngine": "memory_ledger.commands.aio.engine",
        "AsyncMemorySession": "memory_ledger.commands.aio.session",
    },
)
