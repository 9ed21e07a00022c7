"""Keep a host's projections following the ledger in a background thread.

With a PostgreSQL ledger every host appends to one log; a :class:`Follower` catches this
host's projection file up whenever any host appends (woken by LISTEN/NOTIFY through the
recorder's ``listen_for_appends()``), and at least every ``poll_interval`` seconds (the
fallback when notifications are lost, e.g. while the server restarts). Reads stay
read-your-writes without it (each read catches up to the ledger head first); with it they
rarely find anything left to apply.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

__all__ = ["Follower"]


class _Listener(Protocol):
    def wait(self, timeout: float) -> bool: ...

    def close(self) -> None: ...


class Follower:
    """Calls ``catch_up()`` after every notified append and every ``poll_interval`` seconds.

    :param catch_up: brings the projections up to the ledger head (errors are counted in
        :attr:`errors` and retried at the next wake-up, never raised in the thread).
    :param recorder: the ledger's recorder; its ``listen_for_appends()``, when it has one,
        wakes the thread (otherwise it polls).
    """

    def __init__(
        self, catch_up: Callable[[], object], recorder: Any, poll_interval: float = 1.0
    ) -> None:
        self._catch_up = catch_up
        self.poll_interval = poll_interval
        listen = getattr(recorder, "listen_for_appends", None)
        self._listener: _Listener | None = listen() if callable(listen) else None
        self._stop = threading.Event()
        self.errors = 0
        """Catch-ups that failed (ledger away, projection file busy); retried later."""
        self.wakeups = 0
        self._thread = threading.Thread(
            target=self._run, name="memory-ledger-follower", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._catch_up()
            except Exception:  # noqa: BLE001 (a read caller sees the same error, typed)
                self.errors += 1
            if self._listener is not None:
                notified = self._listener.wait(self.poll_interval)
            else:
                notified = self._stop.wait(self.poll_interval)
            self.wakeups += bool(notified)

    def close(self) -> None:
        """Stop the thread (within one ``poll_interval``) and close the listener."""
        self._stop.set()
        self._thread.join(timeout=self.poll_interval + 5)
        if self._listener is not None:
            self._listener.close()
