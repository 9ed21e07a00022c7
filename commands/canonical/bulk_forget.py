"""Bulk forget: forget every retrievable memory of exactly one namespace in ONE command.

``forget_all(engine, namespace)`` (also :meth:`MemoryEngine.forget_all` and
``memory-ledger forget --all``) reads the namespace's memories from the ledger (its
``namespace:`` tag, :mod:`memory_ledger.ledger.tags`) and appends, in one transaction under
the append condition "no memory event of this namespace since I read it"
(:mod:`commands.canonical.boundary`): a :class:`NamespaceForgotten` naming the command and every
memory
it forgot, and one ``MemoryForgotten`` per memory carrying the same ``command_id``. So the
ledger says what was forgotten and by which command; each forget is a tombstone (evidence
observed before it, or whose ``occurred_at`` is earlier than the command's ``recorded_at``,
never re-activates the memory). Other namespaces are never read or
written. A namespace with an empty or missing part is refused, never read as "all". When the
namespace holds no retrievable memory the call is a no-op: it writes nothing and returns 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING
from uuid import UUID, uuid5

from memory_ledger.commands.canonical.boundary import DecisionReads, append_decision
from memory_ledger.ledger.events import LedgerEvent, MemoryForgotten, NamespaceForgotten
from memory_ledger.ledger.ids import (
    ID_ROOT,
    InvalidNamespaceError,
    Namespace,
)
from memory_ledger.ledger.key_errors import NamespaceErasedError

if TYPE_CHECKING:
    from memory_ledger.commands.store import MemoryStore

__all__ = ["FORGET_ALL_SESSION", "forget_all", "forget_all_at"]

FORGET_ALL_SESSION = "forget-all"
"""The ``session_id`` the events of a bulk forget carry (no conversation asked for it)."""


def _command_id(namespace: Namespace, after: int) -> UUID:
    """A derived id: the namespace and the ledger head the command decided at."""
    return uuid5(ID_ROOT, f"forget-all\x1f{namespace.key()}\x1f{after}")


def forget_all(engine: MemoryStore, namespace: Namespace, *, requested_by: str = "") -> int:
    """Forget every retrievable memory of ``namespace``; return how many were forgotten
    (:func:`forget_all_at`, which says the raised errors, without the position)."""
    return forget_all_at(engine, namespace, requested_by=requested_by)[0]


def forget_all_at(
    engine: MemoryStore, namespace: Namespace, *, requested_by: str = ""
) -> tuple[int, int]:
    """Forget every retrievable memory of ``namespace``; return how many were forgotten and
    the ledger position of the last event written (0 when nothing was written).

    When nothing is retrievable (an empty namespace, or one already forgotten) nothing is
    written and 0 is returned: the ledger records commands that changed memory. ``requested_by``
    is a free label stored with the command (e.g. ``"cli"``).

    :raises InvalidNamespaceError: a namespace part is missing, empty or too long, or holds
        a secret-shaped value (``reason_code`` ``secret_detected``, naming the part, never
        its value: no memory can be stored under such a namespace, and ``memory-ledger
        forget`` printed it back).
    :raises NamespaceErasedError: ``namespace`` was erased (``reason_code``
        ``namespace_erased``; nothing is written), as for ``remember`` and ``forget``.
    :raises ConcurrencyConflictError: concurrent commands kept changing the namespace's
        memories (nothing was written).
    """
    if not isinstance(namespace, Namespace):
        msg = f"forget_all needs a Namespace, got {type(namespace).__name__}"
        raise InvalidNamespaceError(msg)
    namespace.validated()
    from memory_ledger.commands.secret_door import check_identifiers  # detect_secrets: on use

    check_identifiers(
        (
            ("tenant", namespace.tenant),
            ("principal", namespace.principal),
            ("scope_id", namespace.scope_id),
        ),
        "no memory is stored under it",
    )
    with engine.ledger_guard():
        engine.keyring.refresh()
    if engine.keyring.erased_namespace_ids and engine.keyring.is_erased(namespace):
        # As remember, forget and session do: an erased namespace is never written, and
        # "0 forgotten" would hide that it is gone for good.
        raise NamespaceErasedError(f"namespace {namespace.key()!r} was erased")
    forgotten: list[UUID] = []

    def plan(reads: DecisionReads) -> Sequence[LedgerEvent]:
        forgotten.clear()
        states = reads.namespace_memories()
        forgotten.extend(sorted(m for m, s in states.items() if s.retrievable))
        if not forgotten:
            return []  # nothing to forget: a no-op, no record
        command = engine.keyring.digests.bulk_forget_command_id(namespace, reads.after)
        at = datetime.now(UTC)
        events: list[LedgerEvent] = [
            NamespaceForgotten(
                originator_id=engine.keyring.digests.bulk_forget_stream_id(namespace, command),
                originator_version=1,
                recorded_at=at,
                namespace=namespace,
                command_id=command,
                forgotten=tuple(forgotten),
                requested_by=requested_by,
            )
        ]
        for memory in forgotten:
            events.append(
                MemoryForgotten(
                    originator_id=memory,
                    originator_version=states[memory].version + 1,
                    recorded_at=at,
                    namespace=namespace,
                    session_id=FORGET_ALL_SESSION,
                    turn_id=0,
                    command_id=command,
                    occurred_at=at,  # the tombstone's time: the bulk command's
                )
            )
        return events

    positions = append_decision(engine, namespace, plan, what=f"forget_all({namespace.key()})")
    return len(forgotten), (positions[-1] if positions else 0)
