"""The consistency boundary of decisions about canonical memory (DESIGN.md section 3).

A decision (activate, supersede, conflict, reinforce, forget, correct, pin, prune) reads the
state it decides from out of the LEDGER, never from a read model, through a
:class:`DecisionReads`: it first notes the ledger head (``after``), then reads the events
carrying the tags it needs (``memory:<id>`` for a memory's history, ``key:<...>`` for every
value ever activated under a (subject, predicate) key, ``namespace:<...>`` for a whole
namespace; see :mod:`memory_ledger.ledger.tags`). Its events are appended with the append
condition "no event carrying any tag I read was appended after ``after``"
(``DCBAppendCondition``, the ``eventsourcing`` library's dynamic consistency boundary),
checked inside the LMDB write transaction. When the condition fails (or a stream version
was taken), the command re-reads and re-decides (:func:`append_decision`), at most
:data:`DECISION_ATTEMPTS` times, then raises :class:`ConcurrencyConflictError`. A refused
append writes nothing, so nothing is ever half-written.

Why tags and not stream versions alone: two new values of one key ("Alice lives in Lisbon",
"Alice lives in Porto") are two memory streams; neither writer touches the other's stream,
so only a condition on the key's tag makes the second see the first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING
from uuid import UUID

from eventsourcing.dcb.api import DCBAppendCondition
from eventsourcing.persistence import IntegrityError

from memory_ledger.commands.errors import ConcurrencyConflictError
from memory_ledger.commands.memory_state import MemoryStreamState, fold_memory_history
from memory_ledger.ledger.events import LedgerEvent
from memory_ledger.ledger.faults import fault
from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.tags import condition_for, key_tag, memory_tag, namespace_tag

if TYPE_CHECKING:
    from memory_ledger.commands.engine import MemoryEngine

__all__ = ["DECISION_ATTEMPTS", "DecisionReads", "append_decision", "memory_of"]

DECISION_ATTEMPTS = 8
"""How many times a decision is re-read and re-decided before ConcurrencyConflictError."""


class DecisionReads:
    """The ledger reads of ONE decision attempt, and the append condition they imply.

    :param engine: the engine whose ledger is read.
    :param namespace: the caller's namespace: a memory of another namespace reads as absent
        (exactly like an id that never existed; issue 13 item 5).
    """

    def __init__(self, engine: MemoryEngine, namespace: Namespace) -> None:
        self._engine = engine
        self.namespace = namespace
        self.after = engine.head
        """The ledger head before the first read: every read sees at least this."""
        self.tags: set[str] = set()
        """Every tag this decision read under (its consistency boundary)."""
        self._memories: dict[UUID, MemoryStreamState | None] = {}
        self._versions: dict[UUID, int] = {}
        """The version of each memory stream as read (0: absent), before any planning."""

    def _select(self, tag: str) -> list[tuple[int, LedgerEvent]]:
        self.tags.add(tag)
        return self._engine.read_tagged(tag)

    def memory(self, memory: UUID) -> MemoryStreamState | None:
        """The memory's state folded from its ledger history (with positions); None when it
        does not exist or belongs to another namespace. Read once per attempt."""
        if memory not in self._memories:
            state = fold_memory_history(self._select(memory_tag(memory)))
            self._versions[memory] = state.version if state is not None else 0
            if state is not None and state.namespace != self.namespace:
                state = None
            self._memories[memory] = state
        return self._memories[memory]

    def activated_under(self, key: tuple[str, str]) -> list[UUID]:
        """Ids of every memory ever activated under ``key`` in this namespace (any status
        now: fold each with :meth:`memory`), in ledger order."""
        events = self._select(key_tag(self.namespace, key))
        return list(dict.fromkeys(e.originator_id for _, e in events))

    def namespace_memories(self) -> dict[UUID, MemoryStreamState]:
        """Every memory of this namespace, folded from one read of its namespace tag."""
        histories: dict[UUID, list[tuple[int, LedgerEvent]]] = {}
        for position, event in self._select(namespace_tag(self.namespace)):
            histories.setdefault(event.originator_id, []).append((position, event))
        states: dict[UUID, MemoryStreamState] = {}
        for memory, history in histories.items():
            # Every memory event carries the namespace tag: that one tag guards them all.
            state = fold_memory_history(history)
            self._versions[memory] = state.version if state is not None else 0
            self._memories[memory] = state
            if state is not None:
                states[memory] = state
        return states

    def condition(self, events: Sequence[LedgerEvent] = ()) -> DCBAppendCondition | None:
        """The append condition of the decision's ``events``: nothing carrying a tag it
        read was appended after ``after``. None when nothing was read or the engine's
        condition is switched off (the benchmark's baseline).

        A memory the decision writes itself, at the version after the one it read, is left
        out: its stream version already guards it (a concurrent append to that stream takes
        the same version and the batch is refused), so the condition carries only what
        versions cannot see: keys, namespaces, and memories read but not written.
        """
        if not self.tags or not self._engine.consistency_boundary:
            return None
        guarded = set()
        for event in events:
            memory = event.originator_id
            if memory in self._versions and memory not in guarded:
                if event.originator_version == self._versions[memory] + 1:
                    guarded.add(memory)
        tags = self.tags - {memory_tag(m) for m in guarded}
        return condition_for(sorted(tags), self.after) if tags else None


def append_decision(
    engine: MemoryEngine,
    namespace: Namespace,
    plan: Callable[[DecisionReads], Sequence[LedgerEvent]],
    *,
    what: str,
    attempts: int = DECISION_ATTEMPTS,
    on_conflict: Callable[[], None] | None = None,
) -> list[int]:
    """Decide with fresh ledger reads and append under the decision's condition; on a
    conflict (condition failed or stream version taken) call ``on_conflict`` (refresh other
    state) and decide again. Returns the positions written ([] when ``plan`` decided
    nothing).

    :raises ConcurrencyConflictError: ``attempts`` decisions in a row were overtaken.
    """
    for _ in range(attempts):
        reads = DecisionReads(engine, namespace)
        events = list(plan(reads))
        if not events:
            return []
        fault("decision.planned")
        try:
            return engine.append(events, condition=reads.condition(events))
        except IntegrityError:
            if on_conflict is not None:
                on_conflict()
    msg = (
        f"{what}: other commands changed the memories it decides about {attempts} times in "
        "a row; nothing was written (retry later)"
    )
    raise ConcurrencyConflictError(msg)


def memory_of(engine: MemoryEngine, namespace: Namespace, memory: UUID) -> MemoryStreamState | None:
    """The memory's state read from the ledger now, or None when it does not exist or
    belongs to another namespace (the two are indistinguishable to the caller). For checks
    that are not decisions (e.g. ``record_use``); decisions use :class:`DecisionReads`."""
    return DecisionReads(engine, namespace).memory(memory)
