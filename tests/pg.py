"""PostgreSQL for the tests: the machine's server, one fresh schema per test, dropped after.

The server is ``$MEMORY_LEDGER_TEST_PG`` (default ``postgresql://postgres@127.0.0.1:5432/test``,
trust authentication as on this machine kind). A test that needs it calls
:func:`require_postgres`: when the server cannot be reached the test FAILS, saying so, unless
``MEMORY_LEDGER_NO_POSTGRES=1`` says this run has no PostgreSQL (then it is skipped). CI
(``.ci/run``) makes sure the server is up and never sets that variable.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from memory_ledger.ledger.postgres import parse_ledger_url

BASE_URL = os.environ.get("MEMORY_LEDGER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


def _connect() -> psycopg.Connection[tuple[object, ...]]:
    url = parse_ledger_url(BASE_URL)
    return psycopg.connect(
        host=url.host,
        port=url.port,
        dbname=url.dbname,
        user=url.user,
        password=url.password or None,
        autocommit=True,
        connect_timeout=5,
    )


def require_postgres() -> None:
    """Skip when this run declares no PostgreSQL; fail when the server is unreachable."""
    if os.environ.get("MEMORY_LEDGER_NO_POSTGRES") == "1":
        pytest.skip("MEMORY_LEDGER_NO_POSTGRES=1: this run has no PostgreSQL")
    try:
        with _connect():
            pass
    except psycopg.Error as e:
        pytest.fail(
            f"PostgreSQL at {parse_ledger_url(BASE_URL).redacted} is unreachable ({e}); start "
            "it (pg_ctlcluster 15 main start) or set MEMORY_LEDGER_NO_POSTGRES=1 to skip"
        )


def create_schema() -> str:
    """Create a new schema with a unique name and return the name."""
    name = f"mltest_{uuid.uuid4().hex[:12]}"
    with _connect() as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {0}").format(sql.Identifier(name)))
    return name


def drop_schema(name: str) -> None:
    """Drop the schema ``name`` and everything in it (after closing its connections)."""
    with _connect() as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {0} CASCADE").format(sql.Identifier(name)))


@contextlib.contextmanager
def fresh_schema() -> Iterator[str]:
    """A new schema for the duration of the block (checks the server first)."""
    require_postgres()
    name = create_schema()
    try:
        yield name
    finally:
        drop_schema(name)


def url_for(schema: str, **params: str) -> str:
    """The ledger URL of ``schema`` on the test server (extra query ``params`` appended)."""
    query = "&".join([f"schema={schema}", *(f"{k}={v}" for k, v in params.items())])
    sep = "&" if "?" in BASE_URL else "?"
    return f"{BASE_URL}{sep}{query}"


@pytest.fixture
def pg_schema() -> Iterator[str]:
    """A fresh schema on the test server, dropped after the test."""
    with fresh_schema() as name:
        yield name


@pytest.fixture
def pg_url(pg_schema: str) -> str:
    """The ledger URL of a fresh schema (dropped after the test)."""
    return url_for(pg_schema)
