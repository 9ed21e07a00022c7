"""Reading the ledger back as events in position order (for ``events`` and exports)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import msgspec

from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.ledger.errors import at_position
from memory_ledger.ledger.events import ErasedPayload, LedgerEvent
from memory_ledger.ledger.mapper import RECORD_DAMAGE

__all__ = ["ENVELOPE_KEYS", "event_record", "event_type", "iter_events"]

ENVELOPE_KEYS = frozenset({"position", "type", "stream_id", "stream_version", "recorded_at"})
"""The keys :func:`event_record` adds around an event's own fields (and an erased record's
``erased``/``key_id``). No event class of the catalog has a field of these names
(``originator_id``/``originator_version``/``recorded_at`` are the base class's), so an
event's own fields, e.g. KnowledgeBound's package ``version``, are never overwritten."""


def iter_events(
    engine: MemoryEngine, *, start: int = 1, limit: int | None = None, page: int = 1000
) -> Iterator[tuple[int, LedgerEvent]]:
    """Yield ``(position, event)`` from ``start`` on, at most ``limit``, reading in pages."""
    decode = engine.event_decoder()
    position = max(start, 1) - 1
    remaining = limit
    while remaining is None or remaining > 0:
        size = page if remaining is None else min(page, remaining)
        records = engine.read_records(position, size)
        if not records:
            return
        for at, raw_id, version, topic, state in records:
            try:
                event = decode(topic, state, raw_id, version)
            except RECORD_DAMAGE as e:
                raise at_position(e, at) from e
            yield at, event
        position = records[-1][0]
        if remaining is not None:
            remaining -= len(records)


def event_type(event: LedgerEvent) -> str:
    """The event's type name: its class name, or for an erased payload the class it was
    stored as (the topic stays in clear)."""
    if type(event) is ErasedPayload:
        return event.topic.rpartition(":")[2].rpartition(".")[2]
    return type(event).__name__


def event_record(position: int, event: LedgerEvent) -> dict[str, Any]:
    """A JSON-ready dict: ``position``, ``type`` (class name), ``stream_id``,
    ``stream_version`` (the event's version in its stream), ``recorded_at``, then the
    event's own fields under their own names (none is one of :data:`ENVELOPE_KEYS`), every
    one of them (also those a record leaves out when equal to their default).

    An erased payload (its namespace's data key was destroyed) gives only what the record
    keeps in clear: ``type`` (the class it was stored as), ``stream_id``,
    ``stream_version``, ``recorded_at``, ``erased: true`` and the destroyed ``key_id``; no
    namespace, no content.
    """
    if type(event) is ErasedPayload:
        return {
            "position": position,
            "type": event_type(event),
            "stream_id": str(event.originator_id),
            "stream_version": event.originator_version,
            "recorded_at": msgspec.to_builtins(event.recorded_at),
            "erased": True,
            "key_id": None if event.key_id is None else str(event.key_id),
        }
    fields = msgspec.to_builtins(event)
    if event.__struct_config__.omit_defaults:  # stored without them: shown with every field
        for name in event.__struct_fields__:
            if name not in fields:
                fields[name] = msgspec.to_builtins(getattr(event, name))
    record: dict[str, Any] = {
        "position": position,
        "type": type(event).__name__,
        "stream_id": fields.pop("originator_id"),
        "stream_version": fields.pop("originator_version"),
        "recorded_at": fields.pop("recorded_at"),
    }
    record.update(fields)
    return record
