"""The session wing: one logical conversation and its concerns.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.canonical.explicit_command import CommandResult
    from memory_ledger.commands.session.admission import AdmissionReport
    from memory_ledger.commands.session.extraction import TurnOutcome
    from memory_ledger.commands.session.memory_provider import SessionMemoryProvider
    from memory_ledger.commands.session.memory_session import MemorySession
    from memory_ledger.commands.session.turns import PreparedMemorySnapshot
    from memory_ledger.commands.session.workspace import WorkspaceOptions

__all__ = [
    "AdmissionReport",
    "CommandResult",
    "MemorySession",
    "PreparedMemorySnapshot",
    "SessionMemoryProvider",
    "TurnOutcome",
    "WorkspaceOptions",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AdmissionReport": "memory_ledger.commands.session.admission",
        "CommandResult": "memory_ledger.commands.canonical.explicit_command",
        "MemorySession": "memory_ledger.commands.session.memory_session",
        "PreparedMemorySnapshot": "memory_ledger.commands.session.turns",
        "SessionMemoryProvider": "memory_ledger.commands.session.memory_provider",
        "TurnOutcome": "memory_ledger.commands.session.extraction",
        "WorkspaceOptions": "memory_ledger.commands.session.workspace",
    },
)
