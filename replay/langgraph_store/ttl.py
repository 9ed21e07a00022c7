"""TTL expiry: an item whose TTL ran out is forgotten by a recorded command.

PostgresStore's semantics (``langgraph-checkpoint-postgres``): a TTL is minutes after the
last write (LangGraph's ``refresh_on_read`` is not supported here: reads never write the
ledger), expired items are no longer read, and a sweeper deletes them every
``sweep_interval_minutes``. Here the deletion is an engine ``forget`` whose session id
starts ``langgraph-ttl-`` (:data:`~memory_ledger.replay.langgraph_store.writes.EXPIRY_PREFIX`):
the reason is recorded in the ledger, and a value put again meanwhile is left alone.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory_ledger.replay.langgraph_store.reads import ItemReader
    from memory_ledger.replay.langgraph_store.writes import Writer

__all__ = ["Sweeper", "sweep"]


def sweep(reader: ItemReader, writer: Writer) -> int:
    """Record an expiry for every item ``reader`` reads whose TTL has run out (through
    ``writer``); how many."""
    now = datetime.now(UTC)
    done = 0
    for _, (namespace, key), _, ttl in list(reader.docs()):
        if ttl is None:
            continue
        current = reader.current(namespace, key)
        if current is None or not current.expired(now):
            continue
        if writer.expire(namespace, key, current.memory_id):
            done += 1
    return done


class Sweeper:
    """A daemon thread running :func:`sweep` every ``interval`` seconds until stopped."""

    def __init__(self, reader: ItemReader, writer: Writer, interval: float) -> None:
        self.reader = reader
        self.writer = writer
        self.interval = interval
        self.swept = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ledgerstore-ttl", daemon=True)

    def start(self) -> None:
        """Start the thread."""
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to stop and wait for it."""
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.swept += sweep(self.reader, self.writer)
