"""The ``memory-ledger`` command line (typer + rich), above the audit library.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.replay.cli.app import main

__all__ = [
    "main",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "main": "memory_ledger.replay.cli.app",
    },
)
