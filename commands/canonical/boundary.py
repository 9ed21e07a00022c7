"""The consistency boundary of decisions about canonical memory (docs/design.md).

A decision (activate, supersede, conflict, reinforce, forget, correct, pin, prune) reads the
state it decides from out of the LEDGER, never from a read model, through a
:class:`DecisionReads`: it first notes the ledger head (``after``), then reads the events
carrying the tags it needs (``memory:<id>`` for a memory's history, ``key:<...>`` for every
value ever activated under a (subject, predicate) key, ``namespace:<...>`` for a whole
namespace; see :mod:`memory_ledger.ledger.tags`). Its events are appended with the append
condition "no event carrying any tag I read was appended after ``after``"
(``DCBAppendCondition``, the ``eventsourcing`` library's dynamic consistency boundary),
checked inside the LMDB write transaction. When the condition fails (or a stream version
was taken), the command re-reads and re-decides (:func:`append_decision`) after a jittered
back-off, until a deadline (:data:`DECISION_DEADLINE_SECONDS`, not a fixed count of
attempts), then raises :class:`ConcurrencyConflictError` naming what raced. A refused append
writes nothing, so nothing is ever half-written.

:func:`append_decision` is THE decision path (docs/design.md, "one decision path"):
every command that changes what is current (direct remember/correct/forget/pin, a session's
``finish``, ``activate_candidate``, admissions, pruning, ``forget_all``) and every session
append goes through it, so a new surface inherits the boundary instead of re-implementing
it. A command whose target was superseded (meanwhile or long ago) is refused with
``SupersededTargetError`` naming the current head of its supersession chain
(:meth:`DecisionReads.head`), on every surface: a command never moves to another memory
than the one it named.

Why tags and not stream versions alone: two new values of one key ("Alice lives in Lisbon",
"Alice lives in Porto") are two memory streams; neither writer touches the other's stream,
so only a condition on the key's tag makes the second see the first.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING
from uuid import UUID

from eventsourcing.dcb.api import DCBAppendCondition
from eventsourcing.persistence import IntegrityError

from memory_ledger.commands.canonical.memory_state import MemoryStreamState, fold_memory_history
from memory_ledger.commands.errors import ConcurrencyConflictError
from memory_ledger.ledger.digests import IdDigests
from memory_ledger.ledger.events import LedgerEvent
from memory_ledger.ledger.faults import fault
from memory_ledger.ledger.ids import Namespace, subject_predicate_key
from memory_ledger.ledger.tags import condition_for, memory_tag

if TYPE_CHECKING:
    from memory_ledger.commands.store import MemoryStore

__all__ = [
    "DECISION_DEADLINE_SECONDS",
    "ConflictBackoff",
    "DecisionReads",
    "StaleRead",
    "append_decision",
    "memory_of",
]

DECISION_DEADLINE_SECONDS = 10.0
"""How long (seconds, monotonic) a decision is re-read and re-decided after conflicts
before :class:`ConcurrencyConflictError` (``MemoryEngine.decision_deadline`` overrides)."""

READ_CHUNK = 512
"""How many memory tags :meth:`DecisionReads.memories` reads in one ledger read."""

BACKOFF_FIRST_SECONDS = 0.001
BACKOFF_CAP_SECONDS = 0.1


class StaleRead(IntegrityError):
    """Raised by a plan whose reads disagree with each other (a read-model search caught up
    past the decision's position saw a memory the ledger reads at that position do not):
    :func:`append_decision` treats it as a conflict and decides again, as it would when the
    append condition failed."""

    position = None


class ConflictBackoff:
    """Jittered exponential back-off with a deadline, for re-deciding after a conflict.

    "Full jitter" (a uniform wait in [0, min(cap, first * 2**n)]), the scheme AWS's
    architecture blog measured as finishing contended work soonest; the deadline, not a
    count, bounds the whole command, so a loaded machine retries as long as it may.

    :param deadline: seconds from construction after which :meth:`wait` refuses.
    """

    def __init__(self, deadline: float) -> None:
        self.started = time.monotonic()
        self.deadline = self.started + deadline
        self.conflicts = 0
        self._random = random.Random()

    def wait(self) -> bool:
        """Count one conflict and sleep before the next attempt; False (no sleep) when the
        deadline has passed."""
        self.conflicts += 1
        now = time.monotonic()
        if now >= self.deadline:
            return False
        ceiling = min(BACKOFF_CAP_SECONDS, BACKOFF_FIRST_SECONDS * 2 ** min(self.conflicts, 16))
        time.sleep(min(self._random.uniform(0, ceiling), max(0.0, self.deadline - now)))
        return True


class DecisionReads:
    """The ledger reads of ONE decision attempt, and the append condition they imply.

    :param engine: the engine whose ledger is read.
    :param namespace: the caller's namespace: a memory of another namespace reads as absent
        (exactly like an id that never existed; issue 13 item 5).
    """

    def __init__(self, engine: MemoryStore, namespace: Namespace) -> None:
        self._engine = engine
        self.namespace = namespace
        self.digests: IdDigests = engine.keyring.call_digests()
        """How the store derives ids (tags, memory ids), the memory ids and key tags of this
        attempt remembered (:meth:`IdDigests.for_call`); the append of its events tags them
        with the same digests while the keyring has not reloaded (``MemoryEngine.append``)."""
        self.after = engine.head
        """The ledger head before the first read: every read sees at least this."""
        self.tags: set[str] = set()
        """Every tag this decision read under (its consistency boundary)."""
        self._memories: dict[UUID, MemoryStreamState | None] = {}
        self._memory_tags: dict[UUID, str] = {}
        self._versions: dict[UUID, int] = {}
        """The version of each memory stream as read (0: absent), before any planning."""
        self._keyed: dict[tuple[str, str], list[UUID]] = {}
        """What :meth:`activated_under` answers for each key read (:meth:`keys` reads many)."""

    def _select(self, tag: str) -> list[tuple[int, LedgerEvent]]:
        """The events carrying ``tag`` up to :attr:`after`: every read of one attempt sees
        the same consistent prefix of the ledger (a later commit between two reads would
        otherwise tear the state, e.g. a supersession chain read half before and half
        after a concurrent command); what came after fails the append condition."""
        self.tags.add(tag)
        return [(p, e) for p, e in self._engine.read_tagged(tag) if p <= self.after]

    def guard_namespace(self) -> None:
        """Put the whole namespace in the decision's boundary without reading it: for a
        decision made from a search of the read models (a correction naming its target by
        words, caught up to at least :attr:`after`), whose answer any memory event of the
        namespace after :attr:`after` may change."""
        self.tags.add(self.digests.namespace_tag(self.namespace))

    def head(self, memory: UUID) -> UUID | None:
        """The current head of ``memory``'s supersession chain: ``memory`` itself while it
        is retrievable, else the memory that superseded it, followed to the first
        retrievable one (each link is read, so the chain is in the append condition).
        None when the memory does not exist (in this namespace) or the chain ends in a
        memory that is not retrievable (forgotten, pruned) or loops."""
        seen: set[UUID] = set()
        current: UUID | None = memory
        while current is not None and current not in seen:
            seen.add(current)
            state = self.memory(current)
            if state is None:
                return None
            if state.retrievable:
                return current
            if state.status != "superseded":
                return None
            current = state.superseded_by
        return None

    def memory(self, memory: UUID) -> MemoryStreamState | None:
        """The memory's state folded from its ledger history (with positions); None when it
        does not exist or belongs to another namespace. Read once per attempt."""
        if memory not in self._memories:
            tag = self._memory_tags[memory] = memory_tag(memory)
            state = fold_memory_history(self._select(tag))
            self._versions[memory] = state.version if state is not None else 0
            if state is not None and state.namespace != self.namespace:
                state = None
            self._memories[memory] = state
        return self._memories[memory]

    def memories(self, memories: Iterable[UUID]) -> None:
        """Read the states of ``memories`` as :meth:`memory` would, each once, in reads of
        :data:`READ_CHUNK` tags (a batch's decision): the same tags join the boundary, the
        same versions are noted and :meth:`memory` then answers from them. A memory tag is
        carried only by the events of that memory's own stream, so an event read under many
        tags belongs to its originator's history."""
        wanted = [m for m in dict.fromkeys(memories) if m not in self._memories]
        for start in range(0, len(wanted), READ_CHUNK):
            chunk = wanted[start : start + READ_CHUNK]
            tags = [memory_tag(memory) for memory in chunk]
            self.tags.update(tags)
            # a history list only for a memory the read found (most of a batch's are new)
            wanted_here = set(chunk)
            histories: dict[UUID, list[tuple[int, LedgerEvent]]] = {}
            for position, event in self._engine.read_tagged_any(tags):
                if position <= self.after and event.originator_id in wanted_here:
                    histories.setdefault(event.originator_id, []).append((position, event))
            for memory, tag in zip(chunk, tags, strict=True):
                self._memory_tags[memory] = tag
                state = fold_memory_history(histories.get(memory, ()))
                self._versions[memory] = state.version if state is not None else 0
                if state is not None and state.namespace != self.namespace:
                    state = None
                self._memories[memory] = state

    def activated_under(self, key: tuple[str, str]) -> list[UUID]:
        """Ids of every memory ever activated under ``key`` in this namespace (any status
        now: fold each with :meth:`memory`), in ledger order. Read once per attempt."""
        if key not in self._keyed:
            events = self._select(self.digests.key_tag(self.namespace, key))
            self._keyed[key] = list(dict.fromkeys(e.originator_id for _, e in events))
        return self._keyed[key]

    def keys(self, keys: Iterable[tuple[str, str]]) -> None:
        """Read what :meth:`activated_under` answers for each of ``keys``, and the states
        of the memories it names (:meth:`memories`), in reads of :data:`READ_CHUNK` tags (a
        batch's decision: one pass for the batch instead of one read per operation); the
        same tags join the boundary. A key tag is carried only by the MemoryActivated
        events of that key in this namespace, so an event read under many key tags is
        assigned by its item's own key."""
        wanted = [k for k in dict.fromkeys(keys) if k not in self._keyed]
        held: list[UUID] = []
        for start in range(0, len(wanted), READ_CHUNK):
            chunk = wanted[start : start + READ_CHUNK]
            tags = [self.digests.key_tag(self.namespace, key) for key in chunk]
            self.tags.update(tags)
            found: dict[tuple[str, str], dict[UUID, None]] = {key: {} for key in chunk}
            for position, event in self._engine.read_tagged_any(tags):
                item = getattr(event, "item", None)
                if position > self.after or item is None:
                    continue
                ids = found.get(subject_predicate_key(item.subject, item.predicate) or ("", ""))
                if ids is not None:
                    ids[event.originator_id] = None
            for key, ids in found.items():
                self._keyed[key] = list(ids)
                held.extend(ids)
        self.memories(held)

    def never_activated(self) -> list[tuple[str, str]]:
        """The keys read (:meth:`activated_under`, :meth:`keys`) under which no memory of
        this namespace was ever activated up to :attr:`after`. Once the decision's events
        are appended under its :meth:`condition` (which holds every key tag read), nothing
        was activated under them before those events either: exact for the ledger right
        before the append. Empty when the engine's condition is switched off (nothing
        guards the reads then)."""
        if not self._engine.consistency_boundary:
            return []
        return [key for key, ids in self._keyed.items() if not ids]

    def namespace_memories(self) -> dict[UUID, MemoryStreamState]:
        """Every memory of this namespace, folded from one read of its namespace tag."""
        histories: dict[UUID, list[tuple[int, LedgerEvent]]] = {}
        for position, event in self._select(self.digests.namespace_tag(self.namespace)):
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
        versions, memory_tags = self._versions, self._memory_tags
        guarded = set()
        for event in events:
            memory = event.originator_id
            if memory in memory_tags and event.originator_version == versions[memory] + 1:
                guarded.add(memory_tags[memory])
        tags = self.tags - guarded
        return condition_for(tags, self.after) if tags else None


def append_decision(
    engine: MemoryStore,
    namespace: Namespace,
    plan: Callable[[DecisionReads], Sequence[LedgerEvent]],
    *,
    what: str,
    on_conflict: Callable[[], object] | None = None,
    append: Callable[[list[LedgerEvent], DCBAppendCondition | None], list[int]] | None = None,
) -> list[int]:
    """THE decision path: decide with fresh ledger reads and append under the decision's
    condition; on a conflict (condition failed or stream version taken) call
    ``on_conflict`` (refresh other state), back off (jittered) and decide again, until the
    engine's ``decision_deadline``. Returns the positions written ([] when ``plan`` decided
    nothing).

    ``plan`` reads what it decides from through the :class:`DecisionReads` it is given
    (fresh on every attempt); it may raise a typed error (nothing is written). ``append``
    writes the planned events under the condition (default ``engine.append``; a session
    puts its buffered read records in front).

    :raises ConcurrencyConflictError: overtaken until the deadline; names what raced (the
        first conflicting position, or the stream version taken) and how many attempts.
    """
    write = append or (lambda events, condition: engine.append(events, condition=condition))
    backoff = ConflictBackoff(engine.decision_deadline)
    raced = ""
    while True:
        reads = DecisionReads(engine, namespace)
        try:
            events = list(plan(reads))
            if not events:
                return []
            condition = reads.condition(events)
            if reads.tags:
                fault("decision.planned")
            return write(events, condition)
        except IntegrityError as error:  # StaleRead, a failed condition, a version taken
            raced = _raced(error)
            engine.decision_conflicts += 1
            if on_conflict is not None:
                on_conflict()
            if not backoff.wait():
                break
    seconds = time.monotonic() - backoff.started
    msg = (
        f"{what}: concurrent commands overtook it {backoff.conflicts} times in {seconds:.1f} s "
        f"(last: {raced}); nothing was written (retry later)"
    )
    raise ConcurrencyConflictError(msg)


def _raced(error: IntegrityError) -> str:
    """What a refused append raced with, in words (never payload text)."""
    if isinstance(error, StaleRead):
        return "its reads saw a concurrent command half"
    position = getattr(error, "position", None)
    if isinstance(position, int):
        return f"the event at position {position} changed what it read"
    return "another command took a stream version it wrote"


def memory_of(engine: MemoryStore, namespace: Namespace, memory: UUID) -> MemoryStreamState | None:
    """The memory's state read from the ledger now, or None when it does not exist or
    belongs to another namespace (the two are indistinguishable to the caller). For checks
    that are not decisions (e.g. ``record_use``); decisions use :class:`DecisionReads`."""
    return DecisionReads(engine, namespace).memory(memory)
