"""Restoring what a command cannot say: a memory's conflict marks and its prune, as another
store recorded them (the interchange import, ``replay.imports.interchange_import``).

No explicit command writes a ``MemoryConflictMarked`` (a contradiction is an extractor's
finding) or a ``MemoryPruned`` (a prune is the store's own decision, by rule). An import
that brings a memory with its history restores both as they were: planned by the
reconciler of the import's own command (:func:`~memory_ledger.commands.canonical.reconcile.
plan_finish`'s ``then``), so they are appended in the same decision, under the same append
condition (every memory they touch is read through the decision's reads) and with the same
session id as the values they mark.

- :func:`restore_conflict` marks two memories as contradicting each other, on both, as a
  reconciled ``conflicts_with`` does, but whatever their status now: the source store
  marked them while both were current, and a mark never changes a status other than
  ``active`` (an ``active`` memory becomes ``conflicted``).
- :func:`restore_prune` prunes a memory at its original prune time with its original rule.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from memory_ledger.commands.canonical.memory_state import MemoryStreamState
from memory_ledger.commands.canonical.reconcile import Reconciler
from memory_ledger.ledger.events import MemoryConflictMarked, MemoryPruned

__all__ = ["restore_conflict", "restore_prune"]


def _next(reconciler: Reconciler, memory: UUID) -> tuple[MemoryStreamState, dict[str, object]]:
    state = reconciler.state(memory)
    if state is None:
        msg = f"memory {memory} is not in this namespace"
        raise LookupError(msg)
    state.version += 1
    return state, {
        "originator_id": memory,
        "originator_version": state.version,
        "recorded_at": reconciler.recorded_at,
        "namespace": reconciler.namespace,
        "session_id": reconciler.session_id,
    }


def restore_conflict(reconciler: Reconciler, first: UUID, second: UUID, turn_id: int) -> bool:
    """Plan ``MemoryConflictMarked`` on ``first`` naming ``second`` and on ``second`` naming
    ``first`` (an ``active`` one becomes ``conflicted``); False, planning nothing, when
    either is unknown to the namespace or they are the same memory."""
    if first == second or reconciler.state(first) is None or reconciler.state(second) is None:
        return False
    for this, that in ((first, second), (second, first)):
        state, base = _next(reconciler, this)
        reconciler.events.append(
            MemoryConflictMarked(**base, turn_id=turn_id, conflicts_with=that)  # type: ignore[arg-type]
        )
        if state.status == "active":
            state.status = "conflicted"
    reconciler.conflicts.extend((first, second))
    return True


def restore_prune(
    reconciler: Reconciler, memory: UUID, rule: str, occurred_at: datetime | None
) -> bool:
    """Plan ``MemoryPruned`` of ``memory`` with ``rule`` at ``occurred_at`` (its original
    prune time); False, planning nothing, when it is unknown or not current (``active`` or
    ``conflicted``: only a current memory is pruned)."""
    state = reconciler.state(memory)
    if state is None or not state.retrievable:
        return False
    state, base = _next(reconciler, memory)
    reconciler.events.append(
        MemoryPruned(**base, rule=rule, occurred_at=occurred_at)  # type: ignore[arg-type]
    )
    state.status = "pruned"
    return True
