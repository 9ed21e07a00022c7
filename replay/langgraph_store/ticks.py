"""Concurrent async calls as batches: the calls an event loop makes in one tick wait in that
loop's queue and are run together, on the store's one worker thread, as one merged batch
(:func:`~memory_ledger.replay.langgraph_store.merged.run_merged`).

The shape is LangGraph's ``AsyncBatchedBaseStore`` (``langgraph/store/base/batch.py``: a
queue per store, drained by a task of its loop), with three differences:

- no task: the first call of a tick schedules a flush with ``loop.call_soon``, which runs
  after every callback already scheduled, so every coroutine that ``asyncio.gather`` started
  has queued its call by then; while a batch runs on the worker, the loop's next calls
  queue, and they (with the calls that the finished batch's callers make as soon as they
  resume) form the next batch;
- a queue per event loop (held weakly), so one store serves several loops and threads; the
  worker thread runs every loop's batches one at a time, in the order they were sent;
- :meth:`TickQueue.close` drains: the calls still queued are run before it returns, and the
  batches under way finish; a call made after it is refused (``EngineClosedError``).

A call awaited by a coroutine has run (its writes are in the ledger) when the ``await``
returns, so calls awaited one after another see each other; calls of one tick see the store
as it was before that tick's writes. A cancelled call still queued is withdrawn; one in a
batch under way is run, its answer dropped. Nothing here is process-wide.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import weakref
from collections.abc import Callable, Sequence

from langgraph.store.base import Result

from memory_ledger.commands.errors import EngineClosedError
from memory_ledger.replay.langgraph_store.merged import Call, Outcome

__all__ = ["TickQueue"]

_Waiting = tuple[Call, "asyncio.Future[list[Result]]"]


class _LoopQueue:
    """The calls one event loop made that no batch has taken yet; ``busy``: a flush is
    scheduled or a batch of this loop is under way (the next flush follows it)."""

    __slots__ = ("busy", "waiting")

    def __init__(self) -> None:
        self.waiting: list[_Waiting] = []
        self.busy = False


class TickQueue:
    """The async calls of a store, batched per event-loop tick.

    :param run: runs a batch of calls on the worker thread; one outcome (answers or an
        error) per call, in order.
    :param name: the worker thread's name prefix.
    """

    def __init__(self, run: Callable[[Sequence[Call]], list[Outcome]], name: str) -> None:
        self._run = run
        self._worker = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix=name)
        self._lock = threading.Lock()
        self._loops: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopQueue] = (
            weakref.WeakKeyDictionary()
        )
        self._closed = False

    def submit(self, call: Call) -> asyncio.Future[list[Result]]:
        """Queue ``call`` for this loop's next batch; a future of its answers (or its own
        typed error), done once the batch ran. Called on the loop's thread.

        :raises EngineClosedError: the store was closed.
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[list[Result]] = loop.create_future()
        with self._lock:
            if self._closed:
                raise EngineClosedError("the LangGraph store is closed")
            queue = self._loops.get(loop)
            if queue is None:
                queue = self._loops[loop] = _LoopQueue()
            queue.waiting.append((call, future))
            start = not queue.busy
            queue.busy = True
        if start:
            loop.call_soon(self._flush, loop, queue)
        return future

    def _flush(self, loop: asyncio.AbstractEventLoop, queue: _LoopQueue) -> None:
        """Send the loop's waiting calls as one batch (on the loop's thread)."""
        with self._lock:
            taken = [waiting for waiting in queue.waiting if not waiting[1].done()]
            queue.waiting = []
            if not taken or self._closed:  # closed: close() took the calls
                queue.busy = False
                return
            sent = self._worker.submit(self._run, [call for call, _ in taken])

        def finished(done: concurrent.futures.Future[list[Outcome]]) -> None:
            try:
                loop.call_soon_threadsafe(self._deliver, loop, queue, taken, done)
            except RuntimeError:  # the loop is closed: nobody waits for the answers
                pass

        sent.add_done_callback(finished)

    def _deliver(
        self,
        loop: asyncio.AbstractEventLoop,
        queue: _LoopQueue,
        taken: list[_Waiting],
        done: concurrent.futures.Future[list[Outcome]],
    ) -> None:
        """Hand each call its outcome, then flush what queued meanwhile (after the callers
        just answered resume: what they call next joins the batch)."""
        error = done.exception()
        outcomes: list[Outcome] = [error] * len(taken) if error is not None else done.result()
        _settle(taken, outcomes)
        loop.call_soon(self._flush, loop, queue)

    def close(self) -> None:
        """Refuse new calls, run the calls still queued (in this thread, before returning;
        their callers get their answers on their loops) and wait for the batches under way.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            queued = [(loop, queue.waiting) for loop, queue in self._loops.items()]
            for _, queue in self._loops.items():
                queue.waiting = []
        self._worker.shutdown(wait=True)
        for loop, waiting in queued:
            taken = [w for w in waiting if not w[1].done()]
            if not taken or loop.is_closed():
                continue
            try:
                outcomes: list[Outcome] = self._run([call for call, _ in taken])
            except Exception as e:  # noqa: BLE001 - a defect: every call hears of it
                outcomes = [e] * len(taken)
            if _running_loop() is loop:
                _settle(taken, outcomes)
                continue
            try:
                loop.call_soon_threadsafe(_settle, taken, outcomes)
            except RuntimeError:  # closed meanwhile
                pass


def _settle(taken: list[_Waiting], outcomes: Sequence[Outcome]) -> None:
    for (_, future), outcome in zip(taken, outcomes, strict=True):
        if future.done():  # cancelled meanwhile
            continue
        if isinstance(outcome, BaseException):
            future.set_exception(outcome)
        else:
            future.set_result(outcome)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None
