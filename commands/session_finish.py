"""Reconciliation driving: ``finish`` (seal and reconcile once) and manual activation."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import UUID

import msgspec

from memory_ledger.commands.errors import CommandRejectedError
from memory_ledger.commands.reconcile import (
    Reconciler,
    fold_memory_stream,
    plan_finish,
    subject_predicate_key,
)
from memory_ledger.commands.session_extraction import SessionExtraction
from memory_ledger.commands.session_stream import utc_now
from memory_ledger.ledger.events import (
    ActivationDecision,
    LedgerEvent,
    ReconciliationReport,
)
from memory_ledger.ledger.faults import fault
from memory_ledger.ledger.ids import (
    memory_id,
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


class SessionFinish(SessionExtraction):
    """Turns a session's candidates and commands into canonical memory."""

    def _reconciler(self) -> Reconciler:
        ns = self.namespace
        holders: dict[tuple[str, str], list[UUID]] = {}
        for doc in self.engine.retrievable_memories(ns):
            doc_key = subject_predicate_key(doc.subject, doc.predicate)
            if doc_key is not None:
                holders.setdefault(doc_key, []).append(UUID(doc.memory_id))

        def same_key(key: tuple[str, str]) -> list[UUID]:
            # From the in-process index of retrievable memories (no query per key); every id
            # is re-checked against its ledger stream by the reconciler.
            return sorted(holders.get(key, ()))

        return Reconciler(
            namespace=ns,
            session_id=self.session_id,
            load_memory=lambda mid: fold_memory_stream(self.engine.load_stream(mid)),
            same_key=same_key,
            recorded_at=utc_now(),
        )

    def finish(self) -> ReconciliationReport:
        """Seal the session and reconcile its candidates and commands, exactly once.

        Appends SessionSealed, the memory events and SessionReconciled in one transaction.
        Waits for queued background extractions first; turns whose extraction is still
        pending (the extractor failed) are named with the cause in the report's
        ``pending_extractions`` and are not part of the reconciliation. Calling it again
        (in any process) returns the recorded report with ``already_reconciled=True`` and
        writes nothing.
        """
        self.wait_for_extractions()
        self.refresh()
        pending = self.pending_extraction_causes() if self.state.report is None else ()

        def plan() -> list[LedgerEvent]:
            if self.state.report is not None:
                return []
            events = list(
                plan_finish(
                    self._reconciler(),
                    session_stream=self.stream_id,
                    session_version=self.state.version,
                    items=[*self.state.candidates, *self.state.commands],
                    policy=self.activation_policy,
                    pending=pending,
                ).events
            )
            fault("session.finish_planned")
            return events

        positions = self._append_once(plan)
        report = self.state.report
        assert report is not None
        if positions:
            return msgspec.structs.replace(report, position=positions[-1])
        return msgspec.structs.replace(report, already_reconciled=True)

    def activate_candidate(
        self, candidate: UUID | str, decision: ActivationDecision, evidence: Sequence[str]
    ) -> ActivationResult:
        """Activate one candidate by hand (manual policy): requires ``manual`` or
        ``verification`` decision evidence; model confidence never suffices.

        :raises CommandRejectedError: decision ``auto``, empty evidence, an unknown candidate,
            or one already reconciled.
        """
        self._check_open()
        if decision not in ("manual", "verification"):
            msg = f"activation needs a manual or verification decision, got {decision!r}"
            raise CommandRejectedError(msg, "decision_not_allowed")
        proof = tuple(e for e in (str(x).strip() for x in evidence) if e)
        if not proof:
            raise CommandRejectedError("activation needs decision evidence", "missing_evidence")
        cid = UUID(str(candidate))
        self.refresh()
        found = [c for c in self.state.candidates if c.candidate_id == cid]
        if not found:
            msg = f"no candidate {cid} in session {self.session_id!r}"
            raise CommandRejectedError(msg, "unknown_candidate")
        extracted = found[0]
        result: dict[str, Any] = {}

        def plan() -> list[LedgerEvent]:
            reconciler = self._reconciler()
            target = reconciler.state(
                memory_id(self.namespace, normalize_statement(extracted.item.statement))
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
            )
            result.update(memory_id=mid, superseded=tuple(reconciler.superseded))
            return reconciler.events

        positions = self._append_once(plan)
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
