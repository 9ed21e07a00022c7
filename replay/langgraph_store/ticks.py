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

_Futures = list["asyncio.Future[list[Result]]"]


class _LoopQueue:
    """The calls one event loop made that no batch has taken yet, and their futures (two
    lists, not a list of pairs: one object less for each waiting call); ``busy``: a flush
    is scheduled or a batch of this loop is under way (the next flush follows it)."""

    __slots__ = ("busy", "calls", "futures")

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.futures: _Futures = []
        self.busy = False

    def take(self) -> tuple[list[Call], _Futures]:
        """The waiting calls whose caller still waits (a cancelled one is withdrawn), and
        their futures; the queue is left empty."""
        calls, futures = self.calls, self.futures
        self.calls, self.futures = [], []
        if any(future.done() for future in futures):
            kept = [i for i, future in enumerate(futures) if not future.done()]
            calls, futures = [calls[i] for i in kept], [futures[i] for i in kept]
        return calls, futures


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
            queue.calls.append(call)
            queue.futures.append(future)
            start = not queue.busy
            queue.busy = True
        if start:
            loop.call_soon(self._flush, loop, queue)
        return future

    def _flush(self, loop: asyncio.AbstractEventLoop, queue: _LoopQueue) -> None:
        """Send the loop's waiting calls as one batch (on the loop's thread)."""
        with self._lock:
            calls, futures = queue.take()
            if not calls or self._closed:  # closed: close() took the calls
                queue.busy = False
                return
            sent = self._worker.submit(self._run, calls)

        def finished(done: concurrent.futures.Future[list[Outcome]]) -> None:
            try:
                loop.call_soon_threadsafe(self._deliver, loop, queue, futures, done)
            except RuntimeError:  # the loop is closed: nobody waits for the answers
                pass

        sent.add_done_callback(finished)

    def _deliver(
        self,
        loop: asyncio.AbstractEventLoop,
        queue: _LoopQueue,
        futures: _Futures,
        done: concurrent.futures.Future[list[Outcome]],
    ) -> None:
        """Hand each call its outcome, then flush what queued meanwhile (after the callers
        just answered resume: what they call next joins the batch)."""
        error = done.exception()
        outcomes: list[Outcome] = [error] * len(futures) if error is not None else done.result()
        _settle(futures, outcomes)
        loop.call_soon(self._flush, loop, queue)

    def close(self) -> None:
        """Refuse new calls, run the calls still queued (in this thread, before returning;
        their callers get their answers on their loops) and wait for the batches under way.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
            queued = [(loop, queue.take()) for loop, queue in self._loops.items()]
        self._worker.shutdown(wait=True)
        for loop, (calls, futures) in queued:
            if not calls or loop.is_closed():
                continue
            try:
                outcomes: list[Outcome] = self._run(calls)
            except Exception as e:  # noqa: BLE001 - a defect: every call hears of it
                outcomes = [e] * len(calls)
            if _running_loop() is loop:
                _settle(futures, outcomes)
                continue
            try:
                loop.call_soon_threadsafe(_settle, futures, outcomes)
            except RuntimeError:  # closed meanwhile
                pass


def _settle(futures: _Futures, outcomes: Sequence[Outcome]) -> None:
    for future, outcome in zip(futures, outcomes, strict=True):
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
