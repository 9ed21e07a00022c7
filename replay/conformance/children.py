"""Child processes of the ``concurrency`` and ``durability`` properties, and the parent's
side of them.

A child opens the store from the factory named on its command line (with the parent's
``sys.path``, so the factory imports there as here):
``python -m memory_ledger.replay.conformance.children acks SPEC NS N`` puts ``k0 .. kN-1``
one by one, printing ``ack i`` after each put returned; ``... race SPEC NS WORKER ROUNDS``
prints ``ready``, waits for a line on stdin, then puts its own key and the shared key
``ROUNDS`` times (as the threads' test does).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from memory_ledger.replay.conformance.factory import load_factory, open_store

__all__ = ["kill_after_acks", "race_in_processes"]

TIMEOUT = 120.0
"""Seconds a child may take before the parent gives up on it (a hung store fails)."""


def _spawn(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    command = [sys.executable, "-m", "memory_ledger.replay.conformance.children", *args]
    return subprocess.Popen(
        command,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def kill_after_acks(spec: str, namespace: tuple[str, ...], wanted: int) -> int:
    """Start an ``acks`` child, SIGKILL it once it acknowledged ``wanted`` puts (or when it
    ends), and return how many puts it acknowledged.

    :raises RuntimeError: the child failed before acknowledging any put (its last error
        line is the message).
    """
    child = _spawn("acks", spec, json.dumps(namespace), str(wanted * 4))
    assert child.stdout is not None
    acked = 0
    for line in child.stdout:
        if line.startswith("ack "):
            acked = int(line.split()[1]) + 1
            if acked >= wanted:
                os.kill(child.pid, signal.SIGKILL)
                break
    child.kill()
    _, err = child.communicate(timeout=TIMEOUT)
    if acked == 0:
        msg = f"the child acknowledged no put: {(err.strip().splitlines() or ['?'])[-1]}"
        raise RuntimeError(msg)
    return acked


def race_in_processes(spec: str, namespace: tuple[str, ...], workers: int, rounds: int) -> None:
    """Run ``workers`` ``race`` children at once (started together once all are ready).

    :raises RuntimeError: a child failed (its last error line is the message).
    """
    children = [
        _spawn("race", spec, json.dumps(namespace), str(index), str(rounds))
        for index in range(workers)
    ]
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                _, err = child.communicate(timeout=TIMEOUT)
                msg = f"a child did not start: {(err.strip().splitlines() or ['?'])[-1]}"
                raise RuntimeError(msg)
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        for child in children:
            _, err = child.communicate(timeout=TIMEOUT)
            if child.returncode != 0:
                msg = f"a child failed: {(err.strip().splitlines() or ['?'])[-1]}"
                raise RuntimeError(msg)
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


def main(argv: list[str]) -> int:
    """The child's side (see the module doc)."""
    role, spec, namespace = argv[0], argv[1], tuple(json.loads(argv[2]))
    factory, _ = load_factory(spec)
    with open_store(factory) as store:
        if role == "acks":
            for index in range(int(argv[3])):
                store.put(namespace, f"k{index}", {"i": index})
                print(f"ack {index}", flush=True)
            return 0
        worker, rounds = int(argv[3]), int(argv[4])
        print("ready", flush=True)
        sys.stdin.readline()
        for i in range(rounds):
            store.put(namespace, f"own-{worker}", {"n": i})
            store.put(namespace, f"once-{worker}-{i}", {"n": i})
            store.put(namespace, "shared", {"n": worker * 100 + i})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
