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
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

import msgspec

from memory_ledger.commands.errors import CommandRejectedError, UnknownMemoryError
from memory_ledger.ledger.events import ReconciliationReport
from memory_ledger.ledger.ids import Namespace, memory_id, normalize_statement

if TYPE_CHECKING:
    from memory_ledger.commands.engine import MemoryEngine
    from memory_ledger.commands.recall import MemoryDoc
    from memory_ledger.commands.session import CommandResult

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
    :raises ValueError: the prefix is empty or not a string.
    """

    def __init__(self, engine: MemoryEngine, session_prefix: str = DIRECT_SESSION_PREFIX) -> None:
        if not isinstance(session_prefix, str) or not session_prefix.strip():
            msg = f"session_prefix must be a non-empty string, got {session_prefix!r}"
            raise ValueError(msg)
        self._engine = engine
        self._prefix = session_prefix

    def remember(
        self,
        namespace: Namespace,
        statement: str,
        *,
        subject: str | None = None,
        predicate: str | None = None,
        value: str | None = None,
        tags: Sequence[str] = (),
    ) -> DirectResult:
        """Store ``statement`` as canonical memory of ``namespace`` (durable on return).

        ``subject``/``predicate``/``value`` make it a keyed fact: a later remember of the
        same subject and predicate supersedes it (single-valued attribute). Remembering a
        statement that is already active reinforces it.

        :raises CommandRejectedError: empty statement, a secret-shaped value, or an item
            that fails validation (``reason_code`` says which rule).
        :raises InvalidNamespaceError: an empty or invalid namespace part.
        """
        text = _statement(statement, "statement")
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
            "tags": list(tags),
        }
        if isinstance(tags, str):
            msg = "tags must be a sequence of strings, not one string"
            raise CommandRejectedError(msg, "invalid_tags")
        session_id, applied, report = self._run(namespace, "remember", text, item=item)
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
        :raises CommandRejectedError: an empty statement or a secret-shaped value.
        """
        target = self._target(namespace, statement_or_id)
        session_id, applied, report = self._run(
            namespace, "forget", target.statement, target=UUID(target.memory_id)
        )
        return DirectResult(
            intent="forget",
            memory_id=UUID(target.memory_id),
            target=UUID(target.memory_id),
            session_id=session_id,
            position=report.position or applied.position,
            report=report,
        )

    def pin(self, namespace: Namespace, statement_or_id: str | UUID) -> DirectResult:
        """Pin one memory of ``namespace`` (by id, or the best lexical match for a
        statement): a pinned memory is never pruned.

        :raises UnknownMemoryError: as :meth:`forget`.
        :raises CommandRejectedError: an empty statement or a secret-shaped value.
        """
        target = self._target(namespace, statement_or_id)
        session_id, applied, report = self._run(
            namespace, "pin", target.statement, target=UUID(target.memory_id)
        )
        return DirectResult(
            intent="pin",
            memory_id=UUID(target.memory_id),
            target=UUID(target.memory_id),
            session_id=session_id,
            position=report.position or applied.position,
            report=report,
        )

    def correct(
        self, namespace: Namespace, statement: str, *, target: str | UUID | None = None
    ) -> DirectResult:
        """Replace what memory says with ``statement``: the target (by id, or the best
        lexical match for ``statement`` when ``target`` is None) is superseded by the new
        statement, which keeps the target's subject and predicate.

        :raises UnknownMemoryError: ``target`` names no retrievable memory of this namespace.
        :raises CommandRejectedError: empty statement, a secret-shaped value.
        """
        text = _statement(statement, "statement")
        resolved = self._target(namespace, target) if target is not None else None
        session_id, applied, report = self._run(
            namespace,
            "correct",
            text,
            target=UUID(resolved.memory_id) if resolved is not None else None,
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

    def _target(self, namespace: Namespace, statement_or_id: str | UUID) -> MemoryDoc:
        """The retrievable memory of ``namespace`` a forget/correct names."""
        wanted = _as_uuid(statement_or_id)
        if wanted is not None:
            doc = self._engine.retrievable_memory(namespace, wanted)
            if doc is None:
                raise UnknownMemoryError(str(wanted))
            return doc
        text = _statement(statement_or_id, "statement_or_id")
        doc = self._engine.best_match(namespace, text)
        if doc is None:
            msg = f"no memory of this namespace matches {text[:60]!r}"
            raise UnknownMemoryError(msg, reason_code="no_match")
        return doc

    def _run(
        self,
        namespace: Namespace,
        intent: Literal["remember", "forget", "correct", "pin"],
        text: str,
        *,
        item: dict[str, Any] | None = None,
        target: UUID | None = None,
    ) -> tuple[str, CommandResult, ReconciliationReport]:
        session_id = self._prefix + uuid.uuid4().hex
        with self._engine.session(namespace, session_id) as session:
            applied = session.apply_explicit_command(intent, text, 1, item=item, target=target)
            report = session.finish()
        return session_id, applied, report


def _statement(value: object, name: str) -> str:
    if not isinstance(value, str):
        msg = f"{name} must be a string, got {type(value).__name__}"
        raise CommandRejectedError(msg, "invalid_statement")
    text = " ".join(value.split())
    if not text:
        raise CommandRejectedError(f"{name} is empty", "empty_statement")
    return text


def _as_uuid(value: object) -> UUID | None:
    if isinstance(value, UUID):
        return value
    if isinstance(value, str):
        try:
            return UUID(value.strip())
        except ValueError:
            return None
    return None
