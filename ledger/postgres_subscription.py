"""The PostgreSQL ledger's subscription: every append is delivered, whenever it commits.

The library's ``PostgresSubscription`` pulls what is recorded in one thread and runs
``LISTEN`` in another, started beside the first pull. An append committed after the first
pull read the log and before ``LISTEN`` holds its connection sends its ``NOTIFY`` to nobody,
and the pull thread then waits for a wake-up that never comes: the append is never delivered.

:class:`PostgresLedgerSubscription` closes that gap twice over:

- once ``LISTEN`` is in place it wakes the pull thread, which reads the log again (a
  catch-up): whatever committed before ``LISTEN`` is read by that pull, whatever commits
  after it is notified;
- the pull thread never waits longer than :attr:`PostgresLedgerSubscription.poll_interval`
  seconds for a notification (a bounded poll, as the DCB subscription of
  :mod:`memory_ledger.ledger.postgres_dcb` does), so a notification lost for any other
  reason delays a delivery by at most that long.
"""

from __future__ import annotations

from eventsourcing.postgres import PostgresSubscription
from psycopg.sql import SQL, Identifier

__all__ = ["PostgresLedgerSubscription"]


class PostgresLedgerSubscription(PostgresSubscription):
    """Iterate a PostgreSQL ledger's notifications after ``gt`` (of ``topics``, all when
    empty), blocking for new ones: woken by ``LISTEN``/``NOTIFY``, caught up once ``LISTEN``
    is in place, and polling every :attr:`poll_interval` seconds.

    Errors are the library's: an error in either thread stops the subscription and is
    re-raised by ``__next__``.
    """

    poll_interval: float = 1.0
    """Longest wait (seconds) for a notification before the log is read again."""

    def _listen(self) -> None:
        try:
            with self._recorder.datastore.get_connection() as conn:
                conn.execute(SQL("LISTEN {0}").format(Identifier(self._recorder.channel_name)))
                # Appends committed before LISTEN took hold notified nobody: read again.
                self._has_been_notified.set()
                while not self._has_been_stopped and not self._thread_error:
                    # 0.1 s bounds how long stop() waits for this thread (as the library's).
                    for _ in conn.notifies(timeout=0.1, stop_after=1):
                        self._has_been_notified.set()
        except BaseException as e:  # noqa: BLE001 - re-raised by __next__ (the library's way)
            if self._thread_error is None:
                self._thread_error = e
            self.stop()

    def _loop_on_pull(self) -> None:
        try:
            self._pull()  # already recorded
            while not self._has_been_stopped:
                self._has_been_notified.wait(timeout=self.poll_interval)
                self._pull()  # newly recorded (or nothing, after a quiet interval)
        except BaseException as e:  # noqa: BLE001 - re-raised by __next__ (the library's way)
            if self._thread_error is None:
                self._thread_error = e
            self.stop()
