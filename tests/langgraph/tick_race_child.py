"""A racer of ``tests/langgraph/test_tick_races.py`` in a process of its own::

    python -m tests.langgraph.tick_race_child STORE RACER SEED

Opens a store over the folder STORE, says ``{"ready": pid}``, then for each ``go N`` line
runs racer RACER's tick of round N (``tick_races.plan(SEED, RACER, N)``) as one gather and
says ``{"round": N, "answers": [...]}``; ends at the end of its input.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys

from memory_ledger.replay.langgraph_store import LedgerStore
from tests.langgraph.tick_races import TENANT, plan, run_tick


def main(store: str, racer: int, seed: int) -> None:
    with LedgerStore.open(store, TENANT) as ledger_store:
        print(json.dumps({"ready": os.getpid()}), flush=True)
        for line in sys.stdin:
            round_ = int(line.split()[1])
            answers = asyncio.run(run_tick(ledger_store, plan(seed, racer, round_)))
            print(json.dumps({"round": round_, "answers": answers}), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))
