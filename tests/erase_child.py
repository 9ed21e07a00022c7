"""Erases a namespace in a store, to be SIGKILLed (``tests/encryption/test_encryption_crash.py``).

Run from the repository root as ``python -m tests.erase_child STORE KEY_HEX POINT``:
opens ``STORE`` with the master key (durable sync), prints ``{"kind": "erasing"}`` right
before ``engine.erase("acme", "alice")`` and ``{"kind": "done", "seconds"}`` after it. With
``POINT`` a fault point of ``ledger.faults`` (not ``none``), the first call of it prints
``{"kind": "at_fault"}`` and sleeps until the parent kills the process.
"""

from __future__ import annotations

import json
import os
import sys
import time

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger import faults


def say(**message: object) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())


def stall() -> None:
    say(kind="at_fault")
    time.sleep(120)
    os._exit(3)  # never reached when the parent kills


def main(store: str, key_hex: str, point: str) -> int:
    engine = MemoryEngine.open(store, master_key=bytes.fromhex(key_hex))
    if point != "none":
        faults.FAULTS[point] = stall
    say(kind="erasing")
    began = time.perf_counter()
    report = engine.erase("acme", "alice", requested_by="crash-test")
    say(kind="done", seconds=time.perf_counter() - began, namespaces=report.namespaces)
    engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:4]))
