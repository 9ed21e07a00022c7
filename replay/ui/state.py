"""What the debugger keeps between requests: the read-only engine and caches keyed by the
ledger head (a host may still append to the store; a new head recomputes).

Requests run at the same time (Starlette runs the page handlers in a thread pool): no lock
is held around a page. The caches are guarded by a lock held only to read or store an
entry; a value is computed outside it, under a lock of its own key, so a request waits only
for a computation of the very value it asks for (two requests for one new point build it
once), never for another page.

Time-travel comparisons read what was current at each point from the live projection
(:func:`memory_ledger.replay.audit.moments.moment_at`: one query, no fold; occurred time folds).
Recall as of a point reads the live projection's memory history
(:func:`memory_ledger.replay.audit.past_recall.recall_point`: one query and an index build,
on its own DuckDB cursor; occurred time folds): the few last points asked for are kept open
(least recently used first out) with their indexes, so asking again, or going back and
forth between two, builds each point once. A kept point is lent to a request for as long as
it reads it (:meth:`UiState.point`, :meth:`UiState.moment` are context managers): one pushed
out meanwhile (by other points, or a new ledger head) is closed by its last borrower, never
under a request still reading it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from memory_ledger.replay.audit.past_indexes import PastIndexes
from memory_ledger.replay.ui.log import log_failure

if TYPE_CHECKING:
    from memory_ledger.commands.engine.memory_engine import MemoryEngine
    from memory_ledger.replay.audit.moments import Moment
    from memory_ledger.replay.audit.past_recall import PastRecall
    from memory_ledger.replay.audit.timetravel import AsOf

__all__ = ["UiState"]

T = TypeVar("T")

PointKey = tuple[str, int | datetime, int]
"""(mode, point, ledger head)."""


class Closable(Protocol):
    """What the state keeps open per point: closed when pushed out or at the end."""

    def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


class _Kept(Generic[C]):
    """A kept value and how many requests use it now (guarded by :attr:`UiState.lock`)."""

    __slots__ = ("evicted", "users", "value")

    def __init__(self, value: C, *, users: int = 0) -> None:
        self.value = value
        self.users = users
        self.evicted = False

    def push_out(self) -> bool:
        """Mark it pushed out of the cache; True when no request uses it (close it now),
        else its last user closes it."""
        self.evicted = True
        return self.users == 0


class UiState:
    """The engine (opened read-only), the request token, and the caches.

    :param engine: an open engine; the debugger never calls a command on it.
    :param token: the secret every request must carry (see :mod:`.app`).
    :param page_size: rows per page of every paged view (at least 1).
    :param kept_points: how many time-travel points stay open (recall points, moments).
    """

    def __init__(
        self, engine: MemoryEngine, token: str, *, page_size: int = 50, kept_points: int = 4
    ) -> None:
        self.engine = engine
        self.token = token
        self.page_size = max(1, page_size)
        self.kept_points = max(2, kept_points)
        self.lock = threading.RLock()
        """Guards the caches (held only to read or store an entry, never around a page)."""
        self._computing: dict[object, threading.Lock] = {}
        self._cache: dict[str, tuple[int, Any]] = {}
        self._points: OrderedDict[PointKey, _Kept[PastRecall | AsOf]] = OrderedDict()
        self._moments: OrderedDict[PointKey, _Kept[Moment]] = OrderedDict()
        self._indexes = PastIndexes()
        """Recall indexes built at earlier points (or copied from the engine's live recall
        index), a new point's index is derived from; dropped when the engine applies an
        erasure (they may hold the erased words)."""
        engine.when_erased(self._indexes.clear)
        self._closing = threading.Event()
        self._warming: threading.Thread | None = None

    def head(self) -> int:
        """The ledger head now."""
        return self.engine.head

    def _key_lock(self, key: object) -> threading.Lock:
        """The lock under which the value of ``key`` is computed (one per key)."""
        with self.lock:
            return self._computing.setdefault(key, threading.Lock())

    def cached(self, name: str, compute: Callable[[], T]) -> T:
        """``compute()``, computed once per ledger head under ``name`` (a request asking
        for it while it is computed waits for that computation, no other)."""
        head = self.head()
        with self._key_lock(name):
            with self.lock:
                hit = self._cache.get(name)
            if hit is not None and hit[0] == head:
                return hit[1]  # type: ignore[no-any-return]
            value = compute()
            with self.lock:
                self._cache[name] = (head, value)
            return value

    def forget(self, name: str) -> None:
        """Drop the cached value ``name`` (recomputed on next use)."""
        with self.lock:
            self._cache.pop(name, None)

    @contextmanager
    def point(self, mode: str, at: int | datetime) -> Iterator[PastRecall | AsOf]:
        """Recall as of ``at`` (``mode`` ``position``, ``recorded`` or ``occurred``), lent
        for the ``with`` block: :func:`memory_ledger.replay.audit.past_recall.recall_point`,
        kept among the last :attr:`kept_points` (one pushed out is closed once no request
        uses it any more).

        :raises PointError: an invalid point (see :func:`memory_ledger.replay.as_of`).
        :raises PositionOutOfRangeError: a position beyond the head.
        """
        from memory_ledger.replay.audit.past_recall import recall_point

        key: PointKey = (mode, at, self.head())
        with self._lent(
            self._points,
            key,
            lambda: recall_point(
                self.engine, at, occurred=mode == "occurred", indexes=self._indexes
            ),
        ) as value:
            yield value

    @contextmanager
    def moment(self, mode: str, at: int | datetime) -> Iterator[Moment]:
        """What was current at ``at`` (``mode`` ``position``, ``recorded`` or ``occurred``),
        lent for the ``with`` block: :func:`memory_ledger.replay.audit.moments.moment_at`,
        kept among the last :attr:`kept_points` (an occurred-time moment holds a fold,
        closed once no request uses it any more after it was pushed out).

        :raises PointError: an invalid point (see :func:`memory_ledger.replay.as_of`).
        :raises PositionOutOfRangeError: a position beyond the head.
        """
        from memory_ledger.replay.audit.moments import moment_at

        key: PointKey = (mode, at, self.head())
        with self._lent(
            self._moments, key, lambda: moment_at(self.engine, at, occurred=mode == "occurred")
        ) as value:
            yield value

    @contextmanager
    def _lent(
        self, kept: OrderedDict[PointKey, _Kept[C]], key: PointKey, open_: Callable[[], C]
    ) -> Iterator[C]:
        """The open value of ``key`` in ``kept``, lent for the ``with`` block: opened once
        (under the key's lock) and kept among the last :attr:`kept_points` of the same
        ledger head (those of another head are dropped). A value pushed out is closed when
        its last borrower gives it back (at once when none holds it): a request never sees
        a point closed under it."""
        with self._key_lock((id(kept), key)):
            with self.lock:
                entry = kept.get(key)
                if entry is not None:
                    kept.move_to_end(key)
                    entry.users += 1
            if entry is None:
                entry = _Kept(open_(), users=1)
                with self.lock:
                    kept[key] = entry
                    old = [kept.pop(k) for k in list(kept) if k[2] != key[2]]  # another head's
                    old += [
                        kept.popitem(last=False)[1] for _ in range(len(kept) - self.kept_points)
                    ]
                    self._computing.pop((id(kept), key), None)
                    idle = [o for o in old if o.push_out()]
                for stale in idle:
                    stale.value.close()
        try:
            yield entry.value
        finally:
            with self.lock:
                entry.users -= 1
                last = entry.evicted and entry.users == 0
            if last:
                entry.value.close()

    def warm(self) -> threading.Thread:
        """Ready each namespace's recall index at the ledger head now, on a background
        thread (largest namespace first: the engine's live index loaded or built, then
        copied), so that the first recall as of a point in it finds it ready. The point at the head
        stays kept like one a request opened. :meth:`close` stops it after the namespace
        it is building. Returns the thread (started)."""
        from memory_ledger.ledger.ids import Namespace

        def run() -> None:
            try:
                with self.engine.read_models() as live:
                    rows = live.conn.execute(
                        "SELECT tenant, principal, scope_id FROM canonical_memory WHERE status "
                        "IN ('active', 'conflicted') GROUP BY ALL "
                        "ORDER BY count(*) DESC, tenant, principal, scope_id"
                    ).fetchall()
                head = self.head()
                for tenant, principal, scope_id in rows:
                    if self._closing.is_set():
                        return
                    namespace = Namespace(str(tenant), str(principal), str(scope_id))
                    with self.point("position", head) as past:
                        past.recall(namespace, "", 1)
            except Exception as error:  # an optimisation: a request will say what fails
                log_failure("warming the recall indexes", error)

        self._closing.clear()
        thread = threading.Thread(target=run, name="memory-ledger-ui-warm", daemon=True)
        self._warming = thread
        thread.start()
        return thread

    def close(self) -> None:
        """Stop the warm-up (after the namespace it builds) and close the kept points and
        moments (the engine belongs to whoever opened it)."""
        self._closing.set()
        if self._warming is not None:
            self._warming.join()
        with self.lock:
            entries: list[_Kept[Any]] = [*self._points.values(), *self._moments.values()]
            self._points.clear()
            self._moments.clear()
            self._indexes.clear()
            idle = [entry for entry in entries if entry.push_out()]
        for entry in idle:  # one still lent is closed by its last user
            entry.value.close()
