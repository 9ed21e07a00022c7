"""Export the ledger's events and every read model as Parquet or JSON Lines files.

``export_store(engine, out, fmt="parquet")`` writes into the folder ``out``:

- ``events.parquet`` / ``events.jsonl``: every event up to the export position. JSON Lines
  records are those of ``memory-ledger events --json``; Parquet rows carry the common
  columns (position, type, stream_id, stream_version, recorded_at, tenant, principal,
  scope_id, session_id, turn_id, occurred_at) plus ``payload``, the whole record as JSON
  text (:func:`write_events`).
- ``<read model>.parquet`` / ``.jsonl``: each table and view (DuckDB writes the files).
- ``manifest.json``: the position, the hash of the record at that position (ties the export
  to the hash chain), and per file its rows (and for read models the content digest).

Read models and events are taken at the same position: the engine's projection caught up to
the head when the export starts, or a rebuild at ``to``. Rows of a namespace erased by the
time of the export (by any process) are scrubbed first
(:mod:`memory_ledger.projections.derived`); its events are written as erased records.

An export is all or nothing: the files are written into a hidden sibling folder
(``.<name>.<random>.partial``) that is renamed into place once the manifest is written; on
any failure it is removed, and ``out`` is left as it was (absent, empty, or for ``force``
with its files untouched).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import duckdb
import msgspec
import pyarrow as pa
import pyarrow.parquet as pq

from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.ledger.errors import InvalidArgumentError, MemoryLedgerError
from memory_ledger.ledger.events import LedgerEvent
from memory_ledger.ledger.records import HASH_SIZE
from memory_ledger.projections.derived import write_atomic
from memory_ledger.projections.digest import table_digests
from memory_ledger.projections.runner import PROJECTION_VERSION
from memory_ledger.projections.tables import TABLES, VIEWS
from memory_ledger.replay.audit.errors import (
    OutputExistsError,
    OutputNotADirectoryError,
    unwritable_output,
)
from memory_ledger.replay.audit.filters import EventFilter, filter_events
from memory_ledger.replay.audit.rebuild import build_projections
from memory_ledger.replay.audit.timeline import event_record
from memory_ledger.replay.audit.verify import check_chain

__all__ = ["ExportFormat", "ExportReport", "ExportedFile", "export_store", "write_events"]

ExportFormat = Literal["parquet", "jsonl"]

_EVENT_SCHEMA = pa.schema(
    [
        ("position", pa.int64()),
        ("type", pa.string()),
        ("stream_id", pa.string()),
        ("stream_version", pa.int64()),
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


def _check_out(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        msg = f"{str(out)!r} is a file; export writes into a folder"
        raise OutputNotADirectoryError(msg, path=str(out))
    if out.exists() and any(out.iterdir()) and not force:
        msg = f"{str(out)!r} is not empty; choose a new folder or pass --force"
        raise OutputExistsError(msg, path=str(out))


def _missing_ancestor(folder: Path) -> Path | None:
    """The highest missing folder among ``folder``'s parents (what the export creates)."""
    missing = None
    for parent in folder.parents:
        if parent.exists():
            break
        missing = parent
    return missing


def _move_into_place(staging: Path, out: Path) -> None:
    """Rename the complete ``staging`` folder to ``out`` (absent or empty); into a
    non-empty ``out`` (``force``), each file is renamed over its namesake, the manifest
    last."""
    if not out.exists() or not any(out.iterdir()):
        os.replace(staging, out)  # an empty folder is replaced (POSIX rename)
        return
    names = sorted(p.name for p in staging.iterdir())
    names.sort(key=lambda name: name == "manifest.json")
    for name in names:
        os.replace(staging / name, out / name)
    staging.rmdir()


def _quoted(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def _record_hash(engine: MemoryEngine, position: int) -> str | None:
    if position <= 0:
        return None
    for nid, value in engine.ledger_log().iter_log(start=position, page=1):
        return value[:HASH_SIZE].hex() if nid == position else None
    return None


def _timestamp(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) and value else None


def _parquet_row(record: dict[str, Any], encoder: msgspec.json.Encoder) -> dict[str, Any]:
    namespace = record.get("namespace")
    if not isinstance(namespace, dict):
        namespace = {}
    session = record.get("session_id")
    turn = record.get("turn_id")
    return {
        "position": record["position"],
        "type": record["type"],
        "stream_id": str(record["stream_id"]),
        "stream_version": record["stream_version"],
        "recorded_at": _timestamp(record["recorded_at"]),
        "tenant": namespace.get("tenant"),
        "principal": namespace.get("principal"),
        "scope_id": namespace.get("scope_id"),
        "session_id": session if isinstance(session, str) else None,
        "turn_id": turn if isinstance(turn, int) and not isinstance(turn, bool) else None,
        "occurred_at": _timestamp(record.get("occurred_at")),
        "payload": encoder.encode(record).decode(),
    }


def write_events(
    events: Iterable[tuple[int, LedgerEvent]], path: str | Path, fmt: ExportFormat
) -> int:
    """Write ``(position, event)`` pairs to the NEW or replaced file ``path``; return rows.

    JSON Lines: one :func:`~memory_ledger.replay.audit.timeline.event_record` per line (as
    ``memory-ledger events --json``). Parquet: the common columns of the module docstring
    and ``payload``, the record as JSON text; a column the event does not have (or holds
    another type in, e.g. a ``turn_id`` that is not an integer) is null.

    :raises InvalidArgumentError: ``fmt`` is neither ``parquet`` nor ``jsonl``.
    :raises OSError: the file cannot be written.
    """
    if fmt not in ("parquet", "jsonl"):
        msg = f"unknown export format {fmt!r}; use parquet or jsonl"
        raise InvalidArgumentError(msg, parameter="fmt")
    rows = 0
    encoder = msgspec.json.Encoder()
    records = (event_record(at, event) for at, event in events)
    if fmt == "jsonl":
        with Path(path).open("wb") as handle:
            for record in records:
                handle.write(encoder.encode(record) + b"\n")
                rows += 1
        return rows
    with pq.ParquetWriter(str(path), _EVENT_SCHEMA) as writer:
        batch: list[dict[str, Any]] = []
        for record in records:
            batch.append(_parquet_row(record, encoder))
            rows += 1
            if len(batch) >= 5000:
                writer.write_table(pa.Table.from_pylist(batch, schema=_EVENT_SCHEMA))
                batch.clear()
        if batch:
            writer.write_table(pa.Table.from_pylist(batch, schema=_EVENT_SCHEMA))
    return rows


def _events_up_to(engine: MemoryEngine, position: int) -> Iterator[tuple[int, LedgerEvent]]:
    if position > 0:
        yield from filter_events(engine, EventFilter(stop=position))


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
    :raises OutputUnwritableError: (an ``OSError``) ``out`` cannot be written (its reason
        code says why).
    :raises InvalidArgumentError: (a ``ValueError``) ``fmt`` is unknown or ``to`` is beyond
        the head.
    :raises LedgerTamperedError: a record up to ``to`` does not match its hash, or a position
        is missing (its ``position`` is the first bad one; nothing is written).
    :raises LedgerRecordError: a record does not decode (``EventDecodeError``: its event),
        naming its position.

    Nothing is left behind on failure: the files are written into a hidden sibling folder,
    renamed into place when complete (see the module docstring).
    """
    if fmt not in ("parquet", "jsonl"):
        msg = f"unknown export format {fmt!r}; use parquet or jsonl"
        raise InvalidArgumentError(msg, parameter="fmt")
    started = time.perf_counter()
    folder = Path(out)
    _check_out(folder, force)
    with engine.ledger_guard():
        check_chain(engine.ledger_log(), to)  # a damaged store is refused, naming where
    target = folder.absolute()
    created = _missing_ancestor(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(
            tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".partial", dir=target.parent)
        )
    except OSError as e:
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        raise unwritable_output(e, folder, "export folder") from e
    try:
        report = _export_into(engine, staging, folder, fmt, to, started)
        _check_out(folder, force)  # again: another process may have written it meanwhile
        _move_into_place(staging, folder)
    except BaseException as e:
        shutil.rmtree(staging, ignore_errors=True)
        if created is not None:
            shutil.rmtree(created, ignore_errors=True)
        if isinstance(e, OSError) and not isinstance(e, MemoryLedgerError):
            raise unwritable_output(e, folder, "export folder") from e
        raise
    return report


def _export_into(
    engine: MemoryEngine,
    staging: Path,
    folder: Path,
    fmt: ExportFormat,
    to: int | None,
    started: float,
) -> ExportReport:
    """Write every file and the manifest into ``staging`` (``folder`` is where they go)."""
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
            # Through the one place that knows the erased namespaces (projections/derived.py):
            # no row of a namespace erased by now (by any process) reaches the files.
            if to is None:
                engine.scrub_erased_projections()
            else:
                engine.erased_namespaces.scrub(conn)
            files = _write_read_models(conn, staging, fmt)
    events_name = f"events.{fmt}"
    rows = write_events(_events_up_to(engine, position), staging / events_name, fmt)
    files.insert(0, ExportedFile(name="events", path=events_name, rows=rows))
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
    write_atomic(staging / "manifest.json", [manifest, b"\n"])
    return report
