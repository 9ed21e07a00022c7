"""TTL expiry and refresh: an item whose TTL ran out is forgotten by a recorded command; a
read refreshes it (LangGraph's ``refresh_on_read``).

PostgresStore's semantics (``langgraph-checkpoint-postgres``): a TTL is minutes after the
item's last write or, with ``refresh_ttl`` (LangGraph's default, ``TTLConfig
["refresh_on_read"]``), its last read by ``get`` or ``search``; expired items are no longer
read, and a sweeper deletes them every ``sweep_interval_minutes``. Here the deletion is an
engine ``forget`` whose session id starts ``langgraph-ttl-``
(:data:`~memory_ledger.replay.langgraph_store.writes.EXPIRY_PREFIX`): the reason is
recorded in the ledger, and a value put again meanwhile is left alone.

A read's refresh is a read-path record (:class:`~memory_ledger.ledger.events.RecallServed`,
session ``langgraph-read``, as a session's recall is recorded): :class:`Refresher` keeps the
time of each item's last read in memory (exact for the store that read it) and writes the
record buffered, at most once per item per twentieth of its TTL, within about a second
(:data:`FLUSH_SECONDS`) or at close. Each item's records share one stream
(:func:`refresh_stream`), so another process's store, or the same folder reopened, reads an
item's last refresh from the ledger before it calls the item expired. As every read-path
record, a refresh still buffered is lost in a crash (the item then expires up to a second
of reads earlier).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING
from uuid import UUID

from memory_ledger.ledger.digests import UNKEYED, IdDigests
from memory_ledger.ledger.events import RecalledItem, RecallServed
from memory_ledger.ledger.ids import Namespace, recall_stream_id

if TYPE_CHECKING:
    from memory_ledger.commands.engine import MemoryEngine
    from memory_ledger.replay.langgraph_store.reads import Current, ItemReader
    from memory_ledger.replay.langgraph_store.writes import Writer

__all__ = [
    "FLUSH_SECONDS",
    "REFRESH_SESSION",
    "Refresher",
    "Sweeper",
    "refresh_stream",
    "sweep",
]

REFRESH_SESSION = "langgraph-read"
"""The session id of every refresh record (``RecallServed.session_id``)."""
FLUSH_SECONDS = 1.0
"""How long a refresh record waits in the buffer before a timer thread writes it (seconds;
a sweep or close writes it sooner)."""
REFRESH_QUERY = "refresh_ttl"
"""The ``query`` of every refresh record (``memory-ledger events`` shows it)."""
_RECORD_EVERY = 1 / 20
"""A refresh is recorded at most once per item per this fraction of its TTL."""
_REMEMBERED = 200_000


def refresh_stream(namespace: Namespace, memory: UUID, digests: IdDigests = UNKEYED) -> UUID:
    """The stream of the refresh records of one memory (an item's value) of ``namespace``:
    a read-path stream of the session :data:`REFRESH_SESSION` (its id derived by
    ``digests``, the store's)."""
    session = digests.session_stream_id(namespace, REFRESH_SESSION)
    return recall_stream_id(session, f"ttl/{memory}")


class Refresher:
    """The last read of each item of one engine namespace, in memory and in the ledger.

    :param clock: the time TTLs are judged at (aware; default: the wall clock).
    """

    def __init__(
        self,
        engine: MemoryEngine,
        namespace: Namespace,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.engine = engine
        self.namespace = namespace
        self.clock = clock or (lambda: datetime.now(UTC))
        self._lock = threading.Lock()
        self._read: dict[UUID, datetime] = {}
        """memory -> its last refresh known here (this store's reads and the ledger's)."""
        self._recorded: dict[UUID, datetime] = {}
        """memory -> the time of its last refresh record written or buffered here."""
        self._versions: dict[UUID, int] = {}
        """memory -> the last version of its refresh stream read or written here."""
        self._pending: list[RecallServed] = []
        self._timer: threading.Timer | None = None

    def refresh(self, current: Current, now: datetime) -> None:
        """Record that ``current`` (an item with a TTL, not expired at ``now``) was read."""
        if current.ttl is None:
            return
        memory = current.memory_id
        every = timedelta(minutes=current.ttl * _RECORD_EVERY)
        with self._lock:
            if len(self._read) > _REMEMBERED:
                self._read.clear()
                self._recorded.clear()
                self._versions.clear()
            self._read[memory] = max(now, self._read.get(memory, now))
            last = self._recorded.get(memory)
            if last is not None and now - last < every:
                return
            self._recorded[memory] = now
            version = max(int(now.timestamp() * 1000), self._versions.get(memory, 0) + 1)
            self._versions[memory] = version
            if not self._pending:
                self._schedule()
            self._pending.append(
                RecallServed(
                    originator_id=refresh_stream(
                        self.namespace, memory, self.engine.keyring.digests
                    ),
                    originator_version=version,
                    recorded_at=now,
                    namespace=self.namespace,
                    session_id=REFRESH_SESSION,
                    turn_id=None,
                    query=REFRESH_QUERY,
                    path="live",
                    results=(
                        RecalledItem(
                            memory_id=memory, revision=current.revision, rank=1, score=0.0
                        ),
                    ),
                )
            )

    def expired(self, current: Current, now: datetime) -> bool:
        """Whether ``current``'s TTL has run out at ``now``, counted from its last write or
        its last read (this store's, or one the ledger records)."""
        if current.ttl is None:
            return False
        if not current.expired(now, self._read.get(current.memory_id)):
            return False
        return current.expired(now, self._load(current.memory_id))

    def _load(self, memory: UUID) -> datetime | None:
        """The last refresh of ``memory`` after reading its refresh records written since
        this store last looked (by any process)."""
        stream = refresh_stream(self.namespace, memory, self.engine.keyring.digests)
        with self._lock:
            after = self._versions.get(memory, 0)
        events = self.engine.load_stream(stream, after=after)
        with self._lock:
            for event in events:
                if isinstance(event, RecallServed):
                    known = self._read.get(memory, event.recorded_at)
                    self._read[memory] = max(known, event.recorded_at)
                self._versions[memory] = max(
                    self._versions.get(memory, 0), event.originator_version
                )
            return self._read.get(memory)

    def _schedule(self) -> None:
        """Write the buffer :data:`FLUSH_SECONDS` from now, from a timer thread (called under
        the lock when the first record enters an empty buffer): the read that buffered it
        returns without waiting for a sync, and an idle store still writes it."""
        timer = threading.Timer(FLUSH_SECONDS, self.flush)
        timer.name = "ledgerstore-refresh"
        timer.daemon = True
        self._timer = timer
        timer.start()

    def flush(self) -> int:
        """Write every buffered refresh record now; how many were written. A record the
        ledger refuses (another process wrote the same item's refresh at the same
        millisecond, the namespace was erased, the ledger is gone) is dropped: read records
        may be lost, and never fail a read."""
        with self._lock:
            pending, self._pending = self._pending, []
        if not pending:
            return 0
        try:
            self.engine.append(pending)
            return len(pending)
        except Exception:  # noqa: BLE001 - a read-path record may be lost; try each alone
            written = 0
            for record in pending:
                try:
                    self.engine.append([record])
                    written += 1
                except Exception:  # noqa: BLE001,S112 - lost, as a buffered read record may be
                    continue
            return written

    def close(self) -> None:
        """Stop the timer (waiting for a flush under way) and write what is left."""
        timer = self._timer
        if timer is not None:
            timer.cancel()
            if timer.is_alive() and timer is not threading.current_thread():
                timer.join()
        self.flush()


def sweep(reader: ItemReader, writer: Writer, refresher: Refresher) -> int:
    """Record an expiry for every item ``reader`` reads whose TTL has run out now (the
    refresher's clock; its last read counts, :meth:`Refresher.expired`), through ``writer``;
    how many."""
    refresher.flush()  # this store's reads count for other processes' sweeps too
    now = refresher.clock()
    done = 0
    for _, (namespace, key), _, ttl in list(reader.docs()):
        if ttl is None:
            continue
        current = reader.current(namespace, key)
        if current is None or not refresher.expired(current, now):
            continue
        if writer.expire(namespace, key, current.memory_id):
            done += 1
    return done


class Sweeper:
    """A daemon thread running :func:`sweep` every ``interval`` seconds until stopped."""

    def __init__(
        self, reader: ItemReader, writer: Writer, refresher: Refresher, interval: float
    ) -> None:
        self.reader = reader
        self.writer = writer
        self.refresher = refresher
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
            self.swept += sweep(self.reader, self.writer, self.refresher)
