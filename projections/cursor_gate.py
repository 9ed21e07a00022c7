"""Cursors that read a projection file while its connection may be closed and reopened.

A DuckDB cursor (``conn.cursor()``) is a connection of its own to the same database: a
reader on another thread queries through it while the engine's connection catches up. But it
lives only as long as the connection it came from: when the engine closes that connection
(to rewrite the file after an erasure, :meth:`ProjectionStore.rewrite_erased`) every cursor
of it is closed, a query running on one fails (``Connection already closed``), and a
``CHECKPOINT`` refuses to run while another connection of the database is in a transaction.

:class:`CursorGate` orders the two: a query on a cursor runs inside :meth:`reading` (many
at once), closing or checkpointing the connection inside :meth:`exclusive`, which waits for
the queries running and holds new ones back until it ends. A cursor's holder then compares
the connection it came from with the store's (:attr:`CursorGate.generation`) and opens a new
cursor when the store reconnected.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["CursorGate"]


class CursorGate:
    """Readers (queries on cursors) and one exclusive holder (the connection's owner,
    closing or checkpointing it) of one projection file; never held by a reader while it
    waits for anything but its own query."""

    def __init__(self) -> None:
        self._state = threading.Condition(threading.Lock())
        self._readers = 0
        self._exclusive = 0
        self.generation = 0
        """How many times the connection was reopened (a cursor of an older generation is
        closed: open a new one)."""

    @contextmanager
    def reading(self) -> Iterator[int]:
        """Run one query on a cursor: waits while the connection is being closed or
        checkpointed; yields the connection's :attr:`generation` (compare it with the
        cursor's own)."""
        with self._state:
            self._state.wait_for(lambda: not self._exclusive)
            self._readers += 1
            generation = self.generation
        try:
            yield generation
        finally:
            with self._state:
                self._readers -= 1
                if not self._readers:
                    self._state.notify_all()

    @contextmanager
    def exclusive(self, *, reconnects: bool = False) -> Iterator[None]:
        """Close, rewrite or checkpoint the connection: waits for the queries running on
        its cursors to end, and holds new ones back until the block ends.
        ``reconnects``: the block replaces the connection (:attr:`generation` moves on)."""
        with self._state:
            self._exclusive += 1
            self._state.wait_for(lambda: not self._readers)
        try:
            yield
        finally:
            with self._state:
                self._exclusive -= 1
                if reconnects:
                    self.generation += 1
                self._state.notify_all()
