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
forth between two, builds each point once.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from memory_ledger.replay.audit.past_indexes import PastIndexes

if TYPE_CHECKING:
    from memory_ledger.commands.engine.memory_engine import MemoryEngine
    from memory_ledger.replay.audit.moments import Moment
    from memory_ledger.replay.audit.past_recall import PastRecall
    from memory_ledger.replay.audit.timetravel import AsOf

__all__ = ["UiState"]

T = TypeVar("T")

_log = logging.getLogger(__name__)

PointKey = tuple[str, int | datetime, int]
"""(mode, point, ledger head)."""


class Closable(Protocol):
    """What the state keeps open per point: closed when pushed out or at the end."""

    def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


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
        self._points: OrderedDict[PointKey, PastRecall | AsOf] = OrderedDict()
        self._moments: OrderedDict[PointKey, Moment] = OrderedDict()
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

    def point(self, mode: str, at: int | datetime) -> PastRecall | AsOf:
        """Recall as of ``at`` (``mode`` ``position``, ``recorded`` or ``occurred``):
        :func:`memory_ledger.replay.audit.past_recall.recall_point`, kept among the last
        :attr:`kept_points` (closing the ones pushed out).

        :raises PointError: an invalid point (see :func:`memory_ledger.replay.as_of`).
        :raises PositionOutOfRangeError: a position beyond the head.
        """
        from memory_ledger.replay.audit.past_recall import recall_point

        key: PointKey = (mode, at, self.head())
        return self._kept(
            self._points,
            key,
            lambda: recall_point(
                self.engine, at, occurred=mode == "occurred", indexes=self._indexes
            ),
        )

    def moment(self, mode: str, at: int | datetime) -> Moment:
        """What was current at ``at`` (``mode`` ``position``, ``recorded`` or ``occurred``):
        :func:`memory_ledger.replay.audit.moments.moment_at`, kept among the last
        :attr:`kept_points` (an occurred-time moment holds a fold).

        :raises PointError: an invalid point (see :func:`memory_ledger.replay.as_of`).
        :raises PositionOutOfRangeError: a position beyond the head.
        """
        from memory_ledger.replay.audit.moments import moment_at

        key: PointKey = (mode, at, self.head())
        return self._kept(
            self._moments, key, lambda: moment_at(self.engine, at, occurred=mode == "occurred")
        )

    def _kept(self, kept: OrderedDict[PointKey, C], key: PointKey, open_: Callable[[], C]) -> C:
        """The open value of ``key`` in ``kept``, opened once (under the key's lock) and
        kept among the last :attr:`kept_points` of the same ledger head (those of another
        head are dropped). A value pushed out is closed; a recall point closes once the
        recall running on it ends, a fold at once (a request still reading it then fails
        with a typed error at worst)."""
        with self._key_lock((id(kept), key)):
            with self.lock:
                value = kept.get(key)
                if value is not None:
                    kept.move_to_end(key)
                    return value
            value = open_()
            with self.lock:
                kept[key] = value
                old = [kept.pop(k) for k in list(kept) if k[2] != key[2]]  # another head's
                old += [kept.popitem(last=False)[1] for _ in range(len(kept) - self.kept_points)]
                self._computing.pop((id(kept), key), None)
        for stale in old:
            stale.close()
        return value

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
                    self.point("position", head).recall(namespace, "", 1)
            except Exception:  # a warm-up is an optimisation: a request will say what fails
                _log.warning("memory-ledger ui: warming the recall indexes failed", exc_info=True)

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
            kept: list[Closable] = [*self._points.values(), *self._moments.values()]
            self._points.clear()
            self._moments.clear()
            self._indexes.clear()
        for old in kept:
            old.close()
