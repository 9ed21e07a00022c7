"""Writing LangGraph puts as engine commands: a put is a ``remember`` of a keyed fact, a
delete (a put of None) and a TTL expiry are a ``forget``.

Every write goes through the engine's direct commands (``commands.engine.DirectCommands``),
so the secret door, the one decision path and the namespace rules apply as to any other
caller; the session id of each command names the caller: ``langgraph-`` for puts and
deletes, ``langgraph-ttl-`` for expiries (the recorded reason of an expiry:
``memory-ledger explain`` shows it). :meth:`Writer.apply` is the one place a batch is sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import msgspec

from memory_ledger.commands.engine import DirectCommands
from memory_ledger.commands.errors import SupersededTargetError, UnknownMemoryError
from memory_ledger.replay.langgraph_store.records import PREDICATE, encode_record

if TYPE_CHECKING:
    from uuid import UUID

    from memory_ledger.commands.engine import MemoryEngine
    from memory_ledger.ledger.ids import Namespace
    from memory_ledger.replay.langgraph_store.reads import ItemReader

__all__ = ["EXPIRY_PREFIX", "PUT_PREFIX", "Put", "Writer"]

PUT_PREFIX = "langgraph-"
"""Session id prefix of the store's puts and deletes."""

EXPIRY_PREFIX = "langgraph-ttl-"
"""Session id prefix of a TTL expiry (its recorded reason)."""

_RETRIES = 5


class Put(msgspec.Struct, frozen=True, kw_only=True):
    """One write of a batch after collapsing: ``value`` None deletes; ``fields`` are the
    paths indexed (None: the whole document; ``()``: not indexed); ``ttl`` in minutes;
    ``occurred_at``: when it happened (an import keeps the original time)."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None
    fields: tuple[str, ...] | None = None
    ttl: float | None = None
    occurred_at: datetime | None = None


class Writer:
    """Sends puts to the engine for one engine namespace."""

    def __init__(self, engine: MemoryEngine, namespace: Namespace, reader: ItemReader) -> None:
        self.namespace = namespace
        self.reader = reader
        self.puts = DirectCommands(engine, PUT_PREFIX)
        self.expiries = DirectCommands(engine, EXPIRY_PREFIX)

    def apply(self, puts: Sequence[Put]) -> list[int]:
        """Send ``puts`` (already collapsed: one per address) in order; the ledger positions
        written. The one place a batch reaches the engine.

        :raises CommandRejectedError: a value the engine refuses (a secret-shaped value:
            ``SecretRefusedError``; too long: ``field_too_long``; not JSON); the puts before
            it in the batch are recorded.
        """
        return [self._one(put) for put in puts]

    def _one(self, put: Put) -> int:
        if put.value is None:
            return self.forget(put.namespace, put.key, self.puts)
        record = encode_record(put.namespace, put.key, put.value, put.fields, put.ttl)
        done = self.puts.remember(
            self.namespace,
            record.statement,
            subject=record.subject,
            predicate=PREDICATE,
            value=record.value,
            tags=record.tags,
            occurred_at=put.occurred_at,
        )
        return done.position

    def forget(
        self,
        namespace: tuple[str, ...],
        key: str,
        commands: DirectCommands | None = None,
        memory: UUID | None = None,
    ) -> int:
        """Forget the current value at the address (nothing when there is none); 0 when
        nothing was written. ``memory``: forget only this memory (an expiry: a value put
        again meanwhile is left alone)."""
        commands = commands or self.puts
        for _ in range(_RETRIES):
            current = self.reader.current(namespace, key)
            if current is None or (memory is not None and current.memory_id != memory):
                return 0
            try:
                return commands.forget(self.namespace, current.memory_id).position
            except SupersededTargetError:
                if memory is not None:
                    return 0
                continue  # a concurrent put replaced it: forget the new value
            except UnknownMemoryError:
                return 0  # a concurrent delete
        return 0
