"""Run a worker process to a kill point and SIGKILL it there: the crash properties' driver.

A worker (``python -m tests.<module> ...``) prints one JSON message a line: ``begin`` when it
starts a unit of work, ``ack`` when one is acknowledged, ``at_fault`` when it stands at the
fault point it was given (``ledger.put``, ``ledger.commit``, ...), ``finished`` at the end.
:func:`run_to_kill` feeds every message to the caller and kills the worker with SIGKILL at
the fault point, when the timer started by the first ``begin`` runs out (``delay`` seconds;
``None``: no timer), or after it finished. The crash properties then check what a fresh
process finds in the store.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
MESSAGE_TIMEOUT = 120.0


def run_to_kill(
    module: str,
    args: Sequence[str],
    on_message: Callable[[dict[str, Any]], None],
    delay: float | None,
) -> dict[str, Any] | None:
    """Run ``python -m module *args`` from the repository root, give each message to
    ``on_message``, and SIGKILL the worker at its fault point, when ``delay`` seconds have
    passed since its first ``begin`` (``delay`` None: never), or once it has finished.

    Returns the ``at_fault`` message when the worker was killed at its fault point, else None.
    Raises AssertionError when the worker is silent for ``MESSAGE_TIMEOUT`` seconds or exits
    with an error before finishing (its stderr in the message).
    """
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", module, *args],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    kill_at: float | None = None
    try:
        while True:
            timeout = MESSAGE_TIMEOUT
            if kill_at is not None:
                timeout = max(kill_at - time.monotonic(), 0.0)
            try:
                line = lines.get(timeout=timeout)
            except queue.Empty:
                if kill_at is not None:  # the timer ran out: kill wherever it is now
                    return None
                proc.kill()
                raise AssertionError(f"{module} silent:\n{proc.stderr.read()}") from None
            if line is None:
                assert proc.wait(timeout=30) == 0, proc.stderr.read()
                return None
            message: dict[str, Any] = json.loads(line)
            if message["kind"] == "at_fault":
                return message
            if message["kind"] == "finished":
                return None
            if message["kind"] == "begin" and delay is not None and kill_at is None:
                kill_at = time.monotonic() + delay
            on_message(message)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
