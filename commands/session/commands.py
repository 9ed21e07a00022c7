"""Explicit commands of a session (remember, forget, correct, pin; procedures) and pruning."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

import msgspec

from memory_ledger.commands.canonical.boundary import DecisionReads, memory_of
from memory_ledger.commands.errors import (
    CommandRejectedError,
    SessionSealedError,
    SupersededTargetError,
    UnknownMemoryError,
)
from memory_ledger.commands.extraction.validation import Rejection, has_visible_text, validate_item
from memory_ledger.commands.recall.index import (
    MemoryDoc,
    RecallScope,
)
from memory_ledger.commands.recall.lexical import shares_term
from memory_ledger.commands.secrets import redact
from memory_ledger.commands.session.recall import SessionRecall
from memory_ledger.commands.session.stream import check_turn_id, utc_now
from memory_ledger.ledger.arguments import check_aware, forbidden_character
from memory_ledger.ledger.events import (
    ExplicitCommandApplied,
    ExtractedItem,
    LedgerEvent,
    MemoryPruned,
)
from memory_ledger.ledger.ids import as_memory_id, command_id, memory_id, normalize_statement

__all__ = ["CommandResult", "Intent", "SessionCommands"]

Intent = Literal["remember", "forget", "correct", "pin"]


class CommandResult(msgspec.Struct, frozen=True, kw_only=True):
    """Result of an explicit command: its id, the memory it targets, the position written."""

    command_id: UUID
    intent: Intent
    target: UUID | None
    position: int
    already_applied: bool = False


class SessionCommands(SessionRecall):
    """What the user (or host) tells memory explicitly, and curation by pruning."""

    def pending_explicit_commands(self) -> list[ExplicitCommandApplied]:
        """The explicit commands of this session not yet reconciled into canonical memory."""
        state = self.refresh()
        return [] if state.report is not None else list(state.commands)

    def apply_explicit_command(
        self,
        intent: Intent,
        statement: str,
        turn_id: int,
        *,
        item: ExtractedItem | dict[str, Any] | None = None,
        target: UUID | str | None = None,
        occurred_at: datetime | None = None,
    ) -> CommandResult:
        """Apply an explicit memory command from the user (remember, forget, correct, pin).

        The event is appended before the session overlay changes; it takes effect in this
        session at once and in canonical memory at ``finish()``. ``forget``/``pin``/
        ``correct`` target the best lexical match among retrievable memories; ``correct``
        keeps the target's subject and predicate so it supersedes it. ``item`` lets a host
        give the structured memory for remember/correct; ``target`` names the memory of a
        forget/pin/correct by id instead of by its words.

        ``occurred_at`` (an aware datetime) is when the user said it in the conversation;
        when None, the ``occurred_at`` of turn ``turn_id``'s transcript if this session
        observed it already, else unknown. It is recorded in the command and gives a
        ``forget`` its time: evidence whose valid time is earlier than the forget's time
        (this ``occurred_at``, else the command's ``recorded_at``) never re-activates the
        forgotten memory (``commands.canonical.reconcile``, rule "a forget is never undone by older
        evidence"). For a ``remember``/``correct`` it is the new value's valid time: an
        older value imported later never retires it (without a time, ledger order decides);
        against a forget only the command's position counts (a new statement by the user).

        :raises CommandRejectedError: unknown intent, empty statement, a secret in it, or an
            item that fails validation (the reason code is in the message).
        :raises UnknownMemoryError: ``target`` names no retrievable memory of this
            session's namespace (another namespace's id behaves exactly like an unknown one).
        :raises InvalidArgumentTypeError: ``occurred_at`` is not a datetime.
        :raises NaiveDatetimeError: ``occurred_at`` has no time zone.
        """
        self._check_open()
        check_turn_id(turn_id)
        if occurred_at is not None:
            check_aware("occurred_at", occurred_at)
        if intent not in ("remember", "forget", "correct", "pin"):
            msg = f"unknown intent {intent!r}: expected remember, forget, correct or pin"
            raise CommandRejectedError(msg, "unknown_intent")
        raw = str(statement)
        text = " ".join(raw.split())
        if not text or not has_visible_text(text):
            raise CommandRejectedError("the command's statement is empty", "empty_statement")
        forbidden = forbidden_character(raw, line_breaks=True)
        if forbidden is not None:
            msg = (
                f"the command's statement holds {forbidden}; control characters and "
                "bidirectional overrides are refused"
            )
            raise CommandRejectedError(msg, "forbidden_character")
        if redact(text).count:
            msg = "the command's statement holds a secret-shaped value; nothing was recorded"
            raise CommandRejectedError(msg, "secret_detected")
        cid = command_id(self.stream_id, turn_id, intent, text)
        self.refresh()
        if occurred_at is None and turn_id in self.state.observed:
            occurred_at = self.state.observed[turn_id].occurred_at
        previous = [c for c in self.state.commands if c.command_id == cid]
        if previous:
            return CommandResult(
                command_id=cid,
                intent=intent,
                target=previous[0].target,
                position=0,
                already_applied=True,
            )
        if self.state.sealed:
            msg = f"session {self.session_id!r} is finished; commands are not accepted"
            raise SessionSealedError(msg)
        target_doc: MemoryDoc | None = None
        if target is not None and intent in ("forget", "pin", "correct"):
            # A superseded id is refused, naming the current value (the policy of every
            # surface, commands.canonical.boundary); finish() declines it if superseded by then.
            target_doc = self.engine.retrievable_memory(self.namespace, target)
            if target_doc is None:
                wanted = as_memory_id(target)
                reads = DecisionReads(self.engine, self.namespace)
                seen = reads.memory(wanted) if wanted is not None else None
                if wanted is not None and seen is not None and seen.status == "superseded":
                    raise SupersededTargetError(wanted, reads.head(wanted))
            if target_doc is None:
                raise UnknownMemoryError(str(target))
        target = None if target_doc is None else UUID(target_doc.memory_id)
        if target is None and intent in ("forget", "pin", "correct"):
            # The target must share a word with the command in its own subject or statement:
            # a word found only in its source transcript (document expansion) does not count.
            matches, _ = self._live(text, 10, RecallScope(), None, None, semantic=False)
            for doc, _score in matches:
                if shares_term(text, doc.subject, doc.statement):
                    target_doc = doc
                    target = UUID(doc.memory_id)
                    break
        resolved: ExtractedItem | None = None
        if intent in ("remember", "correct"):
            resolved = self._command_item(intent, text, item, target_doc)
        with self._lock:

            def applied() -> list[LedgerEvent]:
                if any(c.command_id == cid for c in self.state.commands):
                    return []
                self._start_plan()
                return [
                    ExplicitCommandApplied(
                        **self._base(),
                        turn_id=turn_id,
                        command_id=cid,
                        intent=intent,
                        statement=text,
                        target=target,
                        item=resolved,
                        occurred_at=occurred_at,
                    )
                ]

            positions = self._append_once(applied)
        return CommandResult(
            command_id=cid,
            intent=intent,
            target=target,
            position=positions[-1] if positions else 0,
        )

    def _command_item(
        self,
        intent: Intent,
        text: str,
        item: ExtractedItem | dict[str, Any] | None,
        target: MemoryDoc | None,
    ) -> ExtractedItem:
        raw: Any
        if intent == "correct" and target is not None:
            raw = self._carried_over(text, target)
            raw.update(_supplied(item))
        elif item is None:
            raw = {
                "kind": "semantic",
                "subject": None,
                "predicate": None,
                "value": None,
                "statement": text,
                "source": "fact",
                "scope": target.scope if target else "user",
                "reason": f"the user explicitly asked to {intent} this",
                "importance": 0.9,
                "confidence": 1.0,
            }
        else:
            raw = item
        outcome = validate_item(raw)
        if isinstance(outcome, Rejection):
            msg = f"the command's item was rejected ({outcome.reason_code}): {outcome.detail}"
            raise CommandRejectedError(msg, outcome.reason_code, parameter=outcome.field)
        return outcome

    def _carried_over(self, text: str, target: MemoryDoc) -> dict[str, Any]:
        """The item a ``correct`` of ``target`` starts from (issue 13 item 4): the target's
        subject, predicate, kind, source, scope, reason, tags, evidence (its provenance) and
        importance, with the correction's statement, no value (the old one is what is being
        corrected) and the user's confidence. Read from the ledger for a canonical memory
        (reinforced tags and importance included), from this session for a session fact."""
        base: ExtractedItem | None = None
        tags, evidence, importance = target.tags, target.evidence, target.importance
        state = memory_of(self.engine, self.namespace, UUID(target.memory_id))
        if state is not None and state.item is not None:
            base = state.item
            tags, evidence, importance = state.tags, state.evidence, state.importance
        else:
            items: list[ExtractedItem | None] = [c.item for c in self.state.candidates]
            items += [c.item for c in self.state.commands]
            for entry_item in reversed(items):
                if (
                    entry_item is not None
                    and str(memory_id(self.namespace, normalize_statement(entry_item.statement)))
                    == target.memory_id
                ):
                    base = entry_item
                    tags, evidence = entry_item.tags, entry_item.evidence
                    importance = entry_item.importance
                    break
        return {
            "kind": base.kind if base else "semantic",
            "subject": target.subject,
            "predicate": target.predicate,
            "value": None,
            "statement": text,
            "source": base.source if base else "fact",
            "scope": base.scope if base else target.scope,
            "reason": base.reason if base else "the user explicitly asked to correct this",
            "importance": importance,
            "confidence": 1.0,
            "tags": list(tags),
            "evidence": list(evidence),
        }

    def remember_success(self, task: str, tools: Sequence[str], outcome: str) -> CommandResult:
        """Record a reusable workflow that worked (procedural memory, explicit)."""
        statement = f"{task}: {outcome}"
        if tools:
            statement += f" (tools: {', '.join(tools)})"
        return self._remember_procedure(task, statement, "workflow", tools)

    def remember_failure(self, task: str, error: str, tools: Sequence[str]) -> CommandResult:
        """Record a failure lesson (procedural memory, explicit)."""
        statement = f"{task} failed: {error}"
        if tools:
            statement += f" (tools: {', '.join(tools)})"
        return self._remember_procedure(task, statement, "failure", tools)

    def _remember_procedure(
        self, task: str, statement: str, source: str, tools: Sequence[str]
    ) -> CommandResult:
        turn = self.state.current_turn or 0
        item = {
            "kind": "procedural",
            "subject": task,
            "predicate": None,
            "value": None,
            "statement": statement,
            "source": source,
            "scope": "workspace",
            "reason": "reusable procedure recorded by the host",
            "importance": 0.8,
            "confidence": 0.9,
            "tags": list(tools),
        }
        return self.apply_explicit_command("remember", statement, turn, item=item)

    def prune(
        self,
        *,
        older_than: datetime | None = None,
        max_importance: float = 0.75,
        max_uses: int = 2,
    ) -> list[UUID]:
        """Prune stale, low-importance memories of this namespace (MemoryPruned).

        Never prunes pinned items, frequently recalled/admitted/used ones (more than
        ``max_uses``), consolidated ones (reinforced, or superseding another) or ones carrying
        relations (supersedes, conflicts). ``older_than`` bounds the last update (recorded
        time, an aware datetime); None means any age. Candidates come from the read model;
        each one is re-checked against its ledger history and the prunes are appended under
        their append condition (``commands.canonical.boundary``). Returns the pruned memory ids.

        :raises NaiveDatetimeError: (an ``InvalidArgumentError``) ``older_than`` is naive.
        :raises InvalidArgumentTypeError: ``older_than`` is not a datetime.
        """
        if older_than is not None:
            check_aware("older_than", older_than)
        self._check_open()
        ns = self.namespace
        rows = self.engine.prunable_memories(ns, max_importance, max_uses)
        if older_than is not None:
            rows = [r for r in rows if r["activated_at"] is None or r["activated_at"] < older_than]
        pruned: list[UUID] = []

        def plan(reads: DecisionReads) -> list[LedgerEvent]:
            pruned.clear()
            events: list[LedgerEvent] = []
            at = utc_now()
            for row in rows:
                mid = UUID(row["memory_id"])
                state = reads.memory(mid)
                if state is None or state.status != "active" or state.pinned:
                    continue
                events.append(
                    MemoryPruned(
                        originator_id=mid,
                        originator_version=state.version + 1,
                        recorded_at=at,
                        namespace=ns,
                        session_id=self.session_id,
                        rule=f"importance<{max_importance},uses<={max_uses}",
                    )
                )
                pruned.append(mid)
            return events

        self._append_decision(plan)
        return list(pruned)


_NOT_SUPPLIED: tuple[object, ...] = (None, (), [])


def _supplied(item: ExtractedItem | dict[str, Any] | None) -> dict[str, Any]:
    """The fields a correction's ``item`` actually supplies: every key of a dict; the
    fields of an ``ExtractedItem`` that are not empty (None or an empty tuple)."""
    if item is None:
        return {}
    if isinstance(item, dict):
        return dict(item)
    fields = msgspec.structs.asdict(item)
    return {k: v for k, v in fields.items() if not any(v == e for e in _NOT_SUPPLIED)}
