"""Explicit commands of a session (remember, forget, correct, pin; procedures) and pruning."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from memory_ledger.commands.canonical.boundary import DecisionReads, memory_of
from memory_ledger.commands.canonical.explicit_command import (
    SEARCHED,
    CommandResult,
    CommandSpec,
    Intent,
    TargetFacts,
    checked_intent,
    checked_statement,
    decide_command,
)
from memory_ledger.commands.errors import SessionSealedError, UnknownMemoryError
from memory_ledger.commands.recall.index import MemoryDoc, RecallScope
from memory_ledger.commands.session.recall import SessionRecall
from memory_ledger.commands.session.stream import check_turn_id, utc_now
from memory_ledger.commands.telemetry.spans import traced_method
from memory_ledger.ledger.arguments import check_aware
from memory_ledger.ledger.events import (
    ExplicitCommandApplied,
    ExtractedItem,
    LedgerEvent,
    MemoryPruned,
)
from memory_ledger.ledger.ids import as_memory_id, normalize_statement

if TYPE_CHECKING:
    from memory_ledger.commands.canonical.memory_state import MemoryStreamState

__all__ = ["CommandResult", "Intent", "SessionCommands"]


def _stream_of(session: SessionCommands, *_: object) -> tuple[object, object]:
    """The engine and namespace of a session command's span."""
    return session.stream.engine, session.stream.namespace


class SessionCommands:
    """What the user (or host) tells memory explicitly, and curation by pruning.

    :param recall: the session's recall concern (a target named by words is searched among
        the session's live memories).
    """

    def __init__(self, recall: SessionRecall) -> None:
        self.recall = recall
        self.stream = recall.stream

    def pending_explicit_commands(self) -> list[ExplicitCommandApplied]:
        """The explicit commands of this session not yet reconciled into canonical memory."""
        state = self.stream.refresh()
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

        What it does, its times and the errors it raises are documented once, on the public
        face that delegates here: ``MemorySession.apply_explicit_command``
        (:mod:`memory_ledger.commands.session.memory_session`).
        """
        self.stream.check_open()
        check_turn_id(turn_id)
        if occurred_at is not None:
            check_aware("occurred_at", occurred_at)
        intent = checked_intent(intent)
        text = checked_statement(statement, "statement")
        cid = self.stream.engine.keyring.digests.command_id(
            self.stream.namespace, self.stream.stream_id, turn_id, intent, text
        )
        self.stream.refresh()
        if occurred_at is None and turn_id in self.stream.state.observed:
            occurred_at = self.stream.state.observed[turn_id].occurred_at
        previous = [c for c in self.stream.state.commands if c.command_id == cid]
        if previous:
            return CommandResult(
                command_id=cid,
                intent=intent,
                target=previous[0].target,
                position=0,
                already_applied=True,
            )
        if self.stream.state.sealed:
            msg = f"session {self.stream.session_id!r} is finished; commands are not accepted"
            raise SessionSealedError(msg)
        wanted: UUID | None = None
        if target is not None and intent != "remember":
            wanted = as_memory_id(target)
            if wanted is None:
                raise UnknownMemoryError(str(target))
        spec = CommandSpec(
            intent=intent,
            text=text,
            item=item,
            target=wanted,
            words=text if wanted is None and intent in ("forget", "pin") else None,
        )
        decided = decide_command(spec, _SessionReads(self))
        with self.stream.lock:

            def applied() -> list[LedgerEvent]:
                if any(c.command_id == cid for c in self.stream.state.commands):
                    return []
                self.stream.start_plan()
                return [
                    ExplicitCommandApplied(
                        **self.stream.envelope(),
                        turn_id=turn_id,
                        command_id=cid,
                        intent=intent,
                        statement=text,
                        target=decided.target,
                        item=decided.item,
                        occurred_at=occurred_at,
                    )
                ]

            positions = self.stream.append_once(applied)
        return CommandResult(
            command_id=cid,
            intent=intent,
            target=decided.target,
            position=positions[-1] if positions else 0,
        )

    def carried_facts(self, target: UUID, doc: MemoryDoc | None) -> TargetFacts | None:
        """What a ``correct`` of ``target`` keeps of it (issue 13 item 4): read from the
        ledger for a canonical memory (reinforced tags and importance included), from this
        session for a session fact (``doc``: the session's own document of it)."""
        state = memory_of(self.stream.engine, self.stream.namespace, target)
        if state is not None and state.item is not None:
            return TargetFacts.of_state(state)
        items: list[ExtractedItem | None] = [c.item for c in self.stream.state.candidates]
        items += [c.item for c in self.stream.state.commands]
        for entry_item in reversed(items):
            if (
                entry_item is not None
                and self.stream.engine.keyring.digests.memory_id(
                    self.stream.namespace, normalize_statement(entry_item.statement)
                )
                == target
            ):
                return TargetFacts(
                    item=entry_item,
                    tags=entry_item.tags,
                    evidence=entry_item.evidence,
                    importance=entry_item.importance,
                )
        if doc is None:
            return None
        return TargetFacts(
            item=None, tags=doc.tags, evidence=doc.evidence, importance=doc.importance
        )

    @traced_method("session.remember_success", _stream_of)
    def remember_success(self, task: str, tools: Sequence[str], outcome: str) -> CommandResult:
        """Record a reusable workflow that worked (procedural memory, explicit)."""
        statement = f"{task}: {outcome}"
        if tools:
            statement += f" (tools: {', '.join(tools)})"
        return self._remember_procedure(task, statement, "workflow", tools)

    @traced_method("session.remember_failure", _stream_of)
    def remember_failure(self, task: str, error: str, tools: Sequence[str]) -> CommandResult:
        """Record a failure lesson (procedural memory, explicit)."""
        statement = f"{task} failed: {error}"
        if tools:
            statement += f" (tools: {', '.join(tools)})"
        return self._remember_procedure(task, statement, "failure", tools)

    def _remember_procedure(
        self, task: str, statement: str, source: str, tools: Sequence[str]
    ) -> CommandResult:
        turn = self.stream.state.current_turn or 0
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

    @traced_method("session.prune", _stream_of)
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
        self.stream.check_open()
        ns = self.stream.namespace
        rows = self.stream.engine.prunable_memories(ns, max_importance, max_uses)
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
                        session_id=self.stream.session_id,
                        rule=f"importance<{max_importance},uses<={max_uses}",
                    )
                )
                pruned.append(mid)
            return events

        self.stream.append_decision(plan)
        return list(pruned)


class _SessionReads:
    """The reads of a session's explicit command
    (:class:`~memory_ledger.commands.canonical.explicit_command.CommandReads`): a target id from
    the ledger (another namespace's reads as unknown), words among the session's live memories
    (canonical and this session's facts, lexical only: a word must be in the memory itself), what
    a correction keeps from the ledger or the session."""

    def __init__(self, session: SessionCommands) -> None:
        self._session = session
        self._reads = DecisionReads(session.stream.engine, session.stream.namespace)

    def state(self, memory: UUID) -> MemoryStreamState | None:
        return self._reads.memory(memory)

    def head(self, memory: UUID) -> UUID | None:
        return self._reads.head(memory)

    def searched(self, words: str) -> list[MemoryDoc]:
        matches, _ = self._session.recall.live(
            words, SEARCHED, RecallScope(), None, None, semantic=False
        )
        return [doc for doc, _score in matches][:SEARCHED]

    def chosen(self, doc: MemoryDoc) -> None:
        """Nothing to check: a session's command is reconciled (and re-checked) at finish."""

    def facts(self, target: UUID, doc: MemoryDoc | None) -> TargetFacts | None:
        return self._session.carried_facts(target, doc)
