"""Direct commands: remember, forget and correct without driving a session by hand.

A host that only wants "store this" and "what do we know about that" calls
:meth:`MemoryEngine.remember` / :meth:`~MemoryEngine.forget` / :meth:`~MemoryEngine.correct`
/ :meth:`~MemoryEngine.pin` (which delegate here). Each call is one short session of its
own (``direct-<hex>``; another prefix names another caller, e.g. ``mcp-<client>-`` for the
MCP server, so ``explain`` shows who changed a memory): the
explicit command (ExplicitCommandApplied) and its reconciliation into canonical memory
(SessionSealed, MemoryActivated / MemoryForgotten / MemorySuperseded, SessionReconciled) are
appended and fsynced before the call returns, so the ledger shows exactly the lineage a
session's command would have (``memory-ledger explain`` walks it back to the call).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

import msgspec

from memory_ledger.commands.canonical.boundary import DecisionReads, StaleRead, append_decision
from memory_ledger.commands.canonical.reconcile import (
    IN_THIS_BATCH,
    TARGET_SUPERSEDED,
    Reconciler,
    plan_finish,
)
from memory_ledger.commands.errors import (
    CommandRejectedError,
    SupersededTargetError,
    UnknownMemoryError,
)
from memory_ledger.commands.extraction.validation import Rejection, has_visible_text, validate_item
from memory_ledger.commands.recall.lexical import shared_stems
from memory_ledger.commands.session.stream import utc_now
from memory_ledger.ledger.arguments import check_aware, forbidden_character
from memory_ledger.ledger.events import (
    ExplicitCommandApplied,
    ExtractedItem,
    LedgerEvent,
    ReconciliationReport,
    SessionOpened,
)
from memory_ledger.ledger.faults import fault
from memory_ledger.ledger.ids import (
    MAX_NAMESPACE_PART_BYTES,
    InvalidNamespaceError,
    Namespace,
    as_memory_id,
    check_namespace,
    check_session_id,
    command_id,
    memory_id,
    normalize_statement,
    session_stream_id,
)
from memory_ledger.ledger.key_errors import NamespaceErasedError

if TYPE_CHECKING:
    from memory_ledger.commands.recall.index import MemoryDoc
    from memory_ledger.commands.session.commands import CommandResult
    from memory_ledger.commands.store import MemoryStore

__all__ = [
    "CommandSpec",
    "DirectCommands",
    "DirectResult",
    "checked_statement",
    "checked_tags",
]

DIRECT_SESSION_PREFIX = "direct-"

_SEARCHED = 10
"""How many of the best lexical matches a command naming a memory by its words reads."""

_LISTED = 5
"""How many of several named memories an ``ambiguous_match`` error lists (best first)."""


def _ambiguous(named: list[MemoryDoc], capped: bool) -> str:
    """The message of an ``ambiguous_match``: how many memories the words name, the
    :data:`_LISTED` best (id and the start of the statement) and how many more, so its size
    does not grow with the store."""
    count = f"at least {len(named)}" if capped else str(len(named))
    listed = "; ".join(f"{doc.memory_id}: {doc.statement[:60]}" for doc in named[:_LISTED])
    rest = len(named) - _LISTED
    more = f"; and {'at least ' if capped else ''}{rest} more" if rest > 0 else ""
    return f"the words name {count} memories, pass one memory id: {listed}{more}"


"""Session ids of direct commands start with this; the rest is a random hex id."""


class DirectResult(msgspec.Struct, frozen=True, kw_only=True):
    """What a direct command did.

    ``memory_id`` is the memory the command is about: the remembered one, the forgotten
    one, the pinned one, or the corrected value (the new memory) for ``correct``; ``target``
    is the memory a ``forget``, ``pin`` or ``correct`` applied to (None when nothing
    matched: a ``correct`` without a target then simply remembers). ``position`` is the
    ledger position of the last event written; ``report`` the reconciliation report of the
    command's session.
    """

    intent: Literal["remember", "forget", "correct", "pin"]
    memory_id: UUID | None
    target: UUID | None
    session_id: str
    position: int
    report: ReconciliationReport


class DirectCommands:
    """Explicit commands against one engine, each reconciled before it returns.

    :param session_prefix: how the session id of each command starts (the rest is a random
        hex id); it is recorded in every event of the command. Default ``direct-``.
    :raises InvalidNamespaceError: (a ``ValueError``) the prefix is empty, longer than 224
        UTF-8 bytes, or holds a character a session id may not hold
        (:func:`~memory_ledger.ledger.ids.check_session_id`).
    :raises InvalidArgumentTypeError: the prefix is not a string.
    """

    def __init__(self, engine: MemoryStore, session_prefix: str = DIRECT_SESSION_PREFIX) -> None:
        check_session_id(session_prefix, "session_prefix")
        room = MAX_NAMESPACE_PART_BYTES - 32  # the random hex id that follows
        if len(session_prefix.encode("utf-8")) > room:
            msg = f"session_prefix is longer than {room} UTF-8 bytes (session ids: 256 at most)"
            raise InvalidNamespaceError(
                msg, parameter="session_prefix", reason_code="session_id_too_long"
            )
        self._engine = engine
        self._prefix = session_prefix

    @property
    def prefix(self) -> str:
        """How the session id of each command starts (``direct-`` unless told otherwise)."""
        return self._prefix

    def remember(
        self,
        namespace: Namespace,
        statement: str,
        *,
        subject: str | None = None,
        predicate: str | None = None,
        value: str | None = None,
        tags: Sequence[str] = (),
        occurred_at: datetime | None = None,
    ) -> DirectResult:
        """Store ``statement`` as canonical memory of ``namespace`` (durable on return).

        ``occurred_at`` (aware) is when it was said: the value's valid time, so an older
        conversation imported later does not retire it (None: ledger order decides).

        ``subject``/``predicate``/``value`` make it a keyed fact: a later remember of the
        same subject and predicate supersedes it (single-valued attribute). Remembering a
        statement that is already active reinforces it.

        :raises CommandRejectedError: empty statement, a secret-shaped value, or an item
            that fails validation (``reason_code`` says which rule).
        :raises InvalidNamespaceError: an empty or invalid namespace part.
        :raises NaiveDatetimeError: ``occurred_at`` has no time zone
            (``InvalidArgumentTypeError`` when it is not a datetime).
        """
        text = checked_statement(statement, "statement")
        check_namespace(namespace)
        item: dict[str, Any] = {
            "kind": "semantic",
            "subject": subject,
            "predicate": predicate,
            "value": value,
            "statement": text,
            "source": "fact",
            "scope": "user",
            "reason": "the host asked to remember this",
            "importance": 0.9,
            "confidence": 1.0,
            "tags": checked_tags(tags, "tags"),
        }
        session_id, applied, report = self._run(
            namespace, "remember", text, item=item, occurred_at=occurred_at
        )
        mid = memory_id(namespace, normalize_statement(text))
        return DirectResult(
            intent="remember",
            memory_id=mid,
            target=None,
            session_id=session_id,
            position=report.position or applied.position,
            report=report,
        )

    def forget(self, namespace: Namespace, statement_or_id: str | UUID) -> DirectResult:
        """Forget one memory of ``namespace``: by its id (a UUID or its text form) or by the
        best lexical match for a statement.

        A forgotten memory is never recalled again; the ledger keeps its history.

        :raises UnknownMemoryError: an id that names no retrievable memory of this namespace
            (another namespace's id behaves exactly like an unknown one), or a statement
            that matches none.
        :raises SupersededTargetError: the id names a superseded memory (``current`` names
            the memory that holds the fact now); nothing was done.
        :raises CommandRejectedError: an empty statement or a secret-shaped value.
        """
        check_namespace(namespace)
        target, words = self._target(namespace, statement_or_id)
        session_id, applied, report = self._run(
            namespace, "forget", None, target=target, words=words
        )
        return DirectResult(
            intent="forget",
            memory_id=applied.target,
            target=applied.target,
            session_id=session_id,
            position=report.position or applied.position,
            report=report,
        )

    def pin(self, namespace: Namespace, statement_or_id: str | UUID) -> DirectResult:
        """Pin one memory of ``namespace`` (by id, or the best lexical match for a
        statement): a pinned memory is never pruned.

        :raises UnknownMemoryError: as :meth:`forget`.
        :raises SupersededTargetError: as :meth:`forget`.
        :raises CommandRejectedError: an empty statement or a secret-shaped value.
        """
        check_namespace(namespace)
        target, words = self._target(namespace, statement_or_id)
        session_id, applied, report = self._run(namespace, "pin", None, target=target, words=words)
        return DirectResult(
            intent="pin",
            memory_id=applied.target,
            target=applied.target,
            session_id=session_id,
            position=report.position or applied.position,
            report=report,
        )

    def correct(
        self,
        namespace: Namespace,
        statement: str,
        *,
        target: str | UUID | None = None,
        occurred_at: datetime | None = None,
    ) -> DirectResult:
        """Replace what memory says with ``statement``: the target is superseded by the new
        statement, which keeps the target's subject and predicate.

        The target is ``target`` (an id), or else the one memory ``statement`` names (its
        subject is mentioned and another word of it is shared:
        :func:`~memory_ledger.commands.lexical.names_memory`). When it names none, the
        statement is simply remembered (``target`` None in the result). ``occurred_at``
        (aware): when it was said, the new value's valid time (as for :meth:`remember`).

        :raises UnknownMemoryError: ``target`` names no retrievable memory of this namespace;
            ``reason_code`` ``ambiguous_match`` when ``statement`` names several (pass
            ``target``).
        :raises SupersededTargetError: ``target`` was superseded (by a concurrent
            correction, say): ``current`` names the value to correct instead.
        :raises CommandRejectedError: empty statement, a secret-shaped value.
        :raises NaiveDatetimeError: ``occurred_at`` has no time zone.
        """
        text = checked_statement(statement, "statement")
        check_namespace(namespace)
        if target is None:  # the statement names its target (the correction rule)
            session_id, applied, report = self._run(
                namespace, "correct", text, words=text, strict=True, occurred_at=occurred_at
            )
        else:
            resolved, words = self._target(namespace, target, "target")
            session_id, applied, report = self._run(
                namespace, "correct", text, target=resolved, words=words, occurred_at=occurred_at
            )
        return DirectResult(
            intent="correct",
            memory_id=memory_id(namespace, normalize_statement(text)),
            target=applied.target,
            session_id=session_id,
            position=report.position or applied.position,
            report=report,
        )

    # Internals ----------------------------------------------------------------------------

    def _target(
        self, namespace: Namespace, statement_or_id: str | UUID, name: str = "statement_or_id"
    ) -> tuple[UUID | None, str | None]:
        """What a forget/pin/correct names (``name``: the argument it came in, for errors):
        ``(id, None)`` for a memory id (checked at the decision), ``(None, words)`` for words
        (searched at the decision)."""
        wanted = as_memory_id(statement_or_id)
        if wanted is not None:
            return wanted, None
        return None, checked_statement(statement_or_id, name)

    def _named(
        self, namespace: Namespace, text: str, *, required: bool, strict: bool = False
    ) -> MemoryDoc | None:
        """The one retrievable memory ``text`` names (``strict``: the correction rule of
        :meth:`MemoryEngine.named_memories`); None (or, when ``required``, an error) when it
        names none; an error when it names several (never a silent pick). Messages never
        repeat ``text``."""
        named = self._engine.named_memories(namespace, text, _SEARCHED, strict=strict)
        capped = len(named) >= _SEARCHED  # more may match beyond the search depth
        if len(named) > 1:  # the ones sharing the most of the text's words, if that is one
            overlaps = [len(shared_stems(text, doc.subject, doc.statement)) for doc in named]
            best = max(overlaps)
            named = [doc for doc, n in zip(named, overlaps, strict=True) if n == best]
        if len(named) > 1:
            raise UnknownMemoryError(_ambiguous(named, capped), reason_code="ambiguous_match")
        if not named and required:
            msg = "no memory of this namespace matches the given words"
            raise UnknownMemoryError(msg, reason_code="no_match")
        return named[0] if named else None

    def _run(
        self,
        namespace: Namespace,
        intent: Literal["remember", "forget", "correct", "pin"],
        text: str | None,
        *,
        item: dict[str, Any] | None = None,
        target: UUID | None = None,
        words: str | None = None,
        strict: bool = False,
        occurred_at: datetime | None = None,
    ) -> tuple[str, CommandResult, ReconciliationReport]:
        """One command as a short session of its own (:meth:`run_many` with one spec)."""
        spec = CommandSpec(
            intent=intent,
            text=text,
            item=item,
            target=target,
            words=words,
            strict=strict,
            occurred_at=occurred_at,
        )
        session_id, applied, report = self.run_many(namespace, [spec])
        return session_id, applied[0], report

    def run_many(
        self, namespace: Namespace, specs: Sequence[CommandSpec]
    ) -> tuple[str, list[CommandResult], ReconciliationReport]:
        """Plan and append the commands ``specs`` as ONE decision (one transaction, one
        sync): SessionOpened, one ExplicitCommandApplied per spec (turn ``i + 1``),
        SessionSealed, the memory events and SessionReconciled, under the append condition of
        what the plan read (:func:`~memory_ledger.commands.canonical.boundary.append_decision`).
        A crash leaves all of it or none of it; a backup never holds half of one. The specs
        are reconciled in order, so a later one sees what an earlier one did (a remember of
        the same subject and predicate supersedes the earlier value; a forget may name a
        memory remembered earlier in the batch by its id).

        A spec's ``text`` None (a forget or pin): the statement recorded is the target's
        current one. Its ``target`` (an id) must be retrievable at the decision (or
        remembered earlier in the batch): a superseded one is refused with
        :class:`SupersededTargetError` naming the current head of its chain (the policy of
        every surface: a command never moves to another memory than the one it named); a
        forgotten or unknown one with :class:`UnknownMemoryError`. ``words``: the target is
        what the words name among the memories before the batch, searched anew in every
        attempt, with the namespace in the append condition (a memory that appears or goes
        meanwhile changes what they name); ``strict``: they are a correction's own statement
        (the correction rule, :func:`~memory_ledger.commands.recall.lexical.names_memory`),
        and naming none it remembers; otherwise naming none raises ``no_match``.

        ``occurred_at`` (aware): when it was said, recorded in the command (the value's
        valid time, ``commands.canonical.reconcile``).

        :raises UnknownMemoryError: a ``target`` names no retrievable memory now.
        :raises SupersededTargetError: a ``target`` was superseded.
        :raises CommandRejectedError: a (carried-over) item fails validation.
        :raises NamespaceErasedError: the namespace was erased.
        :raises NaiveDatetimeError: an ``occurred_at`` has no time zone.
        """
        for spec in specs:
            if spec.occurred_at is not None:
                check_aware("occurred_at", spec.occurred_at)  # before anything is planned
        engine = self._engine
        session_id = self._prefix + uuid.uuid4().hex
        stream = session_stream_id(namespace, session_id)
        policy = engine.config.activation_policy
        outcome: dict[str, Any] = {}
        with engine.ledger_guard():
            engine.keyring.refresh()
        if engine.keyring.erased_namespace_ids and engine.keyring.is_erased(namespace):
            raise NamespaceErasedError(f"namespace {namespace.key()!r} was erased")

        def plan(reads: DecisionReads) -> list[LedgerEvent]:
            at = utc_now()
            base = {"recorded_at": at, "namespace": namespace, "session_id": session_id}
            opened = SessionOpened(
                originator_id=stream,
                originator_version=1,
                **base,  # type: ignore[arg-type]
                activation_policy=policy,
                extractor_id=DIRECT_EXTRACTOR_ID,
            )
            planned: dict[UUID, str] = {}  # remembered earlier in this batch: id -> statement
            commands = [
                self._command(reads, namespace, spec, turn, planned, stream, base)
                for turn, spec in enumerate(specs, start=1)
            ]
            reads.memories(planned)  # what reconciliation reads first: one pass for all
            reconciler = Reconciler(
                namespace=namespace,
                session_id=session_id,
                load_memory=reads.memory,
                same_key=reads.activated_under,
                recorded_at=at,
                evidence_position=lambda _entry: IN_THIS_BATCH,
            )
            finished = plan_finish(
                reconciler,
                session_stream=stream,
                session_version=1 + len(commands),
                items=commands,
                policy=policy,
            )
            _refuse_declined_targets(reconciler, finished.report, commands)
            outcome.update(report=finished.report, commands=commands)
            fault("session.finish_planned")  # the short session's finish: planned, not written
            return [opened, *commands, *finished.events]

        from memory_ledger.commands.session.commands import CommandResult  # sessions: on a write

        kinds = sorted({spec.intent for spec in specs})
        what = f"{'+'.join(kinds)} ({session_id})"
        positions = append_decision(engine, namespace, plan, what=what)
        report = msgspec.structs.replace(outcome["report"], position=positions[-1])
        applied = [
            CommandResult(
                command_id=command.command_id,
                intent=spec.intent,
                target=command.target,
                position=positions[turn],
            )
            for turn, (spec, command) in enumerate(
                zip(specs, outcome["commands"], strict=True), start=1
            )
        ]
        return session_id, applied, report

    def _command(
        self,
        reads: DecisionReads,
        namespace: Namespace,
        spec: CommandSpec,
        turn: int,
        planned: dict[UUID, str],
        stream: UUID,
        base: dict[str, Any],
    ) -> ExplicitCommandApplied:
        """The ExplicitCommandApplied of ``spec`` (turn ``turn`` of the short session),
        its target resolved against the decision's reads and ``planned`` (the memories
        remembered earlier in the batch, which it extends)."""
        head = None
        kind = spec.intent
        if spec.words is not None:
            # What the words name, searched now (the read models are caught up past
            # ``reads.after``), with the whole namespace in the append condition.
            reads.guard_namespace()
            found = self._named(namespace, spec.words, required=not spec.strict, strict=spec.strict)
            if found is None:
                kind = "remember"  # a correction naming nothing remembers
            else:
                head = UUID(found.memory_id)
                seen = reads.memory(head)
                if seen is None or not seen.retrievable:
                    raise StaleRead  # the search saw a later state: decide again
        elif spec.target is not None and spec.target in planned:
            head = spec.target  # remembered earlier in this batch
        elif spec.target is not None:
            seen = reads.memory(spec.target)
            if seen is not None and seen.status == "superseded":
                raise SupersededTargetError(spec.target, reads.head(spec.target))
            if seen is None or not seen.retrievable:
                raise UnknownMemoryError(str(spec.target))
            head = spec.target
        state = reads.memory(head) if head is not None and head not in planned else None
        statement = spec.text
        if statement is None:  # forget / pin: the target's statement as it is now
            assert head is not None
            if head in planned:
                statement = planned[head]
            else:
                assert state is not None
                statement = state.item.statement if state.item is not None else str(head)
        resolved: ExtractedItem | None = None
        if kind == "correct":
            resolved = _checked(_correction(statement, state.item if state else None, spec.item))
        elif kind == "remember":
            raw = spec.item if spec.item is not None else _plain_item(statement)
            resolved = _checked(raw, document=spec.document)
        if resolved is not None:
            planned[memory_id(namespace, normalize_statement(resolved.statement))] = (
                resolved.statement
            )
        return ExplicitCommandApplied(
            originator_id=stream,
            originator_version=1 + turn,
            **base,
            turn_id=turn,
            command_id=command_id(stream, turn, kind, statement),
            intent=kind,
            statement=statement,
            target=head,
            item=resolved,
            occurred_at=spec.occurred_at,
        )


def _refuse_declined_targets(
    reconciler: Reconciler,
    report: ReconciliationReport,
    commands: Sequence[ExplicitCommandApplied],
) -> None:
    """Refuse a batch one of whose commands names a memory that an earlier command of the
    same batch superseded (reconciliation declined it, ``target_superseded``): as one by
    one, where that command would be refused with :class:`SupersededTargetError`, the
    batch is refused whole, naming the memory that holds the fact now."""
    if not report.declined or len(commands) < 2:
        return
    ours = {command.command_id: command for command in commands}
    for declined in report.declined:
        command = ours.get(declined.candidate_id)
        if command is None or command.target is None or declined.reason_code != TARGET_SUPERSEDED:
            continue
        current: UUID | None = command.target
        seen: set[UUID] = set()
        while current is not None and current not in seen:
            seen.add(current)
            state = reconciler.state(current)
            if state is not None and state.status == "forgotten":
                current = None  # the chain ends forgotten
            elif state is not None and state.status == "superseded":
                current = state.superseded_by
            else:
                break
        raise SupersededTargetError(command.target, current)


@dataclass(frozen=True, kw_only=True)
class CommandSpec:
    """One command of a short session (:meth:`DirectCommands.run_many`): its intent, its
    statement (None for a forget or pin: the target's), the item to activate (None: a plain
    one), the target by id or by ``words``, the correction rule (``strict``), its valid
    time (``occurred_at``, aware) and whether the item's value is a document (``document``:
    :data:`~memory_ledger.commands.extraction.validation.MAX_DOCUMENT_VALUE_CHARS`, kept
    exactly)."""

    intent: Literal["remember", "forget", "correct", "pin"]
    text: str | None
    item: dict[str, Any] | None = None
    target: UUID | None = None
    words: str | None = None
    strict: bool = False
    occurred_at: datetime | None = None
    document: bool = False


DIRECT_EXTRACTOR_ID = "direct"
"""The extractor id recorded in a direct command's SessionOpened (no extractor runs)."""


def _plain_item(text: str) -> dict[str, Any]:
    """The item of a plain ``remember`` (no subject or predicate given)."""
    return {
        "kind": "semantic",
        "subject": None,
        "predicate": None,
        "value": None,
        "statement": text,
        "source": "fact",
        "scope": "user",
        "reason": "the user explicitly asked to remember this",
        "importance": 0.9,
        "confidence": 1.0,
    }


def _correction(
    text: str, base: ExtractedItem | None, supplied: dict[str, Any] | None
) -> dict[str, Any]:
    """The item of a ``correct`` (issue 13 item 4): the target's current item (subject,
    predicate, kind, source, scope, reason, tags, evidence and importance) with the
    correction's statement, no value and the user's confidence; a plain item when there is
    no target. ``supplied`` fields override."""
    if base is None:
        raw = _plain_item(text)
        raw["reason"] = "the user explicitly asked to correct this"
    else:
        raw = {
            "kind": base.kind,
            "subject": base.subject,
            "predicate": base.predicate,
            "value": None,
            "statement": text,
            "source": base.source,
            "scope": base.scope,
            "reason": base.reason,
            "importance": base.importance,
            "confidence": 1.0,
            "tags": list(base.tags),
            "evidence": list(base.evidence),
        }
    raw.update(supplied or {})
    return raw


def _checked(raw: dict[str, Any], *, document: bool = False) -> ExtractedItem:
    outcome = validate_item(raw, document=document)
    if isinstance(outcome, Rejection):
        msg = f"the item was rejected ({outcome.reason_code}): {outcome.detail}"
        raise CommandRejectedError(msg, outcome.reason_code, parameter=outcome.field)
    return outcome


def checked_tags(tags: object, name: str) -> list[str]:
    """``tags`` as a list, refused (``invalid_tags``, naming ``name``) unless it is a list or
    tuple (validation checks each tag)."""
    if isinstance(tags, (str, bytes, dict, set)) or not isinstance(tags, Sequence):
        msg = f"{name} must be a list or tuple of strings, got {type(tags).__name__}"
        raise CommandRejectedError(msg, "invalid_tags", parameter=name)
    return list(tags)


def checked_statement(value: object, name: str) -> str:
    """``value`` with its whitespace collapsed, checked before anything is written: a
    string, not empty, no NUL, other control character (tab and line breaks aside) or
    bidirectional override (``"forbidden_character"``), valid Unicode, no secret-shaped
    value (never echoed)."""
    if not isinstance(value, str):
        msg = f"{name} must be a string, got {type(value).__name__}"
        raise CommandRejectedError(msg, "invalid_statement", parameter=name)
    text = " ".join(value.split())
    if not text or not has_visible_text(text):
        raise CommandRejectedError(f"{name} is empty", "empty_statement", parameter=name)
    forbidden = forbidden_character(value, line_breaks=True)
    if forbidden is not None:
        msg = (
            f"{name} holds {forbidden}; control characters and bidirectional overrides are refused"
        )
        raise CommandRejectedError(msg, "forbidden_character", parameter=name)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        msg = f"{name} holds a character that is not valid Unicode text"
        raise CommandRejectedError(msg, "not_utf8", parameter=name) from None
    from memory_ledger.commands.secrets import redact  # detect_secrets: loaded on a write

    if redact(text).count:
        msg = f"{name} holds a secret-shaped value; nothing was recorded"
        raise CommandRejectedError(msg, "secret_detected", parameter=name)
    return text
