"""The one worker thread an async engine runs its blocking calls on, and what a cancelled
coroutine leaves behind.

:meth:`EngineWorker.run` submits a blocking call (an LMDB append, a DuckDB read, a whole
direct command) to a single thread, in submission order: DuckDB's one-connection rule and
the ledger's one-writer rule are kept without new locks, and a coroutine never blocks the
event loop.

Cancellation never leaves a half-written command. A call is either

- not started: it was still queued behind other calls when its coroutine was cancelled; it
  is withdrawn from the queue and never runs (nothing of it is in the ledger); or
- started: the thread finishes it exactly as the blocking API would (each command appends
  all its events in one durable transaction, a direct command also reconciles), and the
  cancelled coroutine waits for that before it raises ``CancelledError``. So when the
  ``await`` ends, the command's events are in the ledger and its result is discoverable
  (session commands are idempotent: re-issuing one returns what was recorded; a direct
  command's memory is found by ``recall`` or ``retrievable_memory``).

The wait for a started call is shielded from further cancellation (anyio cancel scopes and
repeated ``Task.cancel()`` alike), so ``asyncio.timeout``, ``anyio.move_on_after`` or a task
group's cancellation delay by at most the rest of that one call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import anyio

from memory_ledger.commands.errors import EngineClosedError

__all__ = ["EngineWorker"]

P = ParamSpec("P")
T = TypeVar("T")


class EngineWorker:
    """One thread running blocking engine calls in submission order.

    :param name: the thread's name prefix (shows in thread dumps and profilers).
    """

    def __init__(self, name: str = "memory-ledger") -> None:
        self._executor = concurrent.futures.ThreadPoolExecutor(
            max_workers=1, thread_name_prefix=name
        )
        self._closed = False

    @property
    def closed(self) -> bool:
        """True once :meth:`shutdown` was called."""
        return self._closed

    async def run(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(*args, **kwargs)`` on the worker thread; its result or its exception.

        Cancelled while queued, the call never runs; cancelled while running, it runs to the
        end before ``CancelledError`` propagates (see the module docstring). It runs in a
        copy of the caller's context variables (as ``asyncio.to_thread`` does), so the
        host's current OpenTelemetry span is the parent of the call's span.

        :raises EngineClosedError: the worker was shut down (the engine is closed).
        """
        try:
            call: Callable[[], T] = functools.partial(fn, *args, **kwargs)
            future = self._executor.submit(contextvars.copy_context().run, call)
        except RuntimeError as e:  # submit after shutdown
            msg = "the async memory engine is closed"
            raise EngineClosedError(msg) from e
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if future.cancel():
                raise  # still queued: withdrawn, it never starts
            await _outlast(future)
            raise

    def shutdown(self, *, wait: bool = True) -> None:
        """Stop accepting calls; with ``wait``, let queued calls finish first."""
        self._closed = True
        self._executor.shutdown(wait=wait)


async def _outlast(future: concurrent.futures.Future[T]) -> None:
    """Wait until a started call ends, whatever cancellation arrives meanwhile; its own
    outcome does not matter here (a failed command wrote nothing, the caller was cancelled)."""
    waiter = asyncio.wrap_future(future)
    while not waiter.done():
        with anyio.CancelScope(shield=True):
            try:
                await asyncio.shield(waiter)
            except asyncio.CancelledError:
                continue  # cancelled again (native Task.cancel): keep waiting
            except BaseException:  # noqa: BLE001 - the command's own failure: nothing written
                return
    if not waiter.cancelled():
        waiter.exception()  # mark a failure as retrieved (no "never retrieved" warning)
