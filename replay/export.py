"""Export the ledger's events and every read model as Parquet or JSON Lines files.

``export_store(engine, out, fmt="parquet")`` writes into the folder ``out``:

- ``events.parquet`` / ``events.jsonl``: every event up to the export position. JSON Lines
  records are those of ``memory-ledger events --json``; Parquet rows carry the common
  columns (position, type, stream_id, version, recorded_at, tenant, principal, scope_id,
  session_id, turn_id, occurred_at) plus ``payload``, the whole record as JSON text.
- ``<read model>.parquet`` / ``.jsonl``: each table and view (DuckDB writes the files).
- ``manifest.json``: the position, the hash of the record at that position (ties the export
  to the hash chain), and per file its rows (and for read models the content digest).

Read models and events are taken at the same position: the engine's projection caught up to
the head when the export starts, or a rebuild at ``to``.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import duckdb
import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.lmdb import HASH_SIZE
from memory_ledger.projections.digest import table_digests
from memory_ledger.projections.runner import PROJECTION_VERSION
from memory_ledger.projections.tables import TABLES, VIEWS
from memory_ledger.replay.errors import OutputExistsError, OutputNotADirectoryError
from memory_ledger.replay.filters import EventFilter, filter_events
from memory_ledger.replay.rebuild import build_projections
from memory_ledger.replay.timeline import event_record

__all__ = ["ExportFormat", "ExportReport", "ExportedFile", "export_store"]

ExportFormat = Literal["parquet", "jsonl"]

_EVENT_SCHEMA = pa.schema(
    [
        ("position", pa.int64()),
        ("type", pa.string()),
        ("stream_id", pa.string()),
        ("version", pa.int64()),
        ("recorded_at", pa.timestamp("us", tz="UTC")),
        ("tenant", pa.string()),
        ("principal", pa.string()),
        ("scope_id", pa.string()),
        ("session_id", pa.string()),
        ("turn_id", pa.int64()),
        ("occurred_at", pa.timestamp("us", tz="UTC")),
        ("payload", pa.string()),
    ]
)


class ExportedFile(msgspec.Struct, frozen=True, kw_only=True):
    """One written file: the table (or ``events``), its path, rows and content digest."""

    name: str
    path: str
    rows: int
    digest: str | None = None


class ExportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`export_store` wrote (also saved as ``manifest.json`` in the folder)."""

    format: str
    out: str
    position: int
    head: int
    record_hash: str | None
    projection_version: int
    exported_at: datetime
    files: tuple[ExportedFile, ...]
    seconds: float


def _prepare(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        msg = f"{str(out)!r} is a file; export writes into a folder"
        raise OutputNotADirectoryError(msg, path=str(out))
    if out.exists() and any(out.iterdir()) and not force:
        msg = f"{str(out)!r} is not empty; choose a new folder or pass --force"
        raise OutputExistsError(msg, path=str(out))
    out.mkdir(parents=True, exist_ok=True)


def _quoted(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _record_hash(engine: MemoryEngine, position: int) -> str | None:
    if position <= 0:
        return None
    for nid, value in engine.lmdb_recorder().iter_log(start=position, page=1):
        return value[:HASH_SIZE].hex() if nid == position else None
    return None


def _event_rows(engine: MemoryEngine, position: int) -> Iterator[dict[str, Any]]:
    if position <= 0:
        return
    for at, event in filter_events(engine, EventFilter(stop=position)):
        yield event_record(at, event)


def _write_events(engine: MemoryEngine, path: Path, fmt: ExportFormat, position: int) -> int:
    rows = 0
    encoder = msgspec.json.Encoder()
    if fmt == "jsonl":
        with path.open("wb") as handle:
            for record in _event_rows(engine, position):
                handle.write(encoder.encode(record) + b"\n")
                rows += 1
        return rows
    writer = pq.ParquetWriter(str(path), _EVENT_SCHEMA)
    try:
        batch: list[dict[str, Any]] = []

        def flush() -> None:
            if batch:
                writer.write_table(pa.Table.from_pylist(batch, schema=_EVENT_SCHEMA))
                batch.clear()

        for record in _event_rows(engine, position):
            namespace = record.get("namespace") or {}
            turn = record.get("turn_id")
            batch.append(
                {
                    "position": record["position"],
                    "type": record["type"],
                    "stream_id": str(record["stream_id"]),
                    "version": record["version"],
                    "recorded_at": datetime.fromisoformat(record["recorded_at"]),
                    "tenant": namespace.get("tenant"),
                    "principal": namespace.get("principal"),
                    "scope_id": namespace.get("scope_id"),
                    "session_id": record.get("session_id"),
                    "turn_id": turn if isinstance(turn, int) else None,
                    "occurred_at": (
                        datetime.fromisoformat(record["occurred_at"])
                        if record.get("occurred_at")
                        else None
                    ),
                    "payload": encoder.encode(record).decode(),
                }
            )
            rows += 1
            if len(batch) >= 5000:
                flush()
        flush()
    finally:
        writer.close()
    return rows


def _write_read_models(
    conn: duckdb.DuckDBPyConnection, out: Path, fmt: ExportFormat
) -> list[ExportedFile]:
    digests = table_digests(conn)
    files = []
    option = "FORMAT parquet" if fmt == "parquet" else "FORMAT json"
    for name in [t.name for t in TABLES] + list(VIEWS):
        path = out / f"{name}.{fmt}"
        conn.execute(f"COPY (SELECT * FROM {name} ORDER BY ALL) TO {_quoted(path)} ({option})")
        rows = int(conn.execute(f"SELECT count(*) FROM {name}").fetchall()[0][0])
        files.append(ExportedFile(name=name, path=path.name, rows=rows, digest=digests[name]))
    return files


def export_store(
    engine: MemoryEngine,
    out: str | Path,
    *,
    fmt: ExportFormat = "parquet",
    to: int | None = None,
    force: bool = False,
) -> ExportReport:
    """Write events and every read model of ``engine`` into the folder ``out``.

    :param fmt: ``parquet`` or ``jsonl``.
    :param to: export the state at this position (read models rebuilt in a scratch file);
        default: the head when the export starts (the live projection, caught up).
    :param force: write into a non-empty folder (files of the same names are replaced).
    :raises OutputExistsError: (a ``FileExistsError``) ``out`` is not empty and ``force`` is
        false.
    :raises OutputNotADirectoryError: (a ``NotADirectoryError``) ``out`` is a file.
    :raises InvalidArgumentError: (a ``ValueError``) ``fmt`` is unknown or ``to`` is beyond
        the head.
    """
    if fmt not in ("parquet", "jsonl"):
        msg = f"unknown export format {fmt!r}; use parquet or jsonl"
        raise InvalidArgumentError(msg, parameter="fmt")
    started = time.perf_counter()
    folder = Path(out)
    _prepare(folder, force)
    with contextlib.ExitStack() as stack:
        if to is None:
            live = stack.enter_context(engine.read_models())
            position, conn = live.position, live.conn
        else:
            scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ml-export-")))
            store = build_projections(engine, to=to, path=str(scratch / "at.duckdb"))
            stack.callback(store.close)
            position, conn = to, store.conn
        with engine.projection_guard() if to is None else store.guard("export"):
            files = _write_read_models(conn, folder, fmt)
    events_path = folder / f"events.{fmt}"
    rows = _write_events(engine, events_path, fmt, position)
    files.insert(0, ExportedFile(name="events", path=events_path.name, rows=rows))
    report = ExportReport(
        format=fmt,
        out=str(folder.absolute()),
        position=position,
        head=engine.head,
        record_hash=_record_hash(engine, position),
        projection_version=PROJECTION_VERSION,
        exported_at=datetime.now(UTC),
        files=tuple(files),
        seconds=time.perf_counter() - started,
    )
    manifest = msgspec.json.format(msgspec.json.encode(report), indent=2)
    (folder / "manifest.json").write_bytes(manifest + b"\n")
    return report
