"""The engine wing: the store a host opens, its reads, direct commands and erasure.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.engine.direct import DirectCommands, DirectResult
    from memory_ledger.commands.engine.encryption import ErasureReport
    from memory_ledger.commands.engine.memory_engine import MemoryEngine
    from memory_ledger.commands.store import ReadModels

__all__ = [
    "DirectCommands",
    "DirectResult",
    "ErasureReport",
    "MemoryEngine",
    "ReadModels",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "DirectCommands": "memory_ledger.commands.engine.direct",
        "DirectResult": "memory_ledger.commands.engine.direct",
        "ErasureReport": "memory_ledger.commands.engine.encryption",
        "MemoryEngine": "memory_ledger.commands.engine.memory_engine",
        "ReadModels": "memory_ledger.commands.store",
    },
)
