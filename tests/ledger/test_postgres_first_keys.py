"""Hosts opening a new PostgreSQL ledger at once agree on its store key.

The key store's first state (the store key every keyed id is derived from) was written under
a row lock that locks nothing while the row does not exist: two hosts writing their first
commands at once each made a store key, the later upsert replaced the other's, and the host
whose key was replaced kept deriving other stream and memory ids (its ``finish`` of another
host's session opened an empty session of its own: ``test_postgres_hosts`` failed about one
run in five). Every update now holds the table's advisory lock.
"""

from __future__ import annotations

import threading
from pathlib import Path

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.ledger.ids import normalize_statement
from tests.pg import fresh_schema, url_for

NS = Namespace("acme", "alice", "assistant")
HOSTS = 4
ROUNDS = 6


def _first_writes_at_once(url: str, folder: Path) -> None:
    """``HOSTS`` engines on the new ledger ``url`` write their first command at once; each
    derives every host's memory id as that host did, and reads every memory."""
    engines = [MemoryEngine.open(folder / f"h{i}", ledger=url, follow=False) for i in range(HOSTS)]
    barrier = threading.Barrier(HOSTS)
    ids: list[str | None] = [None] * HOSTS
    errors: list[BaseException] = []

    def host(i: int, engine: MemoryEngine) -> None:
        try:
            barrier.wait(timeout=30)
            ids[i] = str(engine.remember(NS, f"Alice visited city number {i}.").memory_id)
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=host, args=pair) for pair in enumerate(engines)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    try:
        assert not errors, errors
        for engine in engines:  # one store key: every host derives every id alike
            derived = [
                str(
                    engine.keyring.digests.memory_id(
                        NS, normalize_statement(f"Alice visited city number {i}.")
                    )
                )
                for i in range(HOSTS)
            ]
            assert derived == ids, (derived, ids)
            assert all(engine.retrievable_memory(NS, mid) is not None for mid in ids)
    finally:
        for engine in engines:
            engine.close()


def test_hosts_writing_first_at_once_derive_the_same_ids(tmp_path: Path) -> None:
    for round_ in range(ROUNDS):
        with fresh_schema() as schema:
            _first_writes_at_once(url_for(schema), tmp_path / f"round-{round_}")
