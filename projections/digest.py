"""Content digests of read-model tables, computed in Python.

DuckDB's parallel aggregates and ``hash()`` are not reproducible across runs, so rows are
fetched, encoded with msgpack, sorted as bytes and hashed with sha256 here. Two files with
equal digests hold the same rows, whatever their physical order.
"""

from __future__ import annotations

import hashlib

import duckdb
import msgspec

from memory_ledger.projections.tables import TABLES, VIEWS

__all__ = ["table_digest", "table_digests"]

_encoder = msgspec.msgpack.Encoder()


def table_digest(conn: duckdb.DuckDBPyConnection, table: str) -> str:
    """sha256 (hex) over the sorted msgpack encodings of every row of ``table``."""
    rows = conn.execute(f"SELECT * FROM {table}").fetchall()
    encoded = sorted(_encoder.encode(list(row)) for row in rows)
    digest = hashlib.sha256(f"{table}:{len(encoded)}".encode())
    for row in encoded:
        digest.update(len(row).to_bytes(4, "big"))
        digest.update(row)
    return digest.hexdigest()


def table_digests(conn: duckdb.DuckDBPyConnection) -> dict[str, str]:
    """Digest of every read-model table and view, by name."""
    names = [t.name for t in TABLES] + list(VIEWS)
    return {name: table_digest(conn, name) for name in names}
