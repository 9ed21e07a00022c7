"""A mem0 import in a child process, killed by the test: prints ``row N`` after each row.

python -m tests.imports.mem0_import_child STORE HISTORY_DB QDRANT_PATH
"""

from __future__ import annotations

import sys

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.replay.imports import import_mem0, read_qdrant_owners
from tests.imports.test_mem0_import import USERS


def main(store: str, history_db: str, qdrant: str) -> None:
    owners = read_qdrant_owners(qdrant)

    def report(done: int, total: int) -> None:
        print(f"row {done}", flush=True)

    with MemoryEngine.open(store) as engine:
        import_mem0(engine, history_db, user_map=USERS, owners=owners, progress=report)


if __name__ == "__main__":
    main(*sys.argv[1:4])
