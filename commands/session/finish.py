"""Reconciliation driving: ``finish`` (seal and reconcile once) and manual activation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import msgspec

from memory_ledger.commands.canonical.boundary import DecisionReads
from memory_ledger.commands.canonical.reconcile import (
    EVIDENCE_PREDATES_FORGET,
    Reconciler,
    plan_finish,
)
from memory_ledger.commands.errors import CommandRejectedError, ExtractionPendingError
from memory_ledger.commands.session.extraction import SessionExtraction
from memory_ledger.commands.session.stream import utc_now
from memory_ledger.commands.telemetry.spans import traced, traced_method
from memory_ledger.ledger.events import (
    ActivationDecision,
    LedgerEvent,
    ReconciliationReport,
)
from memory_ledger.ledger.faults import fault
from memory_ledger.ledger.ids import (
    normalize_statement,
)

__all__ = ["ActivationResult", "SessionFinish"]


class ActivationResult(msgspec.Struct, frozen=True, kw_only=True):
    """Result of ``activate_candidate``: the memory it became and what else it changed."""

    candidate_id: UUID
    memory_id: UUID
    decision: ActivationDecision
    superseded: tuple[UUID, ...]
    position: int


class SessionFinish:
    """Turns a session's candidates and commands into canonical memory.

    :param extraction: the session's extraction concern (``finish`` waits for its queue and
        names what is still pending).
    """

    def __init__(self, extraction: SessionExtraction) -> None:
        self.extraction = extraction
        self.stream = extraction.stream

    def _reconciler(self, reads: DecisionReads) -> Reconciler:
        """A reconciler that reads canonical memory from the LEDGER through ``reads`` (the
        decision's consistency boundary): memory histories with positions, and the values
        ever activated under a key; never a read model that may be stale."""
        return Reconciler(
            namespace=self.stream.namespace,
            session_id=self.stream.session_id,
            load_memory=reads.memory,
            same_key=reads.activated_under,
            recorded_at=utc_now(),
            evidence_position=self.stream.state.evidence_position,
            digests=reads.digests,
        )

    def finish(self, *, allow_pending: bool = False) -> ReconciliationReport:
        """Seal the session and reconcile it (:meth:`_finish` says how and what it
        raises), in an ``update_memory`` span (docs/observability.md)."""
        with traced(self.stream.engine, "session.finish", self.stream.namespace) as span:
            return span.result(self._finish(allow_pending=allow_pending))

    def _finish(self, *, allow_pending: bool = False) -> ReconciliationReport:
        """Seal the session and reconcile its candidates and commands, exactly once.

        Appends SessionSealed, the memory events and SessionReconciled in one transaction.
        Waits for queued background extractions first. A turn whose extraction is still
        pending (the extractor failed) would never become memory once the session is
        sealed, so by default nothing is written and :class:`ExtractionPendingError` names
        the turns and causes: retry them (``observe_final_transcript`` with the same
        transcript), then finish. ``allow_pending=True`` seals anyway; the report's
        ``pending_extractions`` then names the turns left out. Calling it again (in any
        process) returns the recorded report with ``already_reconciled=True`` and writes
        nothing.

        :raises ExtractionPendingError: turns are pending extraction and ``allow_pending``
            is False (nothing written).
        """
        self.extraction.wait_for_extractions()
        self.stream.refresh()
        pending = (
            self.extraction.pending_extraction_causes() if self.stream.state.report is None else ()
        )
        if pending and not allow_pending:
            raise ExtractionPendingError(self.stream.session_id, pending)

        def plan(reads: DecisionReads) -> list[LedgerEvent]:
            if self.stream.state.report is not None:
                return []
            events = list(
                plan_finish(
                    self._reconciler(reads),
                    session_stream=self.stream.stream_id,
                    session_version=self.stream.state.version,
                    items=[*self.stream.state.candidates, *self.stream.state.commands],
                    policy=self.stream.activation_policy,
                    pending=pending,
                ).events
            )
            fault("session.finish_planned")
            return events

        positions = self.stream.append_decision(plan)
        report = self.stream.state.report
        assert report is not None
        if positions:
            return msgspec.structs.replace(report, position=positions[-1])
        return msgspec.structs.replace(report, already_reconciled=True)

    @traced_method(
        "session.activate_candidate",
        lambda self, *_: (self.stream.engine, self.stream.namespace),
    )
    def activate_candidate(
        self, candidate: UUID | str, decision: ActivationDecision, evidence: Sequence[str]
    ) -> ActivationResult:
        """Activate one candidate by hand (manual policy): requires ``manual`` or
        ``verification`` decision evidence; model confidence never suffices.

        :raises CommandRejectedError: decision ``auto``, empty evidence, an unknown candidate,
            one already reconciled, or one whose evidence predates its memory's forget
            (reason ``evidence_predates_forget``: observed before it;
            ``evidence_older_than_forget``: its ``occurred_at`` is earlier than the forget's
            time, see ``commands.canonical.reconcile``).
        """
        self.stream.check_open()
        if decision not in ("manual", "verification"):
            msg = f"activation needs a manual or verification decision, got {decision!r}"
            raise CommandRejectedError(msg, "decision_not_allowed")
        proof = tuple(e for e in (str(x).strip() for x in evidence) if e)
        if not proof:
            raise CommandRejectedError("activation needs decision evidence", "missing_evidence")
        cid = UUID(str(candidate))
        self.stream.refresh()
        found = [c for c in self.stream.state.candidates if c.candidate_id == cid]
        if not found:
            msg = f"no candidate {cid} in session {self.stream.session_id!r}"
            raise CommandRejectedError(msg, "unknown_candidate")
        extracted = found[0]
        result: dict[str, Any] = {}

        def plan(reads: DecisionReads) -> list[LedgerEvent]:
            reconciler = self._reconciler(reads)
            target = reconciler.state(
                reads.digests.memory_id(
                    self.stream.namespace, normalize_statement(extracted.item.statement)
                )
            )
            if target is not None and cid in target.candidate_ids:
                return []
            mid = reconciler.activate(
                extracted.item,
                turn_id=extracted.turn_id,
                source_id=cid,
                decision=decision,
                occurred_at=extracted.occurred_at,
                decision_evidence=proof,
                evidence_position=self.stream.state.evidence_position(extracted),
            )
            result.update(
                memory_id=mid,
                superseded=tuple(reconciler.superseded),
                declined=tuple(reconciler.declined),
            )
            return reconciler.events

        positions = self.stream.append_decision(plan)
        if result.get("declined"):
            reason = result["declined"][0].reason_code
            when = "was observed" if reason == EVIDENCE_PREDATES_FORGET else "occurred"
            msg = (
                f"candidate {cid} {when} before its memory was forgotten; "
                "only evidence newer than a forget can make it active again"
            )
            raise CommandRejectedError(msg, reason)
        if not positions:
            msg = f"candidate {cid} is already reconciled"
            raise CommandRejectedError(msg, "already_reconciled")
        return ActivationResult(
            candidate_id=cid,
            memory_id=result["memory_id"],
            decision=decision,
            superseded=result["superseded"],
            position=positions[-1],
        )
