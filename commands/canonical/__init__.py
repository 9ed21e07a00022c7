"""The canonical wing: a memory's state, the one decision path, what an explicit command is
(its decider and the rule of targets named by words) and reconciliation.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.canonical.boundary import DecisionReads, append_decision
    from memory_ledger.commands.canonical.bulk_forget import forget_all
    from memory_ledger.commands.canonical.explicit_command import (
        CommandReads,
        CommandResult,
        CommandSpec,
        Decided,
        TargetFacts,
        decide_command,
    )
    from memory_ledger.commands.canonical.memory_state import MemoryStreamState
    from memory_ledger.commands.canonical.reconcile import Reconciler
    from memory_ledger.commands.canonical.word_targets import (
        correction_match,
        correction_target,
        description_target,
    )

__all__ = [
    "CommandReads",
    "CommandResult",
    "CommandSpec",
    "Decided",
    "DecisionReads",
    "MemoryStreamState",
    "Reconciler",
    "TargetFacts",
    "append_decision",
    "correction_match",
    "correction_target",
    "decide_command",
    "description_target",
    "forget_all",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CommandReads": "memory_ledger.commands.canonical.explicit_command",
        "CommandResult": "memory_ledger.commands.canonical.explicit_command",
        "CommandSpec": "memory_ledger.commands.canonical.explicit_command",
        "Decided": "memory_ledger.commands.canonical.explicit_command",
        "DecisionReads": "memory_ledger.commands.canonical.boundary",
        "MemoryStreamState": "memory_ledger.commands.canonical.memory_state",
        "Reconciler": "memory_ledger.commands.canonical.reconcile",
        "TargetFacts": "memory_ledger.commands.canonical.explicit_command",
        "append_decision": "memory_ledger.commands.canonical.boundary",
        "correction_match": "memory_ledger.commands.canonical.word_targets",
        "correction_target": "memory_ledger.commands.canonical.word_targets",
        "decide_command": "memory_ledger.commands.canonical.explicit_command",
        "description_target": "memory_ledger.commands.canonical.word_targets",
        "forget_all": "memory_ledger.commands.canonical.bulk_forget",
    },
)
