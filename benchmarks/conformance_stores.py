"""The store factories the conformance table runs the kit on (``--store-factory
benchmarks.conformance_stores:NAME``); each reads its place from the environment.

- :func:`ledger_store`: ``LedgerStore`` over a store folder ``$CONFORMANCE_LEDGER_DIR``;
- :func:`sealed_ledger_store`: the same, opened with the master key ``$CONFORMANCE_LEDGER_KEY``
  (hex; values sealed at rest, docs/erasure.md);
- :func:`postgres_store`: LangGraph's ``PostgresStore`` on ``$CONFORMANCE_PG_URL``;
- :func:`sqlite_store`: LangGraph's ``SqliteStore`` in ``$CONFORMANCE_SQLITE_DIR/store.db``;
- LangGraph's ``InMemoryStore`` needs none: the class is its own factory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from langgraph.store.base import BaseStore

from memory_ledger.commands import Namespace
from memory_ledger.replay.conformance import store_factory
from memory_ledger.replay.langgraph_store import LedgerStore

TENANT = Namespace("conformance", "kit", "store")


def _place(variable: str) -> str:
    value = os.environ.get(variable)
    if not value:
        msg = f"set ${variable} (where the store under test lives)"
        raise RuntimeError(msg)
    return value


@store_factory(persistent=True, processes=True)
def ledger_store() -> BaseStore:
    """``LedgerStore.open($CONFORMANCE_LEDGER_DIR, conformance/kit/store)``: several
    processes share a store folder (docs/concurrency.md)."""
    return LedgerStore.open(_place("CONFORMANCE_LEDGER_DIR"), TENANT)


@store_factory(persistent=True, processes=True)
def sealed_ledger_store() -> BaseStore:
    """As :func:`ledger_store`, with the master key ``bytes.fromhex($CONFORMANCE_LEDGER_KEY)``."""
    key = bytes.fromhex(_place("CONFORMANCE_LEDGER_KEY"))
    return LedgerStore.open(_place("CONFORMANCE_LEDGER_DIR"), TENANT, master_key=key)


@store_factory(persistent=True, processes=True)
@contextmanager
def postgres_store() -> Iterator[BaseStore]:
    """``PostgresStore.from_conn_string($CONFORMANCE_PG_URL)``, set up."""
    from langgraph.store.postgres import PostgresStore

    with PostgresStore.from_conn_string(_place("CONFORMANCE_PG_URL")) as store:
        store.setup()
        yield store


@store_factory(persistent=True, processes=True)
@contextmanager
def sqlite_store() -> Iterator[BaseStore]:
    """``SqliteStore.from_conn_string($CONFORMANCE_SQLITE_DIR/store.db)``, set up."""
    from langgraph.store.sqlite import SqliteStore

    path = Path(_place("CONFORMANCE_SQLITE_DIR")) / "store.db"
    with SqliteStore.from_conn_string(str(path)) as store:
        store.setup()
        yield store
