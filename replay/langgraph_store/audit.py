"""What only a ledger can tell about a LangGraph item: its history, its value as of an
earlier point, and the lineage of its current value (the audit library of ``replay``).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal
from uuid import UUID

import msgspec
from langgraph.store.base import Item

from memory_ledger.ledger.events import MemoryActivated, MemoryForgotten, MemoryReinforced
from memory_ledger.replay.audit import Lineage, as_of, explain
from memory_ledger.replay.langgraph_store.records import PREDICATE, address_of, subject_of
from memory_ledger.replay.langgraph_store.writes import EXPIRY_PREFIX

if TYPE_CHECKING:
    from memory_ledger.commands.engine import MemoryEngine
    from memory_ledger.replay.langgraph_store.reads import ItemReader

__all__ = ["ItemVersion", "item_as_of", "item_explain", "item_history"]


class ItemVersion(msgspec.Struct, frozen=True, kw_only=True):
    """One recorded change of an item: ``action`` ``put`` (a new value), ``put_again`` (the
    same value again), ``deleted`` or ``expired`` (a TTL ran out); ``value`` the value put
    (None for a removal); ``position`` and ``recorded_at`` from the ledger, ``occurred_at``
    the time the put carried (an import's original time), ``session_id`` the command's."""

    action: Literal["put", "put_again", "deleted", "expired"]
    position: int
    recorded_at: datetime
    occurred_at: datetime | None
    value: dict[str, Any] | None
    memory_id: UUID
    session_id: str


def item_history(reader: ItemReader, namespace: tuple[str, ...], key: str) -> list[ItemVersion]:
    """Every recorded change of the item at ``(namespace, key)``, oldest first (empty: never
    put)."""
    versions: list[ItemVersion] = []
    values: dict[UUID, dict[str, Any] | None] = {}
    for position, event in reader.key_events(tuple(namespace), str(key)):
        mid = event.originator_id
        if isinstance(event, MemoryActivated):
            raw = json.loads(event.item.value) if event.item.value else None
            values[mid] = raw if isinstance(raw, dict) else None
            action: Literal["put", "put_again", "deleted", "expired"] = "put"
            value, occurred, session = values[mid], event.occurred_at, event.session_id
        elif isinstance(event, MemoryReinforced):
            action, value, occurred, session = "put_again", values.get(mid), None, event.session_id
        elif isinstance(event, MemoryForgotten):
            expired = event.session_id.startswith(EXPIRY_PREFIX)
            action = "expired" if expired else "deleted"
            value, occurred, session = None, event.occurred_at, event.session_id
        else:
            continue
        versions.append(
            ItemVersion(
                action=action,
                position=position,
                recorded_at=event.recorded_at,
                occurred_at=occurred,
                value=value,
                memory_id=mid,
                session_id=session,
            )
        )
    return versions


def item_as_of(
    reader: ItemReader,
    namespace: tuple[str, ...],
    key: str,
    at: int | datetime | str,
    *,
    occurred: bool = False,
) -> Item | None:
    """The item as it stood at ``at`` (a ledger position, a recorded time, or with
    ``occurred`` an occurred time), read from the read models rebuilt to that point
    (:func:`memory_ledger.replay.as_of`); None when it did not exist then.

    :raises PointError: ``at`` is not a point; :raises PositionOutOfRangeError: beyond the
        ledger head.
    """
    subject = subject_of(namespace, key)
    with as_of(reader.engine, at, occurred=occurred) as past:
        point = int(past.describe()["position"])
        rows = [
            row
            for row in past.memories(reader.namespace)
            if row["subject"] == subject and row["predicate"] == PREDICATE
        ]
    for row in rows:
        if address_of(tuple(row["tags"] or ())) != (tuple(namespace), key):
            continue
        memory = UUID(row["memory_id"])
        times = [
            v.recorded_at
            for v in item_history(reader, namespace, key)
            if v.memory_id == memory and v.action in ("put", "put_again") and v.position <= point
        ]
        first = times[0] if times else row["activated_at"]
        return Item(
            value=json.loads(row["value"]),
            key=key,
            namespace=tuple(namespace),
            created_at=first,
            updated_at=times[-1] if times else first,
        )
    return None


def item_explain(reader: ItemReader, namespace: tuple[str, ...], key: str) -> Lineage | None:
    """The lineage of the item's current value (:func:`memory_ledger.replay.explain`): the
    command that put it, its history and every recall that served it; None when the item
    does not exist now."""
    current = reader.current(tuple(namespace), str(key))
    if current is None:
        return None
    engine: MemoryEngine = reader.engine
    return explain(engine, str(current.memory_id), reader.namespace)
