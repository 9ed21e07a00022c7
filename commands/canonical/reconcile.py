"""Reconciliation of a session into canonical memory (``finish()`` and ``activate_candidate``).

A pure function of its inputs (the session's candidates and explicit commands with the
positions of their evidence, the ledger history of the memory streams they address, the
memories ever activated under a subject and predicate, and the command's ``recorded_at``):
no wall clock, no randomness, so a replay plans the same events. The inputs are read from
the ledger through :class:`commands.canonical.boundary.DecisionReads`, whose append condition makes
the plan valid only if none of them changed before it is appended. Rules (docs/design.md
section 5, issues "session engine" and 13):

- a candidate's memory id is uuid5(namespace, normalized statement) (``ledger.ids``); a
  candidate already recorded in its memory stream is skipped (it was activated by hand);
- an exact normalized duplicate of a retrievable memory reinforces it (importance raised to
  the maximum, tags and evidence merged);
- otherwise policy ``auto`` activates it; ``manual`` leaves it a candidate (model confidence
  never activates anything in manual mode);
- on activation, a memory with the same (subject, predicate) and another statement is
  superseded; a null predicate never matches anything; a fact under another predicate
  supersedes nothing; every memory named in ``supersedes`` is superseded; each one named
  in ``conflicts_with`` is marked on both items, both stay retrievable;
- valid time orders supersession: where both values carry ``occurred_at``, a value that
  occurred earlier than the current one never retires it: it is activated and superseded
  by the current value in the same command (history from the moment it is stored; the
  ``MemorySuperseded`` carries the current value's ``occurred_at``, so ``as-of --occurred``
  answers the old value for its own period). An explicit ``remember``/``correct`` has the
  valid time of its command's ``occurred_at`` (when the user said it). Where either lacks
  ``occurred_at`` (an undated command: the user's word is new), ledger order decides: the
  value reconciled last wins;
- a forget is a tombstone with a position and a time (``MemoryForgotten``): a candidate or
  command whose evidence was observed before it (transcript or command position lower than
  the forget's) never re-activates or reinforces the memory (not even once newer evidence
  made it active again); it is declined with reason code ``evidence_predates_forget``;
- valid time orders the tombstone too: a candidate whose ``occurred_at`` is earlier than the
  forget's time (the forget command's ``occurred_at``, else its ``recorded_at``; the latest
  of the memory's forgets) never re-activates or reinforces it either, however late it is
  recorded; it is declined with reason code ``evidence_older_than_forget``. A candidate
  without ``occurred_at`` is ordered by position alone. Evidence newer by both activates
  the memory anew. Explicit ``remember`` and ``correct`` are the user's word now, a new
  statement: only the position rule applies to them (their ``occurred_at`` orders their
  value among the other values, not against a forget);
- explicit commands, in ledger order with the candidates: ``remember`` activates (decision
  manual), ``correct`` activates and supersedes its target, ``forget`` forgets its target,
  ``pin`` pins it;
- a memory of another namespace reads as absent: nothing is ever written to it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Literal
from uuid import UUID

import msgspec

from memory_ledger.commands.canonical.memory_state import (
    RETRIEVABLE,
    MemoryStreamState,
    Status,
    fold_memory_history,
    fold_memory_stream,
    latest,
)
from memory_ledger.ledger.digests import IdDigests
from memory_ledger.ledger.events import (
    ActivationDecision,
    ActivationPolicy,
    CandidateExtracted,
    DeclinedCandidate,
    ExplicitCommandApplied,
    ExtractedItem,
    LedgerEvent,
    MemoryActivated,
    MemoryConflictMarked,
    MemoryForgotten,
    MemoryPinned,
    MemoryReinforced,
    MemorySuperseded,
    PendingExtraction,
    ReconciliationReport,
    SessionReconciled,
    SessionSealed,
)
from memory_ledger.ledger.ids import (
    Namespace,
    normalize_statement,
    subject_predicate_key,
)

__all__ = [
    "EVIDENCE_OLDER_THAN_FORGET",
    "EVIDENCE_PREDATES_FORGET",
    "IN_THIS_BATCH",
    "TARGET_SUPERSEDED",
    "RETRIEVABLE",
    "MemoryStreamState",
    "ReconciliationPlan",
    "Reconciler",
    "Status",
    "fold_memory_history",
    "fold_memory_stream",
    "occurred_earlier",
    "plan_finish",
    "subject_predicate_key",
]

EVIDENCE_PREDATES_FORGET = "evidence_predates_forget"
"""Reason code: the evidence was observed before the memory's forget (its tombstone)."""

TARGET_SUPERSEDED = "target_superseded"
"""Reason code: a forget, pin or correct whose target was superseded before the command was
reconciled (a concurrent correction); declined, not moved to the new value."""

EVIDENCE_OLDER_THAN_FORGET = "evidence_older_than_forget"
"""Reason code: the evidence was observed after the memory's forget, but its valid time
(``occurred_at``) is earlier than the forget's time: a forget is never undone by older
evidence."""

_NOT_YET_APPENDED = 2**63 - 1

IN_THIS_BATCH = _NOT_YET_APPENDED
"""The evidence position of a command appended in the same batch as its reconciliation (a
direct command): after every position that exists now."""

Cause = Literal["same_subject_predicate", "declared", "correction"]


def occurred_earlier(value: datetime | None, than: datetime | None) -> bool:
    """Whether valid time says ``value`` is older than ``than`` (both known, strictly
    earlier); False when either is unknown (ledger order then decides)."""
    return value is not None and than is not None and value < than


class ReconciliationPlan(msgspec.Struct, frozen=True):
    """The events one command appends (in one transaction) and its report."""

    events: tuple[LedgerEvent, ...]
    report: ReconciliationReport


def _merge(first: tuple[str, ...], second: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(dict.fromkeys((*first, *second)))


class Reconciler:
    """Plans memory events for candidates and commands of one session.

    :param load_memory: a memory's state folded from its ledger history (None if it does
        not exist or belongs to another namespace).
    :param same_key: ids of the memories ever activated under a (subject, predicate) key in
        this namespace (each is folded through ``load_memory``: only retrievable ones whose
        current key is that key hold it).
    :param digests: how the store derives memory ids (its keyring's
        :attr:`~memory_ledger.ledger.keyring.Keyring.digests`, as
        :attr:`~memory_ledger.commands.canonical.boundary.DecisionReads.digests`).
    :param evidence_position: the ledger position of the evidence of a candidate (its turn's
        transcript) or command (the command itself); None when unknown (treated as older
        than any forget).
    """

    def __init__(
        self,
        *,
        namespace: Namespace,
        session_id: str,
        load_memory: Callable[[UUID], MemoryStreamState | None],
        same_key: Callable[[tuple[str, str]], Sequence[UUID]],
        recorded_at: datetime,
        evidence_position: Callable[[CandidateExtracted | ExplicitCommandApplied], int | None]
        | None = None,
        digests: IdDigests,
    ) -> None:
        self.namespace = namespace
        self.digests = digests
        self.session_id = session_id
        self._load = load_memory
        self._same_key = same_key
        self._evidence = evidence_position or (lambda _entry: None)
        self.recorded_at = recorded_at
        self.events: list[LedgerEvent] = []
        self.states: dict[UUID, MemoryStreamState | None] = {}
        self.keys: dict[tuple[str, str], set[UUID]] = {}
        self.activated: list[UUID] = []
        self.reinforced: list[UUID] = []
        self.superseded: list[UUID] = []
        self.conflicts: list[UUID] = []
        self.forgotten: list[UUID] = []
        self.pinned: list[UUID] = []
        self.declined: list[DeclinedCandidate] = []
        self.left = 0

    # State ------------------------------------------------------------------------------

    def state(self, mid: UUID) -> MemoryStreamState | None:
        if mid not in self.states:
            self.states[mid] = self._load(mid)
        return self.states[mid]

    def current_under(self, key: tuple[str, str]) -> set[UUID]:
        """The memories that hold the match ``key`` now (retrievable, under that key), as
        planned so far; reading them puts the key in the decision's append condition."""
        return set(self._holders(key))

    def _holders(self, key: tuple[str, str]) -> set[UUID]:
        if key not in self.keys:
            holders = set()
            for mid in self._same_key(key):
                state = self.state(mid)
                if state is not None and state.retrievable and state.key == key:
                    holders.add(mid)
            self.keys[key] = holders
        return self.keys[key]

    def _base(self, mid: UUID) -> dict[str, object]:
        state = self.state(mid)
        assert state is not None
        state.version += 1
        return {
            "originator_id": mid,
            "originator_version": state.version,
            "recorded_at": self.recorded_at,
            "namespace": self.namespace,
            "session_id": self.session_id,
        }

    def _forgotten_after(
        self, state: MemoryStreamState | None, evidence: int | None, occurred: datetime | None
    ) -> str | None:
        """The reason code when the memory's tombstone postdates the evidence, else None:
        ``evidence_predates_forget`` when its latest forget's position is after ``evidence``
        (a position; None: unknown, treated as older), ``evidence_older_than_forget`` when
        ``occurred`` (its valid time; None: unknown, position alone decides) is earlier than
        the latest forget time. Such evidence never re-activates nor reinforces the memory,
        even after newer evidence made it active again."""
        if state is None:
            return None
        if state.forgotten_at is not None and (evidence is None or evidence < state.forgotten_at):
            return EVIDENCE_PREDATES_FORGET
        if occurred_earlier(occurred, state.forgotten_time):
            return EVIDENCE_OLDER_THAN_FORGET
        return None

    def _decline(self, source_id: UUID, mid: UUID, reason_code: str) -> None:
        self.declined.append(
            DeclinedCandidate(candidate_id=source_id, memory_id=mid, reason_code=reason_code)
        )

    # Outcomes ---------------------------------------------------------------------------

    def candidate(self, candidate: CandidateExtracted, policy: ActivationPolicy) -> None:
        """Reconcile one extracted candidate under ``policy``."""
        mid = self.digests.memory_id(self.namespace, normalize_statement(candidate.item.statement))
        state = self.state(mid)
        if state is not None and candidate.candidate_id in state.candidate_ids:
            return
        refused = self._forgotten_after(state, self._evidence(candidate), candidate.occurred_at)
        if refused is not None:
            self._decline(candidate.candidate_id, mid, refused)
            return
        if state is not None and state.retrievable:
            self.reinforce(mid, candidate.turn_id, candidate.candidate_id, candidate.item)
        elif policy == "auto":
            self.activate(
                candidate.item,
                turn_id=candidate.turn_id,
                source_id=candidate.candidate_id,
                decision="auto",
                occurred_at=candidate.occurred_at,
                evidence_position=self._evidence(candidate),
            )
        else:
            self.left += 1

    def reinforce(self, mid: UUID, turn_id: int, source_id: UUID, item: ExtractedItem) -> None:
        state = self.state(mid)
        assert state is not None
        importance = max(state.importance, item.importance)
        tags = _merge(state.tags, item.tags)
        evidence = _merge(state.evidence, item.evidence)
        self.events.append(
            MemoryReinforced(
                **self._base(mid),  # type: ignore[arg-type]
                turn_id=turn_id,
                candidate_id=source_id,
                importance=importance,
                tags=tags,
                evidence=evidence,
            )
        )
        state.importance, state.tags, state.evidence = importance, tags, evidence
        state.candidate_ids.add(source_id)
        self.reinforced.append(mid)

    def activate(
        self,
        item: ExtractedItem,
        *,
        turn_id: int,
        source_id: UUID,
        decision: ActivationDecision,
        occurred_at: datetime | None,
        decision_evidence: tuple[str, ...] = (),
        corrects: UUID | None = None,
        evidence_position: int | None = None,
        forget_by_time: bool = True,
    ) -> UUID | None:
        """Activate ``item`` (or reinforce its exact duplicate); supersede and mark conflicts.

        ``occurred_at`` is the value's valid time (None: unknown, ledger order decides).
        Returns the memory id, or None when the memory's tombstone postdates the evidence
        (declined, see the module doc): by ``evidence_position``, or by ``occurred_at``
        unless ``forget_by_time`` is False (explicit commands: only position orders them
        against a forget).
        """
        normalized = normalize_statement(item.statement)
        mid = self.digests.memory_id(self.namespace, normalized)
        state = self.state(mid)
        tombstone_time = occurred_at if forget_by_time else None
        refused = self._forgotten_after(state, evidence_position, tombstone_time)
        if refused is not None:
            self._decline(source_id, mid, refused)
            return None
        if state is not None and state.retrievable:
            self.reinforce(mid, turn_id, source_id, item)
            return mid
        version = (state.version if state is not None else 0) + 1
        self.events.append(
            MemoryActivated(
                originator_id=mid,
                originator_version=version,
                recorded_at=self.recorded_at,
                namespace=self.namespace,
                session_id=self.session_id,
                turn_id=turn_id,
                candidate_id=source_id,
                decision=decision,
                item=item,
                normalized=normalized,
                occurred_at=occurred_at,
                decision_evidence=decision_evidence,
            )
        )
        key = subject_predicate_key(item.subject, item.predicate)
        new_state = MemoryStreamState(
            version=version,
            status="active",
            importance=item.importance,
            tags=item.tags,
            evidence=item.evidence,
            key=key,
            candidate_ids={source_id},
            pinned=state.pinned if state is not None else False,
            namespace=self.namespace,
            occurred_at=occurred_at,
            item=item,
            forgotten_at=state.forgotten_at if state is not None else None,
            forgotten_time=state.forgotten_time if state is not None else None,
        )
        if state is not None:
            new_state.candidate_ids |= state.candidate_ids
        self.states[mid] = new_state
        self.activated.append(mid)
        if corrects is not None and corrects != mid:
            self.supersede(corrects, mid, turn_id, "correction")
        for raw in item.supersedes:
            try:
                declared = UUID(raw)
            except ValueError:
                continue
            if declared != mid:
                self.supersede(declared, mid, turn_id, "declared")
        if key is not None:
            self._take_key(key, mid, turn_id)
        for raw in item.conflicts_with:
            try:
                other_id = UUID(raw)
            except ValueError:
                continue
            self.conflict(mid, other_id, turn_id)
        return mid

    def _take_key(self, key: tuple[str, str], mid: UUID, turn_id: int) -> None:
        """Settle who holds ``key`` now that ``mid`` was activated under it: every holder
        that did not occur later than ``mid`` is superseded by it; if some holder occurred
        later, ``mid`` is history at once, superseded by the latest such holder."""
        holders = self._holders(key)
        current = self.states.get(mid)
        occurred = current.occurred_at if current is not None else None
        newer: list[tuple[datetime, UUID]] = []
        for other in sorted(holders - {mid}):
            other_state = self.state(other)
            assert other_state is not None
            if occurred_earlier(occurred, other_state.occurred_at):
                assert other_state.occurred_at is not None
                newer.append((other_state.occurred_at, other))
            else:
                self.supersede(other, mid, turn_id, "same_subject_predicate")
        if newer:
            _, latest = max(newer)
            self.supersede(mid, latest, turn_id, "same_subject_predicate", valid_time=True)
        else:
            holders.add(mid)

    def supersede(
        self,
        old: UUID,
        new: UUID,
        turn_id: int,
        cause: Cause,
        *,
        valid_time: bool = False,
    ) -> None:
        """Supersede ``old`` by ``new``. Valid time never lets an older value retire a newer
        one: a declared or corrected target that occurred later than ``new`` is left alone
        (``valid_time`` True: this IS that rule, retiring the older ``old``)."""
        state = self.state(old)
        if state is None or not state.retrievable or old == new:
            return
        new_state = self.state(new)
        occurred = new_state.occurred_at if new_state is not None else None
        if not valid_time and cause == "declared" and occurred_earlier(occurred, state.occurred_at):
            return
        self.events.append(
            MemorySuperseded(
                **self._base(old),  # type: ignore[arg-type]
                turn_id=turn_id,
                superseded_by=new,
                cause=cause,
                occurred_at=occurred,
            )
        )
        state.status = "superseded"
        state.superseded_by = new
        if state.key is not None:
            self._holders(state.key).discard(old)
        self.superseded.append(old)

    def conflict(self, mid: UUID, other: UUID, turn_id: int) -> None:
        other_state = self.state(other)
        if other_state is None or not other_state.retrievable or other == mid:
            return
        for this, that in ((mid, other), (other, mid)):
            state = self.state(this)
            assert state is not None
            self.events.append(
                MemoryConflictMarked(
                    **self._base(this),  # type: ignore[arg-type]
                    turn_id=turn_id,
                    conflicts_with=that,
                )
            )
            if state.status == "active":
                state.status = "conflicted"
        self.conflicts.extend((mid, other))

    def command(self, command: ExplicitCommandApplied) -> None:
        """Reconcile one explicit command (the user's word: decision ``manual``)."""
        position = self._evidence(command)
        target = command.target
        if target is not None and command.intent in ("forget", "pin", "correct"):
            # A target superseded since the command named it (a concurrent correction): the
            # command is declined, never moved to the memory that superseded it (the policy
            # of every surface, commands.canonical.boundary).
            state = self.state(target)
            if state is not None and state.status == "superseded":
                self._decline(command.command_id, target, TARGET_SUPERSEDED)
                return
        if command.intent in ("remember", "correct") and command.item is not None:
            self.activate(
                command.item,
                turn_id=command.turn_id,
                source_id=command.command_id,
                decision="manual",
                occurred_at=command.occurred_at,  # its valid time (None: ledger order)
                decision_evidence=(f"explicit:{command.intent}",),
                corrects=target if command.intent == "correct" else None,
                evidence_position=position,
                forget_by_time=False,
            )
            return
        if target is None:
            return
        state = self.state(target)
        if state is None or not state.retrievable:
            return
        if command.intent == "forget":
            # A command appended in this very batch has no position yet: 0 makes the
            # tombstone the MemoryForgotten's own position.
            self.forget(
                target,
                command.turn_id,
                command.command_id,
                0 if position is None or position >= IN_THIS_BATCH else position,
                forget_time=command.occurred_at or command.recorded_at,
            )
        elif command.intent == "pin" and not state.pinned:
            self.events.append(
                MemoryPinned(
                    **self._base(target),  # type: ignore[arg-type]
                    turn_id=command.turn_id,
                    command_id=command.command_id,
                )
            )
            state.pinned = True
            self.pinned.append(target)

    def forget(
        self,
        mid: UUID,
        turn_id: int,
        command: UUID,
        command_position: int,
        *,
        forget_time: datetime | None = None,
    ) -> None:
        """Forget the retrievable memory ``mid``: a tombstone at ``command_position`` (or at
        the event's own position when 0) and at ``forget_time`` (the forget command's
        ``occurred_at``, else its ``recorded_at``; None: this command's ``recorded_at``)."""
        state = self.state(mid)
        if state is None or not state.retrievable:
            return
        at = forget_time if forget_time is not None else self.recorded_at
        self.events.append(
            MemoryForgotten(
                **self._base(mid),  # type: ignore[arg-type]
                turn_id=turn_id,
                command_id=command,
                command_position=command_position,
                occurred_at=at,
            )
        )
        state.status = "forgotten"
        # Unknown own position: it will be after every position that exists now.
        state.forgotten_at = command_position or _NOT_YET_APPENDED
        state.forgotten_time = latest(state.forgotten_time, at)
        if state.key is not None:
            self._holders(state.key).discard(mid)
        self.forgotten.append(mid)

    def report(self, *, candidates: int, commands: int) -> ReconciliationReport:
        return ReconciliationReport(
            session_id=self.session_id,
            candidates=candidates,
            activated=tuple(self.activated),
            reinforced=tuple(self.reinforced),
            superseded=tuple(self.superseded),
            conflicts=tuple(self.conflicts),
            forgotten=tuple(self.forgotten),
            pinned=tuple(self.pinned),
            commands=commands,
            left_as_candidates=self.left,
            declined=tuple(self.declined),
        )


def plan_finish(
    reconciler: Reconciler,
    *,
    session_stream: UUID,
    session_version: int,
    items: Sequence[CandidateExtracted | ExplicitCommandApplied],
    policy: ActivationPolicy,
    pending: Sequence[PendingExtraction] = (),
    then: Callable[[Reconciler], None] | None = None,
    bookkeeping: bool = True,
) -> ReconciliationPlan:
    """The events of ``finish()``: SessionSealed, the memory events in ledger order of the
    session's candidates and commands, then SessionReconciled with the report (which names
    the turns still ``pending`` extraction). ``then`` is called with the reconciler after
    the candidates and commands, before the report: the memory events it plans there (an
    import restoring conflict marks and prunes, ``commands.canonical.restore``) follow
    them. ``bookkeeping`` False: the memory events only, without SessionSealed and
    SessionReconciled (a direct command's records carry what they say:
    ``DirectCommandApplied``)."""
    ns, sid, at = reconciler.namespace, reconciler.session_id, reconciler.recorded_at
    candidates = commands = 0
    for entry in sorted(items, key=lambda e: e.originator_version):
        if isinstance(entry, CandidateExtracted):
            candidates += 1
            reconciler.candidate(entry, policy)
        else:
            commands += 1
            reconciler.command(entry)
    if then is not None:
        then(reconciler)
    report = reconciler.report(candidates=candidates, commands=commands)
    if pending:
        report = msgspec.structs.replace(report, pending_extractions=tuple(pending))
    if not bookkeeping:
        return ReconciliationPlan(events=tuple(reconciler.events), report=report)
    sealed = SessionSealed(
        originator_id=session_stream,
        originator_version=session_version + 1,
        recorded_at=at,
        namespace=ns,
        session_id=sid,
    )
    reconciled = SessionReconciled(
        originator_id=session_stream,
        originator_version=session_version + 2,
        recorded_at=at,
        namespace=ns,
        session_id=sid,
        report=report,
    )
    return ReconciliationPlan(events=(sealed, *reconciler.events, reconciled), report=report)
