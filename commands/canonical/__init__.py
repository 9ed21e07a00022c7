"""The canonical wing: a memory's state, the one decision path and reconciliation.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.canonical.boundary import DecisionReads, append_decision
    from memory_ledger.commands.canonical.erasure import forget_all
    from memory_ledger.commands.canonical.memory_state import MemoryStreamState
    from memory_ledger.commands.canonical.reconcile import Reconciler

__all__ = [
    "DecisionReads",
    "MemoryStreamState",
    "Reconciler",
    "append_decision",
    "forget_all",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "DecisionReads": "memory_ledger.commands.canonical.boundary",
        "MemoryStreamState": "memory_ledger.commands.canonical.memory_state",
        "Reconciler": "memory_ledger.commands.canonical.reconcile",
        "append_decision": "memory_ledger.commands.canonical.boundary",
        "forget_all": "memory_ledger.commands.canonical.erasure",
    },
)
