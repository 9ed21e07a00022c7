"""Batch commands: many remembers and forgets of one namespace as ONE command.

:meth:`MemoryEngine.apply_batch` / :meth:`~MemoryEngine.remember_many` write a whole batch as
one short session (``batch-<hex>``): one append condition, one transaction, one sync
(:meth:`~memory_ledger.commands.engine.direct.DirectCommands.run_many`). A crash leaves all of it
or none of it; the ledger shows each operation as its own DirectCommandApplied (turn ``i + 1``)
and its reconciliation, so ``explain`` walks any memory back to the batch and its place in it.
What every direct command checks (the secret door, validation, the namespace rules, the decision
under an append condition) holds for each operation: the batch is refused whole, naming the
operation (``ops[i]``), before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

import msgspec

from memory_ledger.commands.canonical.explicit_command import (
    CommandSpec,
    checked_remember,
    checked_statement,
    checked_tags,
)
from memory_ledger.commands.engine.direct import DirectCommands
from memory_ledger.commands.errors import (
    CommandRejectedError,
    InvalidArgumentTypeError,
    SupersededTargetError,
    UnknownMemoryError,
)
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.events import ReconciliationReport
from memory_ledger.ledger.ids import (
    Namespace,
    as_memory_id,
    check_namespace,
    normalize_statement,
    subject_predicate_key,
)

if TYPE_CHECKING:
    from memory_ledger.commands.canonical.boundary import DecisionReads
    from memory_ledger.commands.canonical.reconcile import Reconciler
    from memory_ledger.commands.store import MemoryStore

__all__ = [
    "BatchOutcome",
    "BatchResult",
    "Forget",
    "Remember",
    "apply_batch",
    "check_op",
    "remember_many",
]

BATCH_SESSION_PREFIX = "batch-"

MAX_BATCH_OPS = 100_000
"""The most operations one batch holds (one transaction): a larger batch is refused with
``batch_too_large``; split it (each part is then atomic on its own)."""


class Remember(msgspec.Struct, frozen=True, kw_only=True):
    """Remember ``statement`` (as :meth:`MemoryEngine.remember`): ``subject`` and
    ``predicate`` make it a keyed fact that supersedes the key's earlier value (in the
    store or earlier in the batch); ``occurred_at`` (aware) is its valid time.
    ``document``: ``value`` is a document the host keeps (a LangGraph store item's JSON):
    up to :data:`~memory_ledger.commands.extraction.validation.MAX_DOCUMENT_VALUE_CHARS`
    characters, kept exactly, never searched (only ``statement`` is); otherwise a value is
    a short label (``MAX_FIELD_CHARS["value"]``, whitespace collapsed)."""

    statement: str
    subject: str | None = None
    predicate: str | None = None
    value: str | None = None
    tags: tuple[str, ...] = ()
    occurred_at: datetime | None = None
    document: bool = False


class Forget(msgspec.Struct, frozen=True, kw_only=True):
    """Forget one memory (as :meth:`MemoryEngine.forget`): ``target`` is its id (a UUID or
    its text form; a memory remembered earlier in the same batch counts) or words naming one
    memory stored before the batch."""

    target: UUID | str


BatchOp = Remember | Forget


class BatchOutcome(msgspec.Struct, frozen=True, kw_only=True):
    """What one operation of a batch did: ``intent`` (``remember`` or ``forget``), the
    memory it names (``memory_id``: the remembered statement's id, or the forgotten one) and
    the ledger position of its DirectCommandApplied."""

    intent: str
    memory_id: UUID | None
    position: int


class BatchResult(msgspec.Struct, frozen=True, kw_only=True):
    """A batch as written: its short session, the position of its last event (durable on
    return), one outcome per operation in order, and the reconciliation report.

    ``never_activated``: match keys (``subject_predicate_key`` of a subject and predicate)
    that the batch's decision read (those it remembers under, its ``vacant`` ones) and
    found no memory of the namespace ever activated under, before the batch: read at the
    decision's read position and guarded by its append condition, so exact for the ledger
    right before the batch's first record. A key not named may or may not have held one
    (read the ledger); empty when the engine's append condition is switched off."""

    session_id: str
    position: int
    outcomes: tuple[BatchOutcome, ...]
    report: ReconciliationReport
    never_activated: frozenset[tuple[str, str]] = frozenset()


def apply_batch(
    engine: MemoryStore,
    namespace: Namespace,
    ops: Iterable[BatchOp | str],
    *,
    session_prefix: str = BATCH_SESSION_PREFIX,
    vacant: Iterable[tuple[str, str]] = (),
) -> BatchResult:
    """Write ``ops`` (in order; a plain string is a :class:`Remember` of it) as one command
    of ``namespace``, durable and reconciled on return.

    ``vacant``: (subject, predicate) keys that must hold no current value when the batch is
    decided, checked in the same decision and under its append condition (a caller's delete
    of a key it found empty: a value put there meanwhile must not survive a batch decided
    after it). When one holds a value then (not one this batch remembered), nothing is
    written and :class:`CommandRejectedError` ``key_not_vacant`` is raised (``parameter``
    ``vacant[i]``): read again, and send the batch with a forget of that value.

    :raises CommandRejectedError: no operation (``empty_batch``), more than
        :data:`MAX_BATCH_OPS` (``batch_too_large``), or an operation whose statement is
        empty, secret-shaped or fails validation (``parameter`` names ``ops[i]``); nothing is
        written.
    :raises InvalidArgumentTypeError: an operation that is neither a string, a
        :class:`Remember` nor a :class:`Forget`.
    :raises UnknownMemoryError: a forget names no retrievable memory (nothing is written;
        ``parameter`` names ``ops[i]``).
    :raises SupersededTargetError: a forget names a superseded memory (``parameter``:
        ``ops[i]``).
    :raises InvalidNamespaceError: an invalid namespace.
    :raises NaiveDatetimeError: an ``occurred_at`` without a time zone.
    :raises NamespaceErasedError: the namespace was erased.
    :raises CommandRejectedError: ``key_not_vacant`` (see ``vacant``).
    """
    check_namespace(namespace)
    specs = _specs(ops)
    keys = _vacant_keys(vacant)
    direct = DirectCommands(engine, session_prefix)
    digests = engine.keyring.digests.for_call()  # the command's ids, read back below
    then = _vacancy_check(keys) if keys else None
    decided: list[DecisionReads] = []
    try:
        session_id, applied, report = direct.run_many(
            namespace, specs, digests=digests, then=then, decided=decided.append
        )
    except (UnknownMemoryError, SupersededTargetError) as e:
        if e.parameter is None:
            e.parameter = _refused_op(e, specs)
        raise
    outcomes = tuple(
        BatchOutcome(
            intent=spec.intent,
            memory_id=(
                digests.memory_id(namespace, normalize_statement(spec.text))
                if spec.text is not None
                else result.target
            ),
            position=result.position,
        )
        for spec, result in zip(specs, applied, strict=True)
    )
    return BatchResult(
        session_id=session_id,
        position=report.position or applied[-1].position,
        outcomes=outcomes,
        report=report,
        never_activated=frozenset(decided[0].never_activated()) if decided else frozenset(),
    )


KEY_NOT_VACANT = "key_not_vacant"
"""The reason code of a batch refused because a ``vacant`` key holds a value."""


def _vacant_keys(vacant: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """``vacant`` as match keys (:func:`~memory_ledger.ledger.ids.subject_predicate_key`).

    :raises InvalidArgumentTypeError: an entry that is not a (subject, predicate) pair of
        non-empty strings."""
    keys = []
    for index, pair in enumerate(vacant):
        key = None
        if isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(p, str) for p in pair):
            key = subject_predicate_key(pair[0], pair[1])
        if key is None:
            msg = f"vacant[{index}] must be a (subject, predicate) pair of non-empty strings"
            raise InvalidArgumentTypeError(msg, parameter=f"vacant[{index}]")
        keys.append(key)
    return keys


def _vacancy_check(keys: list[tuple[str, str]]) -> Callable[[Reconciler], None]:
    """The check of ``apply_batch``'s ``vacant`` keys, run in the batch's decision."""

    def check(reconciler: Reconciler) -> None:
        ours = set(reconciler.activated)
        for index, key in enumerate(keys):
            if reconciler.current_under(key) - ours:
                msg = (
                    f"vacant[{index}] holds a value now (put since it was read); nothing was "
                    "written: read it again"
                )
                raise CommandRejectedError(msg, KEY_NOT_VACANT, parameter=f"vacant[{index}]")

    return check


def _specs(ops: Iterable[BatchOp | str]) -> list[CommandSpec]:
    """The command specs of ``ops``, each checked before anything is planned."""
    if isinstance(ops, (str, bytes, dict)) or not isinstance(ops, Iterable):
        msg = f"ops must be a sequence of operations, got {type(ops).__name__}"
        raise InvalidArgumentTypeError(msg, parameter="ops")
    specs: list[CommandSpec] = []
    for index, op in enumerate(ops):
        if len(specs) >= MAX_BATCH_OPS:
            msg = f"a batch holds at most {MAX_BATCH_OPS} operations; split it"
            raise CommandRejectedError(msg, "batch_too_large", parameter="ops")
        name = f"ops[{index}]"
        try:
            specs.append(_spec(op, name))
        except (CommandRejectedError, InvalidArgumentError) as refused:
            # every refusal names its op: an item check names only its field ("statement")
            parameter = refused.parameter
            if not (parameter or "").startswith(name):
                refused.parameter = f"{name}.{parameter}" if parameter else name
            raise
    if not specs:
        raise CommandRejectedError("ops holds no operation", "empty_batch", parameter="ops")
    return specs


def _refused_op(error: UnknownMemoryError | SupersededTargetError, specs: list[CommandSpec]) -> str:
    """``ops[i]``: the op whose decision raised ``error`` (its ``turn``); for a refusal
    found after the decisions (reconciliation's), the first forget of ``specs`` that
    ``error`` names by its target id, else the one forget by words when there is exactly one
    (``ops`` otherwise). Decisions go in order, so the first match is the op refused."""
    if error.turn is not None and 1 <= error.turn <= len(specs):
        return f"ops[{error.turn - 1}]"
    if isinstance(error, SupersededTargetError):
        named = [i for i, spec in enumerate(specs) if spec.target == error.target]
    else:
        shown = str(error)
        named = [i for i, spec in enumerate(specs) if spec.target and str(spec.target) in shown]
    by_words = [i for i, spec in enumerate(specs) if spec.words is not None]
    if not named and len(by_words) == 1:
        named = by_words
    return f"ops[{named[0]}]" if named else "ops"


def _spec(op: object, name: str) -> CommandSpec:
    if isinstance(op, str):
        op = Remember(statement=op)
    if isinstance(op, Remember):
        try:
            tags = checked_tags(op.tags, f"{name}.tags")
        except CommandRejectedError:
            checked_statement(op.statement, f"{name}.statement")  # its refusal comes first
            raise
        raw: dict[str, Any] = {
            "kind": "semantic",
            "subject": op.subject,
            "predicate": op.predicate,
            "value": op.value,
            "statement": op.statement,
            "source": "fact",
            "scope": "user",
            "reason": "the host asked to remember this",
            "importance": 0.9,
            "confidence": 1.0,
            "tags": tags,
        }
        document = op.document is True
        text, item = checked_remember(raw, f"{name}.statement", document=document)
        return CommandSpec(
            intent="remember",
            text=text,
            item=item,
            occurred_at=op.occurred_at,
            document=document,
        )
    if isinstance(op, Forget):
        wanted = as_memory_id(op.target)
        if wanted is not None:
            return CommandSpec(intent="forget", text=None, target=wanted)
        words = checked_statement(op.target, f"{name}.target")
        return CommandSpec(intent="forget", text=None, words=words)
    msg = f"{name} must be a string, Remember or Forget, got {type(op).__name__}"
    raise InvalidArgumentTypeError(msg, parameter=name)


def check_op(op: BatchOp | str, name: str = "ops[0]") -> None:
    """Check ``op`` as :func:`apply_batch` checks each operation before anything is planned,
    writing nothing: its statement and tags and, for a remember, its item (validation,
    the secret door). What depends on the store (a forget's target) is not checked.

    :raises CommandRejectedError: what :func:`apply_batch` would refuse ``op`` with
        (``parameter`` under ``name``).
    :raises InvalidArgumentTypeError: ``op`` is neither a string, a :class:`Remember` nor
        a :class:`Forget`.
    """
    _spec(op, name)  # a remember's item is validated there (checked_remember)


def remember_many(
    engine: MemoryStore,
    namespace: Namespace,
    items: Sequence[Remember | str] | Iterable[Remember | str],
) -> BatchResult:
    """Remember every item of ``items`` (strings or :class:`Remember`) as one command
    (:func:`apply_batch`; the errors are its)."""
    return apply_batch(engine, namespace, items)
