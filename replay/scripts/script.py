"""Session scripts (docs/design.md): JSON Lines of steps, replayed in order.

Each line is one step, a msgspec Struct tagged by ``op``: ``open``, ``turn``, ``command``,
``recall``, ``finish``. Every session starts with its own ``open``; the first line of a
script is an ``open``. Replaying a script twice into one store is a no-op the second time:
already observed turns, applied commands and reconciled sessions are skipped, not errors,
and ``recall`` steps write nothing unless asked to (``record_recalls``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.commands.errors import CommandRejectedError
from memory_ledger.commands.extraction.base import Extractor, RecordedExtractor
from memory_ledger.commands.secrets import redact
from memory_ledger.commands.session.memory_session import MemorySession
from memory_ledger.ledger.arguments import NESTED_TOO_DEEP
from memory_ledger.ledger.errors import MemoryLedgerError
from memory_ledger.ledger.ids import InvalidNamespaceError, Namespace, check_session_id

__all__ = [
    "CommandStep",
    "FinishStep",
    "OpenStep",
    "PendingTurn",
    "RecallStep",
    "RefusedCommand",
    "RejectedItem",
    "RunReport",
    "ScriptError",
    "SessionNamespaceMismatchError",
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
    """An explicit user command (remember / forget / correct / pin); ``occurred_at`` is
    when it was said (default: its turn's, when that turn was observed first)."""

    session: str
    turn: TurnId
    intent: Literal["remember", "forget", "correct", "pin"]
    statement: str
    occurred_at: datetime | None = None


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


class ScriptError(MemoryLedgerError, ValueError):
    """A script line is malformed or out of order; ``line`` is 1-based."""

    reason_code = "bad_script"

    def __init__(self, line: int, message: str, *, reason_code: str | None = None) -> None:
        super().__init__(f"line {line}: {message}", reason_code=reason_code)
        self.line = line


class SessionNamespaceMismatchError(ScriptError):
    """An ``open`` names a session id the script already opened under another namespace
    (a session id names one session of one namespace in a script: never rebound)."""

    reason_code = "session_namespace_mismatch"

    def __init__(self, line: int, session: str, first: Namespace, other: Namespace) -> None:
        super().__init__(
            line,
            f"session {session!r} was opened under namespace {_label(first)}; this open "
            f"names {_label(other)} (use another session id for another namespace)",
        )
        self.session = session


def _label(namespace: Namespace) -> str:
    return f"{namespace.tenant}/{namespace.principal}/{namespace.scope_id}"


def parse_script(lines: Iterable[str | bytes]) -> list[tuple[int, Step]]:
    """Parse JSON Lines into ``(line number, step)`` pairs; blank lines are skipped.

    :raises ScriptError: a line is not a valid step, the first step is not an ``open``, a
        step names a session that was not opened before it, or a session id is invalid
        (:func:`~memory_ledger.ledger.ids.check_session_id`; the error's ``reason_code`` is
        the check's, e.g. ``forbidden_character``, and its message names ``session_id``).
    :raises SessionNamespaceMismatchError: (a ``ScriptError``, reason code
        ``session_namespace_mismatch``) an ``open`` names a session opened before under
        another namespace.
    """
    steps: list[tuple[int, Step]] = []
    opened: dict[str, Namespace] = {}
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
        except RecursionError:
            raise ScriptError(number, NESTED_TOO_DEEP) from None
        try:
            check_session_id(step.session)
        except InvalidNamespaceError as e:
            raise ScriptError(number, str(e), reason_code=e.reason_code) from None
        if isinstance(step, OpenStep):
            try:
                step.namespace.validated()
            except InvalidNamespaceError as e:
                raise ScriptError(number, str(e)) from None
            first = opened.setdefault(step.session, step.namespace)
            if first != step.namespace:
                raise SessionNamespaceMismatchError(number, step.session, first, step.namespace)
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


class RejectedItem(msgspec.Struct, frozen=True, kw_only=True):
    """An extracted item validation refused: where it was and its reason code."""

    session: str
    turn: int
    index: int
    reason_code: str
    detail: str


class RefusedCommand(msgspec.Struct, frozen=True, kw_only=True):
    """A ``command`` step the engine refused (nothing recorded): where it was, its intent,
    the reason code (e.g. ``secret_detected``) and the refusal's message (redacted)."""

    session: str
    turn: int
    line: int
    intent: str
    reason_code: str
    detail: str


class PendingTurn(msgspec.Struct, frozen=True, kw_only=True):
    """A turn whose evidence is recorded but whose extraction is not, and why."""

    session: str
    turn: int
    reason_code: str
    detail: str


class RunReport(msgspec.Struct, kw_only=True):
    """What :func:`run_script` did: counts of this run (a re-run counts skips instead).

    ``head_before``/``head_after`` are the ledger head (last position, 0 when empty) before
    and after the run; ``events_written`` the events this run appended. ``rejections``
    names every item of this run's turns that validation refused, with its reason code;
    ``pending_extractions`` every turn whose extraction failed (the cause in
    ``reason_code``/``detail``); ``sessions_left_open`` the sessions whose ``finish`` was
    not run because of them (run the script again to retry and reconcile them).
    ``recalls_recorded`` counts the recall steps written as RecallServed
    (``record_recalls``).

    Turns: ``turns_observed`` counts the turns whose evidence (TranscriptObserved) this run
    wrote, ``turns_already_recorded`` those it found already written (by an earlier run,
    or by another run of the script at the same time); the two add up to the script's turn
    steps, and over runs that overlap, each turn is counted observed by exactly one.
    Commands: ``commands_applied`` written by this run, ``commands_skipped`` found applied,
    ``commands_refused`` refused by the engine (nothing recorded; each in ``refusals`` with
    its reason code, e.g. ``secret_detected``); the rest of the script goes on.
    """

    steps: int = 0
    sessions_opened: int = 0
    turns_observed: int = 0
    turns_already_recorded: int = 0
    candidates: int = 0
    rejected: int = 0
    sessions_finished: int = 0
    sessions_already_finished: int = 0
    memories_activated: int = 0
    memories_reinforced: int = 0
    memories_superseded: int = 0
    commands_applied: int = 0
    commands_skipped: int = 0
    commands_refused: int = 0
    recalls: int = 0
    recalls_recorded: int = 0
    recorded_items_ignored: int = 0
    events_written: int = 0
    head_before: int = 0
    head_after: int = 0
    active_memories: int = 0
    seconds: float = 0.0
    rejections: list[RejectedItem] = msgspec.field(default_factory=list)
    refusals: list[RefusedCommand] = msgspec.field(default_factory=list)
    pending_extractions: list[PendingTurn] = msgspec.field(default_factory=list)
    sessions_left_open: list[str] = msgspec.field(default_factory=list)


class _Opened:
    """A session the script opened, its recorded items, and the turns this run observed."""

    def __init__(self, session: MemorySession, recorded: RecordedExtractor | None) -> None:
        self.session = session
        self.recorded = recorded
        self.observed: set[int] = set()
        self.collected = False


def run_script(
    engine: MemoryEngine,
    steps: Sequence[tuple[int, Step]],
    *,
    on_step: Callable[[int, Step], None] | None = None,
    extractor: Extractor | None = None,
    record_recalls: bool = False,
) -> RunReport:
    """Replay ``steps`` into ``engine``; return counts, positions and time taken.

    :param on_step: called after each step with its line number and the step.
    :param extractor: extract every turn with this extractor (e.g. a model behind
        :class:`~memory_ledger.commands.extraction.openai.OpenAIChatExtractor`), in the
        background, instead of the items recorded in the script (which are then ignored).
        A turn whose extraction fails stays pending: it is reported, and its session's
        ``finish`` is not run, so running the script again retries it.
    :param record_recalls: write a RecallServed record for each ``recall`` step. Off by
        default, so a re-run of a script writes nothing new.
    :raises ScriptError: a step cannot be applied (names the line and the cause); a
        :class:`SessionNamespaceMismatchError` for an ``open`` of a session this run opened
        under another namespace. A ``command`` the engine refuses is no error: it is
        reported in ``refusals`` and the script goes on.
    """
    started = time.perf_counter()
    appended_before = engine.appended
    report = RunReport(head_before=engine.head)
    sessions: dict[str, _Opened] = {}
    try:
        for number, step in steps:
            try:
                _apply(engine, number, step, sessions, report, extractor, record_recalls)
            except ScriptError:
                raise
            except (ValueError, TypeError) as e:
                raise ScriptError(number, f"{type(e).__name__}: {e}") from e
            report.steps += 1
            if on_step is not None:
                on_step(number, step)
        for sid, opened in sessions.items():
            _collect(sid, opened, report)
    finally:
        for opened in sessions.values():
            opened.session.close()
    report.head_after = engine.head
    report.events_written = engine.appended - appended_before
    report.active_memories = engine.count_active_memories()
    report.seconds = time.perf_counter() - started
    return report


def _collect(sid: str, opened: _Opened, report: RunReport) -> list[PendingTurn]:
    """Add the outcome of the session's turns observed in this run to ``report`` once
    (waiting for its background extractions); return its turns pending extraction."""
    session = opened.session
    session.wait_for_extractions()
    pending = [
        PendingTurn(session=sid, turn=p.turn_id, reason_code=p.reason_code, detail=p.detail)
        for p in session.pending_extraction_causes()
    ]
    if opened.collected:
        return pending
    opened.collected = True
    state = session.refresh()
    report.candidates += sum(1 for c in state.candidates if c.turn_id in opened.observed)
    rejections = [
        RejectedItem(
            session=sid,
            turn=r.turn_id,
            index=r.index,
            reason_code=r.reason_code,
            detail=r.detail,
        )
        for r in state.rejected
        if r.turn_id in opened.observed
    ]
    report.rejections.extend(sorted(rejections, key=lambda r: (r.turn, r.index)))
    report.rejected += len(rejections)
    report.pending_extractions.extend(pending)
    return pending


def _apply(
    engine: MemoryEngine,
    number: int,
    step: Step,
    sessions: dict[str, _Opened],
    report: RunReport,
    extractor: Extractor | None,
    record_recalls: bool,
) -> None:
    if isinstance(step, OpenStep):
        previous = sessions.pop(step.session, None)
        if previous is not None and previous.session.namespace != step.namespace.validated():
            sessions[step.session] = previous
            raise SessionNamespaceMismatchError(
                number, step.session, previous.session.namespace, step.namespace
            )
        if previous is not None:
            _collect(step.session, previous, report)
            previous.session.close()
        recorded = RecordedExtractor() if extractor is None else None
        session = engine.session(
            step.namespace,
            step.session,
            extractor=extractor or recorded,
            activation_policy=step.activation_policy,
            extraction_mode="blocking" if extractor is None else "background",
        )
        sessions[step.session] = _Opened(session, recorded)
        report.sessions_opened += 1
        return
    opened = sessions[step.session]
    session = opened.session
    if isinstance(step, TurnStep):
        if opened.recorded is not None:
            opened.recorded.provide(step.turn, step.extracted)
        outcome = session.observe_final_transcript(step.turn, step.transcript, step.occurred_at)
        # Written here, or found written (earlier, or by a run at the same time: then the
        # outcome may say not already_observed, yet this run appended nothing).
        if outcome.evidence_position:
            report.turns_observed += 1
        else:
            report.turns_already_recorded += 1
        if outcome.evidence_position or outcome.extraction_position or outcome.extraction_pending:
            opened.observed.add(step.turn)  # its candidates and rejections are this run's
            if opened.recorded is None:
                report.recorded_items_ignored += len(step.extracted)
    elif isinstance(step, RecallStep):
        session.recall(step.query, step.turn, step.k, record=record_recalls)
        report.recalls += 1
        report.recalls_recorded += int(record_recalls)
    elif isinstance(step, FinishStep):
        if _collect(step.session, opened, report):
            report.sessions_left_open.append(step.session)
            return
        result = session.finish()
        if result.already_reconciled:
            report.sessions_already_finished += 1
        else:
            report.sessions_finished += 1
            report.memories_activated += len(result.activated)
            report.memories_reinforced += len(result.reinforced)
            report.memories_superseded += len(result.superseded)
    else:
        try:
            command = session.apply_explicit_command(
                step.intent, step.statement, step.turn, occurred_at=step.occurred_at
            )
        except CommandRejectedError as e:  # refused, nothing recorded: the script goes on
            report.commands_refused += 1
            report.refusals.append(
                RefusedCommand(
                    session=step.session,
                    turn=step.turn,
                    line=number,
                    intent=step.intent,
                    reason_code=e.reason_code,
                    detail=redact(str(e)).text,
                )
            )
            return
        if command.already_applied:
            report.commands_skipped += 1
        else:
            report.commands_applied += 1
