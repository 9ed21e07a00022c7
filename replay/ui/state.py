"""What the debugger keeps between requests: the read-only engine, one lock, and caches
keyed by the ledger head (a host may still append to the store; a new head recomputes).

Time-travel comparisons read what was current at each point from the live projection
(:func:`memory_ledger.replay.audit.moments.moment_at`: one query, no fold; occurred time folds).
Recall as of a point needs the read models then (:func:`memory_ledger.replay.as_of`, a fold
of the ledger): the few last asked for are kept open (least recently used first out), so
asking again, or going back and forth between two, folds each point once.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from memory_ledger.commands.engine.memory_engine import MemoryEngine
    from memory_ledger.replay.audit.moments import Moment
    from memory_ledger.replay.audit.timetravel import AsOf

__all__ = ["UiState"]

T = TypeVar("T")

PointKey = tuple[str, int | datetime, int]
"""(mode, point, ledger head)."""


class UiState:
    """The engine (opened read-only), the request token, and the caches.

    :param engine: an open engine; the debugger never calls a command on it.
    :param token: the secret every request must carry (see :mod:`.app`).
    :param page_size: rows per page of every paged view (at least 1).
    :param kept_points: how many time-travel folds stay open.
    """

    def __init__(
        self, engine: MemoryEngine, token: str, *, page_size: int = 50, kept_points: int = 4
    ) -> None:
        self.engine = engine
        self.token = token
        self.page_size = max(1, page_size)
        self.kept_points = max(2, kept_points)
        self.lock = threading.RLock()
        """Held around every use of the engine (requests run in a thread pool)."""
        self._cache: dict[str, tuple[int, Any]] = {}
        self._points: OrderedDict[PointKey, AsOf] = OrderedDict()
        self._moments: OrderedDict[PointKey, Moment] = OrderedDict()

    def head(self) -> int:
        """The ledger head now."""
        return self.engine.head

    def cached(self, name: str, compute: Callable[[], T]) -> T:
        """``compute()``, computed once per ledger head under ``name``."""
        head = self.head()
        hit = self._cache.get(name)
        if hit is not None and hit[0] == head:
            return hit[1]  # type: ignore[no-any-return]
        value = compute()
        self._cache[name] = (head, value)
        return value

    def forget(self, name: str) -> None:
        """Drop the cached value ``name`` (recomputed on next use)."""
        self._cache.pop(name, None)

    def point(self, mode: str, at: int | datetime) -> AsOf:
        """The read models as of ``at`` (``mode`` ``position``, ``recorded`` or
        ``occurred``), folded once and kept among the last :attr:`kept_points`.

        :raises PointError: an invalid point (see :func:`memory_ledger.replay.as_of`).
        :raises PositionOutOfRangeError: a position beyond the head.
        """
        from memory_ledger.replay.audit.timetravel import as_of

        key: PointKey = (mode, at, self.head())
        past = self._points.get(key)
        if past is not None:
            self._points.move_to_end(key)
            return past
        past = as_of(self.engine, at, occurred=mode == "occurred")
        self._points[key] = past
        while len(self._points) > self.kept_points:
            _, old = self._points.popitem(last=False)
            old.close()
        return past

    def moment(self, mode: str, at: int | datetime) -> Moment:
        """What was current at ``at`` (``mode`` ``position``, ``recorded`` or ``occurred``):
        :func:`memory_ledger.replay.audit.moments.moment_at`, kept among the last
        :attr:`kept_points` (an occurred-time moment holds a fold).

        :raises PointError: an invalid point (see :func:`memory_ledger.replay.as_of`).
        :raises PositionOutOfRangeError: a position beyond the head.
        """
        from memory_ledger.replay.audit.moments import moment_at

        key: PointKey = (mode, at, self.head())
        moment = self._moments.get(key)
        if moment is not None:
            self._moments.move_to_end(key)
            return moment
        moment = moment_at(self.engine, at, occurred=mode == "occurred")
        self._moments[key] = moment
        while len(self._moments) > self.kept_points:
            _, old = self._moments.popitem(last=False)
            old.close()
        return moment

    def close(self) -> None:
        """Close the kept folds (the engine belongs to whoever opened it)."""
        while self._points:
            _, old = self._points.popitem()
            old.close()
        while self._moments:
            _, kept = self._moments.popitem()
            kept.close()
