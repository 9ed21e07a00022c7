"""Group commit: the write requests that threads of one process make at the same time share
one LMDB write transaction and one sync.

A durable append costs one ``fsync``; while one thread waits for it, others queue. The first
queued request leads: it takes every request waiting behind it (up to a bound), runs them one
after the other inside ONE write transaction, commits it (one sync) and only then hands each
request its own outcome; the next request in the queue leads the next group. A request that
finds the queue empty right after a group of several first lets that group's writers come back
and queue (it yields the interpreter while they do), so groups stay whole instead of
alternating between one command and the rest. (A leader that went on leading while requests
wait would spare the next one's wake-up, but would keep its own writer from queueing
meanwhile: with a slow sync, groups shrink.) A lone writer forms groups of one and pays
nothing but the queue's lock. A waiting request blocks on a lock of its own, released once to
wake it (no condition, no ``threading.Event``): each command costs the fewest context switches
and the least work under the GIL, which is what bounds many writers once their syncs are
shared.

Measured and not kept (issue 19, item 3; a 2-vCPU VM on a shared virtio disk, 8 writers of
5-event commands): flushing the meta page after the commit (``MDB_NOMETASYNC`` and
``mdb_env_sync`` outside the writer lock, the next leader woken first) with the writers
split in two turns of half a group each, so that one half prepares while the other syncs.
On the disk it was slower (alternating runs against whole groups: 8 writers 4,482 and 3,909
commands/s against 5,394 and 4,890; one writer 1,727 and 1,536 against 1,943 and 1,644): a
separate ``fdatasync`` costs more than the ``O_DSYNC`` meta write it replaces, and two turns
pay twice the commits. Two turns alone, the sync inside the lock (tmpfs, a sleep standing for
the sync at ``ledger.commit``) were slower too (8 writers 4,330 against 5,030 commands/s with
0.25 ms, 5,414 against 6,926 with 0.05 ms): the leader's path (its wake-up, the GIL released
by ``mdb_txn_begin`` and by the commit) waits for the GIL behind the other half's writers,
which eats the overlap. Waking the members after the next leader's puts changed nothing
measurable. Where the time goes is in ``python -m benchmarks append --writers`` (per group:
writer lock held, and idle between groups).

A request may come as data (``combine`` and ``payload``): consecutive requests of one kind
in a group then run as one call, which must give each request the outcome it would have had
run alone in its place in the group (the LMDB recorder checks and writes the stream keys of
all its plain appends in one pass and their records with one chain of puts).

Each request keeps the guarantees it has alone:

- atomic: a request either refuses before it writes anything (the :class:`Refused` protocol
  of the LMDB module: a failed check, an append condition that no longer holds) or writes all
  its records; a refused request leaves the shared transaction as it found it, so the rest
  of the group is unaffected;
- checked in order: each request runs against the transaction as the requests before it in
  the group left it (their records, index entries and tags are visible), so a duplicate
  stream version or an append condition overtaken by an earlier request of the same group is
  refused exactly as if the requests had committed one by one;
- acknowledged after the sync: no caller sees its result before the group's transaction is
  committed; when the commit fails, every request of the group fails and nothing is written.

When a group of several requests fails for another reason than a refusal (an error after a
request began writing, which aborts the whole transaction), its requests are run again one
per transaction, so one request's failure is never another's; a group of one fails with its
transaction, as a lone write always did.
"""

from __future__ import annotations

import threading
import time
from _thread import allocate_lock as _allocate_lock
from collections.abc import Callable
from typing import Any, Generic, TypeVar

__all__ = ["GroupCommit", "GroupStats", "WriteRequest"]

T = TypeVar("T")

MAX_GROUP_REQUESTS = 256
"""At most this many requests share one transaction."""
MAX_GROUP_BYTES = 64 * 1024 * 1024
"""A group stops growing once its requests announce this many bytes (size hints)."""


class _Signal:
    """A one-shot wake-up for one waiting thread: a lock created held, released to wake.

    Cheaper than a ``threading.Event`` (no condition, no waiter lock per wait, no Python
    loop in ``set``): the waiter blocks in C on the lock and wakes holding nothing else.
    Waking twice is harmless, as with an event.
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = _allocate_lock()
        self._lock.acquire()

    def wait(self) -> None:
        """Block until :meth:`set` was called (at once if it was)."""
        self._lock.acquire()

    def set(self) -> None:
        """Wake the waiter (or let its next :meth:`wait` return at once)."""
        try:
            self._lock.release()
        except RuntimeError:  # already set
            pass


class WriteRequest(Generic[T]):
    """One caller's write: ``fn(txn)`` and, once its group ran, its result or error.

    ``combine`` and ``payload`` (optional) describe the request as data: consecutive
    requests of a group with the same ``combine`` run as ONE call ``combine(txn, requests)``,
    which must leave each request the outcome ``fn`` would have had, run one after the
    other in the same transaction (see :data:`Combine`). ``fn`` still runs the request
    alone, after a group failed as a whole.
    """

    __slots__ = (
        "combine",
        "done",
        "error",
        "fn",
        "payload",
        "result",
        "size_hint",
        "taken",
        "wake",
    )

    def __init__(
        self,
        fn: Callable[[Any], T],
        size_hint: int,
        combine: Combine | None = None,
        payload: Any = None,
    ) -> None:
        self.fn = fn
        self.size_hint = size_hint
        self.combine = combine
        self.payload = payload
        self.result: T | None = None
        self.error: BaseException | None = None
        self.taken = False
        """A leader took it into a group (it will run)."""
        self.done = False
        self.wake: _Signal | None = None
        """Set when the request is done, or when it is first in the queue (it leads); made
        only for a request that waits (one that leads at once needs no wake-up)."""

    def wake_up(self) -> None:
        """Wake the thread waiting for this request (nothing when it never waited)."""
        if self.wake is not None:
            self.wake.set()

    def outcome(self) -> T:
        """The result, or raise the error."""
        if self.error is not None:
            raise self.error
        return self.result  # type: ignore[return-value]


class GroupStats:
    """Counters of one :class:`GroupCommit` (for benchmarks and tests)."""

    __slots__ = ("current", "groups", "largest", "requests", "run_seconds")

    def __init__(self) -> None:
        self.current = 0
        """Requests of the group being written now (0: none)."""
        self.run_seconds = 0.0
        """Seconds leaders spent running groups: their transactions up to the commit's
        return (the sync included): the time the writer lock was held for groups."""
        self.groups = 0
        """Groups committed (or failed)."""
        self.requests = 0
        """Requests they held."""
        self.largest = 0
        """Requests of the largest group."""

    @property
    def mean(self) -> float:
        """Requests per group."""
        return self.requests / self.groups if self.groups else 0.0


Combine = Callable[[Any, "list[WriteRequest[Any]]"], None]
"""``combine(txn, requests)`` runs several requests of one kind in ``txn`` at once, setting
each one's ``result`` or ``error`` (a refusal) exactly as running their ``fn`` one after the
other would; it raises (failing the transaction) only where one of those ``fn`` would have
raised something else than a refusal."""

RunGroup = Callable[[list[WriteRequest[Any]], Callable[[], bool]], None]
"""``run_group(group, extend)`` runs ``group`` in one transaction and sets each request's
``result`` or ``error`` (a refusal); it calls ``extend()`` once it ran them all, which appends
the requests queued meanwhile to ``group`` (True if it did: run those too before committing).
Raises when the transaction as a whole failed (nothing of it was written)."""


class GroupCommit:
    """The queue of one process's write requests to one store, and its leader protocol.

    :param run_group: runs a group of requests in one transaction (see :data:`RunGroup`).
    :param run_alone: runs one request in a transaction of its own, returning its result or
        raising its error (used after a group failed as a whole).
    :param enabled: False runs every request alone, one after the other (no grouping).
    """

    def __init__(
        self,
        run_group: RunGroup,
        run_alone: Callable[[WriteRequest[Any]], Any],
        *,
        enabled: bool = True,
    ) -> None:
        self._run_group = run_group
        self._run_alone = run_alone
        self.enabled = enabled
        self.stats = GroupStats()
        self._queue: list[WriteRequest[Any]] = []
        self._lock = threading.Lock()
        self._last_group = 0
        """Requests of the last group that ran (its writers may be about to come back)."""

    def write(
        self,
        fn: Callable[[Any], T],
        size_hint: int = 0,
        combine: Combine | None = None,
        payload: Any = None,
    ) -> T:
        """Run ``fn(txn)`` in a write transaction shared with the requests of other threads
        queued at the same time; return its result once that transaction is committed.
        ``combine`` and ``payload``: see :class:`WriteRequest`.

        :raises BaseException: what ``fn`` raised (a refusal leaves the others unaffected),
            or the error that failed the transaction.
        """
        request: WriteRequest[T] = WriteRequest(fn, size_hint, combine, payload)
        with self._lock:
            self._queue.append(request)
            leads = self._queue[0] is request
            if not leads:
                wake = request.wake = _Signal()
        try:
            if not leads:
                wake.wait()
                if request.done:
                    return request.outcome()
            elif self._last_group > 1 and self.enabled:
                self._let_others_queue()
        except BaseException:
            self._withdraw(request)  # KeyboardInterrupt while waiting (main thread)
            raise
        with self._lock:
            group = self._take_group()
            for member in group:
                member.taken = True
        try:
            self._lead(group)
        finally:
            with self._lock:
                for member in group:
                    member.done = True
                del self._queue[: len(group)]
                following = self._queue[0] if self._queue else None
                self._last_group = len(group)
            # Wake each member (its outcome is set) and the next leader, no one else.
            for member in group:
                member.wake_up()
            if following is not None:
                following.wake_up()
        return request.outcome()

    def _let_others_queue(self) -> None:
        """Before leading at once after a group of several: yield the interpreter while the
        writers of that group, acknowledged a moment ago, come back and queue (each yield
        lets runnable threads run; stop when one brought nobody, or all are back).

        Without it the first writer back would lead a group of one, whose sync the others
        then wait for: groups would alternate between one and the rest, and a slow sync
        be shared by half as many commands. No clock: a yield that finds no thread
        waiting to run returns at once, so this costs a lone writer nothing.
        """
        expected = self._last_group
        queued = len(self._queue)
        while queued < expected:
            time.sleep(0)
            now = len(self._queue)
            if now == queued:
                return
            queued = now

    def _withdraw(self, request: WriteRequest[Any]) -> None:
        """Take an interrupted waiter's request out of the queue, unless a leader already
        runs it, and let the queue move on (wake the next leader if it was first)."""
        with self._lock:
            if request.taken or request not in self._queue:
                return
            first = self._queue[0] is request
            self._queue.remove(request)
            following = self._queue[0] if first and self._queue else None
        if following is not None:
            following.wake_up()

    def _take_group(self) -> list[WriteRequest[Any]]:
        """The requests from the front of the queue that form the next group (call with the
        queue's lock held)."""
        if not self.enabled:
            return self._queue[:1]
        group: list[WriteRequest[Any]] = []
        size = 0
        for queued in self._queue:
            if group and (
                len(group) >= MAX_GROUP_REQUESTS or size + queued.size_hint > MAX_GROUP_BYTES
            ):
                break
            group.append(queued)
            size += queued.size_hint
        return group

    def _lead(self, group: list[WriteRequest[Any]]) -> None:
        """Run ``group`` (as the leader) and set every member's outcome."""
        self.stats.groups += 1
        self.stats.requests += len(group)
        self.stats.largest = max(self.stats.largest, len(group))
        self.stats.current = len(group)
        began = time.perf_counter()
        try:
            self._run(group)
        finally:
            self.stats.run_seconds += time.perf_counter() - began
            self.stats.current = 0

    def _run(self, group: list[WriteRequest[Any]]) -> None:
        if not self.enabled:
            self._alone(group[0])
            return
        try:
            self._run_group(group, lambda: self._extend(group))
        except Exception as e:
            if len(group) == 1:  # a lone request fails with its transaction, as always
                group[0].result, group[0].error = None, e
                return
            # The transaction as a whole failed and wrote nothing: give each request a
            # transaction of its own, so one request's failure is only its own.
            for member in group:
                self._alone(member)
        except BaseException as e:  # KeyboardInterrupt, SystemExit: nothing was written
            for member in group:
                member.result, member.error = None, e

    def _extend(self, group: list[WriteRequest[Any]]) -> bool:
        """Append to the running ``group`` the requests queued since it was taken (the
        writers whose previous request the last group answered come back while this one is
        being written): they share its commit instead of waiting for the next."""
        with self._lock:
            size = sum(member.size_hint for member in group)
            added = 0
            for queued in self._queue[len(group) :]:
                if len(group) >= MAX_GROUP_REQUESTS or size + queued.size_hint > MAX_GROUP_BYTES:
                    break
                queued.taken = True
                group.append(queued)
                size += queued.size_hint
                added += 1
        self.stats.requests += added
        self.stats.largest = max(self.stats.largest, len(group))
        self.stats.current = len(group)
        return added > 0

    def _alone(self, request: WriteRequest[Any]) -> None:
        request.result, request.error = None, None
        try:
            request.result = self._run_alone(request)
        except BaseException as e:
            request.error = e
