"""Direct commands: remember, forget and correct without driving a session by hand.

A host that only wants "store this" and "what do we know about that" calls
:meth:`MemoryEngine.remember` / :meth:`~MemoryEngine.forget` / :meth:`~MemoryEngine.correct`
/ :meth:`~MemoryEngine.pin` (which delegate here). Each call is one short session of its
own (``direct-<hex>``; another prefix names another caller, e.g. ``mcp-<client>-`` for the
MCP server, so ``explain`` shows who changed a memory), written as one record per command:
the explicit command (DirectCommandApplied, an ExplicitCommandApplied that also carries what
its short session's SessionOpened, SessionSealed and SessionReconciled said) and its
reconciliation into canonical memory (MemoryActivated / MemoryForgotten / MemorySuperseded)
are appended and fsynced before the call returns, so the ledger shows the lineage a
session's command would have (``memory-ledger explain`` walks it back to the call). Direct
commands written before (SessionOpened, ExplicitCommandApplied, SessionSealed, the memory
events, SessionReconciled) read as they always did.

What each command is (its checks, its target by id or by words, its item) is decided by
:mod:`memory_ledger.commands.canonical.explicit_command`, as for a session's commands; this
module gives it the decision's ledger reads and writes the short session.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

import msgspec

from memory_ledger.commands.canonical.boundary import DecisionReads, StaleRead, append_decision
from memory_ledger.commands.canonical.explicit_command import (
    SEARCHED,
    CheckedItem,
    CommandSpec,
    Decided,
    TargetFacts,
    checked_statement,
    checked_tags,
    decide_command,
)
from memory_ledger.commands.canonical.reconcile import (
    IN_THIS_BATCH,
    TARGET_SUPERSEDED,
    Reconciler,
    ReconciliationPlan,
    plan_finish,
)
from memory_ledger.commands.errors import (
    CommandRejectedError,
    SupersededTargetError,
    UnknownMemoryError,
)
from memory_ledger.commands.session.stream import utc_now
from memory_ledger.commands.telemetry.spans import direct_command
from memory_ledger.ledger.arguments import check_aware
from memory_ledger.ledger.events import (
    DirectCommandApplied,
    LedgerEvent,
    ReconciliationReport,
)
from memory_ledger.ledger.faults import fault
from memory_ledger.ledger.ids import (
    MAX_NAMESPACE_PART_BYTES,
    InvalidNamespaceError,
    Namespace,
    as_memory_id,
    check_namespace,
    check_session_id,
    normalize_statement,
    subject_predicate_key,
)
from memory_ledger.ledger.key_errors import NamespaceErasedError

if TYPE_CHECKING:
    from eventsourcing.dcb.api import DCBAppendCondition

    from memory_ledger.commands.canonical.explicit_command import CommandResult
    from memory_ledger.commands.canonical.memory_state import MemoryStreamState
    from memory_ledger.commands.recall.index import MemoryDoc
    from memory_ledger.commands.store import MemoryStore
    from memory_ledger.ledger.digests import IdDigests

__all__ = ["DirectCommands", "DirectResult"]

DIRECT_SESSION_PREFIX = "direct-"
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

    @direct_command("remember", text=True)
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
        mid = self._engine.keyring.digests.memory_id(namespace, normalize_statement(text))
        return DirectResult(
            intent="remember",
            memory_id=mid,
            target=None,
            session_id=session_id,
            position=report.position or applied.position,
            report=report,
        )

    @direct_command("forget")
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
        target, words = self._target(statement_or_id)
        session_id, applied, report = self._run(
            namespace, "forget", None, target=target, words=words, parameter="statement_or_id"
        )
        return DirectResult(
            intent="forget",
            memory_id=applied.target,
            target=applied.target,
            session_id=session_id,
            position=report.position or applied.position,
            report=report,
        )

    @direct_command("pin")
    def pin(self, namespace: Namespace, statement_or_id: str | UUID) -> DirectResult:
        """Pin one memory of ``namespace`` (by id, or the best lexical match for a
        statement): a pinned memory is never pruned.

        :raises UnknownMemoryError: as :meth:`forget`.
        :raises SupersededTargetError: as :meth:`forget`.
        :raises CommandRejectedError: an empty statement or a secret-shaped value.
        """
        check_namespace(namespace)
        target, words = self._target(statement_or_id)
        session_id, applied, report = self._run(
            namespace, "pin", None, target=target, words=words, parameter="statement_or_id"
        )
        return DirectResult(
            intent="pin",
            memory_id=applied.target,
            target=applied.target,
            session_id=session_id,
            position=report.position or applied.position,
            report=report,
        )

    @direct_command("correct", text=True)
    def correct(
        self,
        namespace: Namespace,
        statement: str,
        *,
        target: str | UUID | None = None,
        subject: str | None = None,
        occurred_at: datetime | None = None,
    ) -> DirectResult:
        """Replace what memory says with ``statement``: the target is superseded by the new
        statement, which keeps the target's subject and predicate.

        The target is ``target`` (an id, or words describing one memory as for
        :meth:`forget`), or else the one memory ``statement`` corrects: about the same
        subject and attribute, with another value
        (:mod:`~memory_ledger.commands.canonical.word_targets`; ``subject``, when given,
        decides whose memory it is). "Alice lives in Porto." corrects "Alice lives in
        Lisbon."; "Bob is allergic to shellfish." never corrects Alice's allergy. When no
        memory is near, the statement is simply remembered (``target`` None in the
        result). ``occurred_at`` (aware): when it was said, the new value's valid time (as
        for :meth:`remember`).

        :raises UnknownMemoryError: ``target`` names no retrievable memory of this
            namespace; ``reason_code`` ``ambiguous_match`` when the words name several, or
            ``no_clear_target`` when memories are near but none is clearly the one (both
            list up to five ids: pass one as ``target``). Nothing is written.
        :raises SupersededTargetError: ``target`` was superseded (by a concurrent
            correction, say): ``current`` names the value to correct instead.
        :raises CommandRejectedError: empty statement, a secret-shaped value.
        :raises NaiveDatetimeError: ``occurred_at`` has no time zone.
        """
        text = checked_statement(statement, "statement")
        if subject is not None:
            subject = checked_statement(subject, "subject")
        check_namespace(namespace)
        resolved, words = (None, None) if target is None else self._target(target, "target")
        session_id, applied, report = self._run(
            namespace,
            "correct",
            text,
            target=resolved,
            words=words,
            subject=subject,
            occurred_at=occurred_at,
            parameter="statement" if target is None else "target",
        )
        return DirectResult(
            intent="correct",
            memory_id=self._engine.keyring.digests.memory_id(namespace, normalize_statement(text)),
            target=applied.target,
            session_id=session_id,
            position=report.position or applied.position,
            report=report,
        )

    # Internals ----------------------------------------------------------------------------

    def _target(
        self, statement_or_id: str | UUID, name: str = "statement_or_id"
    ) -> tuple[UUID | None, str | None]:
        """What a forget/pin/correct names (``name``: the argument it came in, for errors):
        ``(id, None)`` for a memory id (checked at the decision), ``(None, words)`` for words
        (searched at the decision)."""
        wanted = as_memory_id(statement_or_id)
        if wanted is not None:
            return wanted, None
        return None, checked_statement(statement_or_id, name)

    def _run(
        self,
        namespace: Namespace,
        intent: Literal["remember", "forget", "correct", "pin"],
        text: str | None,
        *,
        item: dict[str, Any] | None = None,
        target: UUID | None = None,
        words: str | None = None,
        subject: str | None = None,
        occurred_at: datetime | None = None,
        parameter: str | None = None,
    ) -> tuple[str, CommandResult, ReconciliationReport]:
        """One command as a short session of its own (:meth:`run_many` with one spec).
        ``parameter``: the caller's argument that named the target; a refusal of the target
        (:class:`UnknownMemoryError`, :class:`SupersededTargetError`) names it, as a batch's
        names its op."""
        spec = CommandSpec(
            intent=intent,
            text=text,
            item=item,
            target=target,
            words=words,
            subject=subject,
            occurred_at=occurred_at,
        )
        try:
            session_id, applied, report = self.run_many(namespace, [spec])
        except (UnknownMemoryError, SupersededTargetError) as e:
            if e.parameter is None:
                e.parameter = parameter
            raise
        return session_id, applied[0], report

    def run_many(
        self,
        namespace: Namespace,
        specs: Sequence[CommandSpec],
        *,
        session_id: str | None = None,
        digests: IdDigests | None = None,
        then: Callable[[Reconciler], None] | None = None,
        decided: Callable[[DecisionReads], None] | None = None,
    ) -> tuple[str, list[CommandResult], ReconciliationReport]:
        """Plan and append the commands ``specs`` as ONE decision (one transaction, one
        sync): one DirectCommandApplied per spec (turn ``i + 1``, which also says what the
        short session's opening said, the last one its reconciliation report), then the
        memory events, under the append condition of what the plan read
        (:func:`~memory_ledger.commands.canonical.boundary.append_decision`).
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
        what the words describe among the memories before the batch, searched anew in every
        attempt, with the namespace in the append condition (a memory that appears or goes
        meanwhile changes what they name); a ``correct`` with neither names its target by
        its own statement. Both rules, and the refusals when the words name no memory
        clearly, are :mod:`memory_ledger.commands.canonical.word_targets`'s; each command is
        decided by :func:`~memory_ledger.commands.canonical.explicit_command.decide_command`.

        ``occurred_at`` (aware): when it was said, recorded in the command (the value's
        valid time, ``commands.canonical.reconcile``).

        ``then``: called with the batch's reconciler after its commands were reconciled (in
        every attempt); the memory events it plans follow theirs in the same decision (an
        import restoring conflict marks and prunes: ``commands.canonical.restore``).

        ``decided``: called once, after the append, with the reads of the decision that was
        appended (what it found, e.g. :meth:`DecisionReads.never_activated
        <memory_ledger.commands.canonical.boundary.DecisionReads.never_activated>`).

        ``session_id``: the short session's whole id, derived by a caller that makes the
        command idempotent (an import: from the imported item's own ids); it must start with
        :attr:`prefix`. A session of that id already in the ledger (an earlier run wrote
        it) is refused with ``session_exists`` and nothing is written. Default: the prefix
        and a random hex id.

        ``digests``: the call's id derivation (:meth:`IdDigests.for_call
        <memory_ledger.ledger.digests.IdDigests.for_call>` of the store's, made for this one
        call), which remembers the ids the command derives, so a caller reads a memory id
        back without deriving it again. Default: a fresh one.

        :raises CommandRejectedError: ``session_exists`` (see ``session_id``), or
            ``invalid_session_id`` for one that does not start with the prefix.
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
        keyed = session_id is not None
        if session_id is None:
            session_id = self._prefix + uuid.uuid4().hex
        elif not check_session_id(session_id, "session_id").startswith(self._prefix):
            msg = f"session_id must start with the prefix {self._prefix!r}"
            raise CommandRejectedError(msg, "invalid_session_id", parameter="session_id")
        # One call's digests (``IdDigests.for_call``; the caller's when it gives them, to
        # read the memory ids back): each memory id is derived once for the command.
        digests = digests if digests is not None else engine.keyring.digests.for_call()
        stream = digests.session_stream_id(namespace, session_id)
        policy = engine.config.activation_policy
        outcome: dict[str, Any] = {}
        with engine.ledger_guard():
            engine.keyring.refresh()
        if engine.keyring.erased_namespace_ids and engine.keyring.is_erased(namespace):
            raise NamespaceErasedError(f"namespace {namespace.key()!r} was erased")

        def plan(reads: DecisionReads) -> list[LedgerEvent]:
            if keyed and engine.load_stream(stream):
                msg = f"session {session_id!r} is already in the ledger; nothing was written"
                raise CommandRejectedError(msg, "session_exists", parameter="session_id")
            at = utc_now()
            # what the short session's SessionOpened said, in each command's one record
            base = {
                "recorded_at": at,
                "namespace": namespace,
                "session_id": session_id,
                "activation_policy": policy,
                "extractor_id": DIRECT_EXTRACTOR_ID,
            }
            planned: dict[UUID, str] = {}  # remembered earlier in this batch: id -> statement
            forgotten: set[UUID] = set()  # forgotten earlier in this batch (and not since)
            commands: list[DirectCommandApplied] = []

            def finish(
                commands: list[DirectCommandApplied],
                then: Callable[[Reconciler], None] | None,
            ) -> ReconciliationPlan:
                reads.memories(planned)  # what reconciliation reads first: one pass for all
                # ... and the holders of the keys it activates under: one pass, not one per op
                reads.keys(
                    key
                    for command in commands
                    if command.item is not None
                    and (key := subject_predicate_key(command.item.subject, command.item.predicate))
                )
                reconciler = Reconciler(
                    namespace=namespace,
                    session_id=session_id,
                    load_memory=reads.memory,
                    same_key=reads.activated_under,
                    recorded_at=at,
                    evidence_position=lambda _entry: IN_THIS_BATCH,
                    digests=digests,
                )
                finished = plan_finish(
                    reconciler,
                    session_stream=stream,
                    session_version=len(commands),
                    items=commands,
                    policy=policy,
                    then=then,
                    bookkeeping=False,  # the commands' records say it (DirectCommandApplied)
                )
                _refuse_declined_targets(reconciler, finished.report, commands)
                return finished

            for turn, spec in enumerate(specs, start=1):
                try:
                    earlier = (planned, forgotten)
                    command = self._command(
                        reads, namespace, spec, turn, earlier, stream, base, digests
                    )
                    commands.append(command)
                except CommandRejectedError as refused:
                    refused.turn = turn  # which command of the batch: a caller names its op
                    # one by one, an earlier command that reconciliation refuses (its target
                    # superseded by a command before it) is refused first: that refusal wins
                    finish(commands, None)
                    raise
            finished = finish(commands, then)
            outcome.update(
                report=finished.report, commands=commands, digests=reads.digests, reads=reads
            )
            fault("session.finish_planned")  # the short session's finish: planned, not written
            # the last command's record carries the report: the short session is reconciled
            last = msgspec.structs.replace(commands[-1], report=finished.report)
            return [*commands[:-1], last, *finished.events]

        from memory_ledger.commands.canonical.explicit_command import CommandResult

        kinds = sorted({spec.intent for spec in specs})
        what = f"{'+'.join(kinds)} ({session_id})"
        # the items the command's validation put to the secret door, trusted by identity
        cleared = [s.item.item for s in specs if isinstance(s.item, CheckedItem) and s.item.cleared]

        def write(events: list[LedgerEvent], condition: DCBAppendCondition | None) -> list[int]:
            # tagged with the digests the decision read under (its key tags derived once)
            return engine.append(
                events, condition=condition, cleared=cleared, digests=outcome.get("digests")
            )

        positions = append_decision(engine, namespace, plan, what=what, append=write)
        if decided is not None:
            decided(outcome["reads"])
        report = msgspec.structs.replace(outcome["report"], position=positions[-1])
        applied = [
            CommandResult(
                command_id=command.command_id,
                intent=spec.intent,
                target=command.target,
                position=positions[turn],
            )
            for turn, (spec, command) in enumerate(zip(specs, outcome["commands"], strict=True))
        ]
        return session_id, applied, report

    def _command(
        self,
        reads: DecisionReads,
        namespace: Namespace,
        spec: CommandSpec,
        turn: int,
        earlier: tuple[dict[UUID, str], set[UUID]],
        stream: UUID,
        base: dict[str, Any],
        digests: IdDigests,
    ) -> DirectCommandApplied:
        """The DirectCommandApplied of ``spec`` (turn ``turn`` of the short session, its
        version on the session stream; ``base``: what every record of the session says),
        decided (:func:`~memory_ledger.commands.canonical.explicit_command.decide_command`)
        against the decision's reads and what the batch's earlier commands did: ``earlier``
        holds the memories they remembered (id -> statement) and those they forgot, which
        this one extends. A command naming a memory an earlier one forgot (and none
        remembered since) is refused as it would be run after it: :class:`UnknownMemoryError`.

        :raises UnknownMemoryError: as just said, or as ``decide_command``.
        """
        planned, forgotten = earlier
        decided: Decided = decide_command(spec, _DirectReads(self._engine, reads), planned)
        if decided.target is not None and decided.target in forgotten:
            raise UnknownMemoryError(str(decided.target))
        if decided.intent == "forget" and decided.target is not None:
            forgotten.add(decided.target)
        # ``digests``: the call's (``IdDigests.for_call``), which the reconciliation and the
        # batch's outcomes derive from too: each memory id is derived once per command
        if decided.item is not None:
            remembered = digests.memory_id(namespace, normalize_statement(decided.item.statement))
            planned[remembered] = decided.item.statement
            forgotten.discard(remembered)
        return DirectCommandApplied(
            originator_id=stream,
            originator_version=turn,
            **base,
            turn_id=turn,
            command_id=digests.command_id(
                namespace, stream, turn, decided.intent, decided.statement
            ),
            intent=decided.intent,
            statement=decided.statement,
            target=decided.target,
            item=decided.item,
            occurred_at=spec.occurred_at,
        )


class _DirectReads:
    """The reads of a direct command's decision
    (:class:`~memory_ledger.commands.canonical.explicit_command.CommandReads`): the ledger through
    ``reads``; a search by words of the read models (caught up past ``reads.after``) puts the
    whole namespace in the append condition, and a memory it names that the ledger reads do not
    show retrievable makes the decision start again (:class:`StaleRead`)."""

    def __init__(self, engine: MemoryStore, reads: DecisionReads) -> None:
        self._engine = engine
        self._reads = reads

    def state(self, memory: UUID) -> MemoryStreamState | None:
        return self._reads.memory(memory)

    def head(self, memory: UUID) -> UUID | None:
        return self._reads.head(memory)

    def searched(self, words: str) -> list[MemoryDoc]:
        self._reads.guard_namespace()
        namespace = self._reads.namespace
        ranked, _, _ = self._engine.canonical_candidates(namespace, words, SEARCHED, semantic=False)
        return [doc for doc, _score in ranked]

    def chosen(self, doc: MemoryDoc) -> None:
        seen = self._reads.memory(UUID(doc.memory_id))
        if seen is None or not seen.retrievable:
            raise StaleRead  # the search saw a later state: decide again

    def facts(self, target: UUID, doc: MemoryDoc | None) -> TargetFacts | None:
        state = self._reads.memory(target)
        return TargetFacts.of_state(state) if state is not None else None


def _refuse_declined_targets(
    reconciler: Reconciler,
    report: ReconciliationReport,
    commands: Sequence[DirectCommandApplied],
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


DIRECT_EXTRACTOR_ID = "direct"
"""The extractor id recorded in a direct command's records (no extractor runs)."""
