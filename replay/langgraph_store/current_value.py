"""The current value of a LangGraph address (:class:`Current`) and the history its events
fold to (:class:`History`, :func:`fold_times`): what :class:`~memory_ledger.replay.
langgraph_store.reads.ItemReader` answers and remembers.

Nothing remembered is handed out: a current value keeps the JSON text the ledger records
(an immutable string) and :attr:`Current.value` decodes a new dict on every access
(``msgspec``, about half a microsecond for a small value), so a caller who edits an item's
value changes nothing another read returns, nor what a filter matches.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any, NamedTuple
from uuid import UUID

import msgspec

from memory_ledger.ledger.events import (
    LedgerEvent,
    MemoryActivated,
    MemoryForgotten,
    MemoryPruned,
    MemoryReinforced,
    MemorySuperseded,
)

__all__ = ["EMPTY", "NEVER", "Current", "Fold", "History", "fold_times", "fresh_value"]

Fold = tuple[UUID | None, datetime | None, datetime | None]
"""``(holder, created_at, updated_at)`` of an address's events (:func:`fold_times`)."""
EMPTY: Fold = (None, None, None)
"""The fold of no event."""


class History(NamedTuple):
    """What an address's events fold to, kept so that a batch's own records continue the
    fold (:meth:`ItemReader.wrote`) instead of a new read: the fold, the memories activated
    under its key (latest activation first, each once) and the recorded time of its first
    event (None: no event)."""

    fold: Fold
    order: tuple[UUID, ...]
    first: datetime | None


NEVER = History(EMPTY, (), None)
"""The history of an address nothing was ever activated at."""

_DECODE = msgspec.json.Decoder().decode


def fresh_value(raw: str) -> dict[str, Any]:
    """A new dict of the value whose recorded JSON is ``raw`` (shares no object with any
    other call's). ``raw`` was written by ``records.encode_record`` (``json.dumps``) and
    read back by ``json.loads`` when it was cached, so it decodes; ``msgspec`` decodes it
    as ``json.loads`` does, about four times faster; ``json.loads`` answers any text
    ``msgspec`` refuses."""
    try:
        value = _DECODE(raw)
    except msgspec.DecodeError:
        value = json.loads(raw)
    return value if isinstance(value, dict) else {}


class Current(msgspec.Struct, frozen=True, kw_only=True):
    """The current value of one address: its memory (and its revision), value (``raw``,
    its recorded JSON text; :attr:`value`, a new dict per access), TTL and recorded
    times."""

    memory_id: UUID
    namespace: tuple[str, ...]
    key: str
    raw: str
    created_at: datetime
    updated_at: datetime
    ttl: float | None
    position: int
    revision: int = 0

    @property
    def value(self) -> dict[str, Any]:
        """The value, decoded anew from :attr:`raw` on each access: a dict no other read
        holds (a caller may edit it without changing what the store returns later)."""
        return fresh_value(self.raw)

    def expired(self, now: datetime, refreshed: datetime | None = None) -> bool:
        """Whether the TTL (minutes after the last write, or after ``refreshed``, the last
        read, when later) has run out at ``now``."""
        if self.ttl is None:
            return False
        last = self.updated_at if refreshed is None else max(self.updated_at, refreshed)
        return now >= last + timedelta(minutes=self.ttl)


def fold_times(events: Sequence[tuple[int, LedgerEvent]], start: Fold = EMPTY) -> Fold:
    """``(holder, created_at, updated_at)`` of the address's current run: the memory that
    holds the key after the events, the recorded time of the first write since the key was
    last empty (deleted or expired), and of the last write (a new value or the same again).
    ``start``: the fold of the events before these (default: none)."""
    holder, created, updated = start
    for _, event in events:
        mid = event.originator_id
        if isinstance(event, MemoryActivated):
            if holder is None:
                created = event.recorded_at
            holder = mid
            updated = event.recorded_at
        elif isinstance(event, MemoryReinforced) and mid == holder:
            updated = event.recorded_at
        elif isinstance(event, MemorySuperseded) and mid == holder:
            holder = event.superseded_by
        elif isinstance(event, MemoryForgotten | MemoryPruned) and mid == holder:
            holder = None
    return holder, created, updated
