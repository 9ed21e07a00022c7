"""The engine wing: the store a host opens, its reads, direct commands and erasure.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.engine.batch import BatchOutcome, BatchResult, Forget, Remember
    from memory_ledger.commands.engine.direct import DirectCommands, DirectResult
    from memory_ledger.commands.engine.encryption import ErasureReport
    from memory_ledger.commands.engine.memory_engine import MemoryEngine
    from memory_ledger.commands.engine.receipt import ReceiptScanError, SigningKeyError
    from memory_ledger.commands.store import ReadModels

__all__ = [
    "BatchOutcome",
    "BatchResult",
    "DirectCommands",
    "DirectResult",
    "ErasureReport",
    "Forget",
    "MemoryEngine",
    "ReadModels",
    "ReceiptScanError",
    "Remember",
    "SigningKeyError",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BatchOutcome": "memory_ledger.commands.engine.batch",
        "BatchResult": "memory_ledger.commands.engine.batch",
        "Forget": "memory_ledger.commands.engine.batch",
        "Remember": "memory_ledger.commands.engine.batch",
        "DirectCommands": "memory_ledger.commands.engine.direct",
        "DirectResult": "memory_ledger.commands.engine.direct",
        "ErasureReport": "memory_ledger.commands.engine.encryption",
        "MemoryEngine": "memory_ledger.commands.engine.memory_engine",
        "ReadModels": "memory_ledger.commands.store",
        "ReceiptScanError": "memory_ledger.commands.engine.receipt",
        "SigningKeyError": "memory_ledger.commands.engine.receipt",
    },
)
