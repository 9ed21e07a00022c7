"""Session scripts (DESIGN.md section 7): JSON Lines of steps, replayed in order.

Each line is one step, a msgspec Struct tagged by ``op``: ``open``, ``turn``, ``command``,
``recall``, ``finish``. Every session starts with its own ``open``; the first line of a
script is an ``open``. Replaying a script twice into one store is a no-op the second time:
already observed turns and reconciled sessions are skipped, not errors.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.extraction import RecordedExtractor
from memory_ledger.commands.session import MemorySession
from memory_ledger.ledger.ids import InvalidNamespaceError, Namespace

__all__ = [
    "CommandStep",
    "FinishStep",
    "OpenStep",
    "RecallStep",
    "RunReport",
    "ScriptError",
    "Step",
    "TurnStep",
    "parse_script",
    "run_script",
]


class OpenStep(msgspec.Struct, tag_field="op", tag="open", forbid_unknown_fields=True):
    """Open (or resume) a session under a namespace."""

    session: str
    namespace: Namespace
    activation_policy: Literal["auto", "manual"] = "auto"


TurnId = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]


class TurnStep(msgspec.Struct, tag_field="op", tag="turn", forbid_unknown_fields=True):
    """A finalized turn: its transcript and the items the (recorded) extractor returns."""

    session: str
    turn: TurnId
    transcript: str
    occurred_at: datetime | None = None
    extracted: list[Any] = msgspec.field(default_factory=list)


class CommandStep(msgspec.Struct, tag_field="op", tag="command", forbid_unknown_fields=True):
    """An explicit user command (remember / forget / correct / pin)."""

    session: str
    turn: TurnId
    intent: Literal["remember", "forget", "correct", "pin"]
    statement: str


class RecallStep(msgspec.Struct, tag_field="op", tag="recall", forbid_unknown_fields=True):
    """A recall query served to the model in a turn."""

    session: str
    query: str
    turn: TurnId | None = None
    k: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 5


class FinishStep(msgspec.Struct, tag_field="op", tag="finish", forbid_unknown_fields=True):
    """Reconcile the session into canonical memory."""

    session: str


Step = OpenStep | TurnStep | CommandStep | RecallStep | FinishStep

_step_decoder = msgspec.json.Decoder(Step)


class ScriptError(ValueError):
    """A script line is malformed or out of order; ``line`` is 1-based."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


def parse_script(lines: Iterable[str | bytes]) -> list[tuple[int, Step]]:
    """Parse JSON Lines into ``(line number, step)`` pairs; blank lines are skipped.

    :raises ScriptError: a line is not a valid step, the first step is not an ``open``, or
        a step names a session that was not opened before it.
    """
    steps: list[tuple[int, Step]] = []
    opened: set[str] = set()
    for number, line in enumerate(lines, start=1):
        if number == 1:
            line = (
                line.removeprefix(b"\xef\xbb\xbf")
                if isinstance(line, bytes)
                else line.removeprefix("\ufeff")
            )
        if not line.strip():
            continue
        try:
            step = _step_decoder.decode(line)
        except msgspec.DecodeError as e:
            raise ScriptError(number, str(e)) from None
        if isinstance(step, OpenStep):
            try:
                step.namespace.validated()
            except InvalidNamespaceError as e:
                raise ScriptError(number, str(e)) from None
            opened.add(step.session)
        elif not steps:
            raise ScriptError(number, f"the first step must be an open, got {step_op(step)!r}")
        elif step.session not in opened:
            raise ScriptError(number, f"session {step.session!r} is used before its open")
        steps.append((number, step))
    if not steps:
        raise ScriptError(1, "the script has no steps")
    return steps


def step_op(step: Step) -> str:
    """The ``op`` tag of a step."""
    return str(type(step).__struct_config__.tag)


class RunReport(msgspec.Struct, kw_only=True):
    """What :func:`run_script` did (counts of this run; a re-run reports skips)."""

    steps: int = 0
    sessions_opened: int = 0
    turns_observed: int = 0
    turns_skipped: int = 0
    candidates: int = 0
    rejected: int = 0
    sessions_finished: int = 0
    sessions_already_finished: int = 0
    memories_activated: int = 0
    memories_reinforced: int = 0
    memories_superseded: int = 0
    commands_applied: int = 0
    commands_skipped: int = 0
    recalls: int = 0
    events_written: int = 0
    first_position: int = 0
    last_position: int = 0
    active_memories: int = 0
    seconds: float = 0.0


def run_script(
    engine: MemoryEngine,
    steps: Sequence[tuple[int, Step]],
    *,
    on_step: Callable[[int, Step], None] | None = None,
) -> RunReport:
    """Replay ``steps`` into ``engine``; return counts, positions and time taken.

    :raises ScriptError: a step cannot be applied (names the line and the cause).
    """
    started = time.perf_counter()
    head_before = engine.head
    appended_before = engine.appended
    report = RunReport(first_position=head_before)
    sessions: dict[str, tuple[MemorySession, RecordedExtractor]] = {}
    try:
        for number, step in steps:
            try:
                _apply(engine, step, sessions, report)
            except (ValueError, TypeError) as e:
                raise ScriptError(number, f"{type(e).__name__}: {e}") from e
            report.steps += 1
            if on_step is not None:
                on_step(number, step)
    finally:
        for session, _ in sessions.values():
            session.close()
    report.last_position = engine.head
    report.events_written = engine.appended - appended_before
    report.active_memories = engine.count_active_memories()
    report.seconds = time.perf_counter() - started
    return report


def _apply(
    engine: MemoryEngine,
    step: Step,
    sessions: dict[str, tuple[MemorySession, RecordedExtractor]],
    report: RunReport,
) -> None:
    if isinstance(step, OpenStep):
        extractor = RecordedExtractor()
        session = engine.session(
            step.namespace,
            step.session,
            extractor=extractor,
            activation_policy=step.activation_policy,
        )
        sessions[step.session] = (session, extractor)
        report.sessions_opened += 1
        return
    session, extractor = sessions[step.session]
    if isinstance(step, TurnStep):
        extractor.provide(step.turn, step.extracted)
        outcome = session.observe_final_transcript(step.turn, step.transcript, step.occurred_at)
        if outcome.already_observed and not outcome.extraction_position:
            report.turns_skipped += 1
        else:
            report.turns_observed += 1
            report.candidates += outcome.candidates
            report.rejected += outcome.rejected
    elif isinstance(step, RecallStep):
        session.recall(step.query, step.turn, step.k)
        report.recalls += 1
    elif isinstance(step, FinishStep):
        result = session.finish()
        if result.already_reconciled:
            report.sessions_already_finished += 1
        else:
            report.sessions_finished += 1
            report.memories_activated += len(result.activated)
            report.memories_reinforced += len(result.reinforced)
            report.memories_superseded += len(result.superseded)
    else:
        command = session.apply_explicit_command(step.intent, step.statement, step.turn)
        if command.already_applied:
            report.commands_skipped += 1
        else:
            report.commands_applied += 1
