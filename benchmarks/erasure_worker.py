"""A second process on a store for the erasure-files harness (``benchmarks.erasure_files``).

Run as ``python -m benchmarks.erasure_worker STORE KEY_FILE``: opens ``STORE`` with the
master key (it takes the next free projection slot), then answers one JSON request per
line of standard input with one JSON line on standard output:

- ``{"op": "recall", "ns": [t, p, s], "query": q}``: recalls (``{"ok": true}``);
- ``{"op": "remember", "ns": [...], "statement": s}``: remembers (an erased namespace's
  refusal is answered ``{"ok": false, "error": reason}``);
- ``{"op": "busy", "ns": [...], "statements": [...]}``: answers ``{"working": true}``,
  then remembers and recalls them in a loop until the parent kills the process;
- ``{"op": "close"}``: closes the engine and exits 0.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.ledger.errors import MemoryLedgerError
from memory_ledger.ledger.ids import Namespace


def say(**message: object) -> None:
    os.write(1, (json.dumps(message) + "\n").encode())


def _step(engine: MemoryEngine, request: dict[str, Any]) -> None:
    namespace = Namespace(*request["ns"])
    if request["op"] == "recall":
        engine.recall(namespace, request["query"])
    else:
        engine.remember(namespace, request["statement"])


def main(store: str, key_file: str) -> int:
    engine = MemoryEngine.open(store, master_key=key_file)
    say(ready=True)
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "close":
            engine.close()
            say(ok=True)
            return 0
        if request["op"] == "busy":
            say(working=True)
            statements = request["statements"]
            number = 0
            while True:  # until SIGKILL
                statement = statements[number % len(statements)]
                number += 1
                for op in ("remember", "recall"):
                    try:
                        _step(
                            engine,
                            {
                                "op": op,
                                "ns": request["ns"],
                                "statement": statement,
                                "query": statement,
                            },
                        )
                    except MemoryLedgerError:
                        pass
        try:
            _step(engine, request)
        except MemoryLedgerError as e:
            say(ok=False, error=e.reason_code)
            continue
        say(ok=True)
    engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:3]))
