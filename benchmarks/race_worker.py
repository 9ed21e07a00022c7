"""A process of the race harness (``benchmarks.race_harness``), driven over stdin/stdout::

    python -m benchmarks.race_worker STORE [LEDGER_URL]

It opens the store (its own projections; with ``LEDGER_URL`` a host of that PostgreSQL
ledger), says ``{"ready": pid}``, then per line ``{"ops": [...], "release_at": t}`` waits
until ``time.monotonic()`` reaches ``t`` (one clock for every process of the machine: the
processes start together), runs its ops in order and answers ``{"calls": [...],
"conflicts": n}`` (``n``: refused appends it re-decided so far). An empty line ends it.
"""

from __future__ import annotations

import json
import os
import sys
import time

from benchmarks.race_harness import NAMESPACE, Op, run_op
from memory_ledger.commands.engine.memory_engine import MemoryEngine


def main(argv: list[str]) -> int:
    store, url = argv[0], (argv[1] if len(argv) > 1 else None)
    with MemoryEngine.open(store, ledger=url) as engine:
        print(json.dumps({"ready": os.getpid()}), flush=True)
        for line in sys.stdin:
            if not line.strip():
                break
            order = json.loads(line)
            ops = [Op(**op) for op in order["ops"]]
            time.sleep(max(0.0, order["release_at"] - time.monotonic()))
            calls = [run_op(engine, NAMESPACE, op) for op in ops]
            answer = {
                "calls": [
                    {
                        "op": c.op.as_dict(),
                        "start": c.start,
                        "end": c.end,
                        "answer": list(c.answer),
                        "session_id": c.session_id,
                    }
                    for c in calls
                ],
                "conflicts": engine.decision_conflicts,
            }
            print(json.dumps(answer), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
