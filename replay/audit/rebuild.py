"""Rebuild every read model from the ledger, and check a live projection file against it.

Projections are pure functions of the event sequence (docs/design.md), so a rebuild
from position 0 into a fresh DuckDB file must equal the live file at the same position. The
comparison uses the content digests of :func:`projections.table_digests` (sorted rows,
sha256 in Python); a table whose digest differs is named, with the rows found on one side
only.
"""

from __future__ import annotations

import collections
import contextlib
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import msgspec

from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.events import LedgerEvent
from memory_ledger.projections.digest import table_digests
from memory_ledger.projections.runner import PROJECTION_VERSION, ProjectionRunner
from memory_ledger.projections.store import ProjectionStore
from memory_ledger.projections.tables import TABLES, VIEWS
from memory_ledger.replay.audit.errors import OutputExistsError, unwritable_output

__all__ = [
    "CheckReport",
    "RebuildReport",
    "TableDifference",
    "PositionOutOfRangeError",
    "build_projections",
    "check_projections",
    "diff_table",
    "rebuild_projections",
    "row_counts",
]

OnPage = Callable[[int], None]
"""Progress callback: called with the last position applied after each committed page."""

Keep = Callable[[int, LedgerEvent], bool]
"""Event filter for :func:`build_projections`: ``(position, event) -> keep it``."""

_ID_COLUMNS: dict[str, tuple[str, ...]] = {
    "canonical_memory": ("memory_id", "status", "statement"),
    "candidates": ("candidate_id", "statement"),
    "candidate_outcomes": ("candidate_id", "outcome"),
    "transcripts": ("session_id", "turn_id", "position"),
    "extractions": ("session_id", "turn_id", "position"),
    "turn_snapshots": ("session_id", "turn_id"),
    "admissions": ("session_id", "turn_id", "memory_id"),
    "uses": ("session_id", "turn_id", "memory_id"),
    "recalls": ("session_id", "turn_id", "query"),
    "vocabulary": ("field", "term", "records"),
    "session_candidates": ("candidate_id", "status"),
    "pending_extractions": ("session_id", "turn_id"),
}
"""Columns that identify a row of each read model in a difference report."""

_PAIR_KEYS: dict[str, str] = {
    "canonical_memory": "memory_id",
    "candidates": "candidate_id",
    "candidate_outcomes": "candidate_id",
    "transcripts": "transcript_key",
    "extractions": "transcript_key",
    "turn_snapshots": "snapshot_key",
    "admissions": "admission_key",
    "uses": "position",
    "recalls": "position",
    "vocabulary": "term",
    "session_candidates": "candidate_id",
    "pending_extractions": "transcript_key",
}
"""The column that pairs a changed row of the live file with its rebuilt version."""

_encoder = msgspec.msgpack.Encoder()


class PositionOutOfRangeError(InvalidArgumentError):
    """A requested position is beyond the ledger head (or negative)."""

    reason_code = "position_out_of_range"


class RebuildReport(msgspec.Struct, frozen=True, kw_only=True):
    """A rebuild: the position reached, rows and content digest per table/view, time taken.

    ``path`` is the kept DuckDB file, or None when the rebuild went to a temporary file.
    """

    position: int
    head: int
    rows: dict[str, int]
    digests: dict[str, str]
    seconds: float
    path: str | None = None


class TableDifference(msgspec.Struct, frozen=True, kw_only=True):
    """One table or view whose live content differs from the rebuild.

    ``only_live``/``only_rebuilt`` count rows present on one side only (a changed row counts
    once on each side); ``examples`` describe up to five of them (see :func:`diff_table`).
    """

    name: str
    live_rows: int
    rebuilt_rows: int
    only_live: int
    only_rebuilt: int
    examples: tuple[str, ...] = ()


class CheckReport(msgspec.Struct, frozen=True, kw_only=True):
    """Outcome of :func:`check_projections`: ``ok`` when every table and view matched."""

    ok: bool
    position: int
    head: int
    live_path: str
    checked: tuple[str, ...]
    differences: tuple[TableDifference, ...]
    seconds: float


def _target(engine: MemoryEngine, to: int | None) -> tuple[int, int]:
    head = engine.head
    if to is None:
        return head, head
    if to < 0:
        msg = f"position {to} is negative"
        raise PositionOutOfRangeError(msg, parameter="to")
    if to > head:
        msg = f"position {to} is beyond the ledger head {head}"
        raise PositionOutOfRangeError(msg, parameter="to")
    return to, head


def build_projections(
    engine: MemoryEngine,
    *,
    to: int | None = None,
    path: str = ":memory:",
    keep: Keep | None = None,
    on_page: OnPage | None = None,
    page_size: int = 10_000,
) -> ProjectionStore:
    """Fold the ledger from position 0 to ``to`` (default: the head now) into a NEW store.

    :param path: a DuckDB file that does not exist yet, or ``":memory:"``.
    :param keep: optional filter; events it refuses are skipped (the position still moves).
    :param on_page: progress callback ``(last position applied)``.
    :returns: the open :class:`ProjectionStore`; the caller closes it.
    :raises PositionOutOfRangeError: ``to`` is negative or beyond the head.
    :raises OutputExistsError: (a ``FileExistsError``) ``path`` exists.
    """
    target, _ = _target(engine, to)
    if path != ":memory:" and Path(path).exists():
        msg = f"{path!r} exists; a rebuild writes a fresh file"
        raise OutputExistsError(msg, path=path)
    # The erased namespaces of the engine's store: scrubbed from the file when it closes
    # (projections/derived.py), whatever the fold met.
    store = ProjectionStore(path, version=PROJECTION_VERSION, erased=engine.erased_namespaces)
    try:
        runner = engine.projection_runner(store, page_size=page_size)
        with store.guard("rebuild"):
            _fold(runner, target, keep, on_page)
    except BaseException:
        store.close()
        raise
    return store


def _fold(runner: ProjectionRunner, target: int, keep: Keep | None, on_page: OnPage | None) -> None:
    """Fold the ledger's pages up to ``target`` into ``runner``'s (fresh) store."""
    position = 0
    while position < target:
        page = runner.read_page(position, target)
        if page is None:
            break
        last, events = page
        if keep is not None:
            events = [(p, e) for p, e in events if keep(p, e)]
        runner.apply_events(events, previous=position, last=last)
        del page, events
        position = last
        if on_page is not None:
            on_page(position)


def row_counts(conn: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Rows of every read-model table and view, by name."""
    counts = {}
    for name in [t.name for t in TABLES] + list(VIEWS):
        counts[name] = int(conn.execute(f"SELECT count(*) FROM {name}").fetchall()[0][0])
    return counts


def _check_writable(path: Path) -> None:
    """Create and remove ``path`` (a new file), so that an output that cannot be written is
    named as such before the rebuild (DuckDB reports a folder like ``/proc`` as full)."""
    try:
        with path.open("xb"):
            pass
        path.unlink()
    except OSError as e:
        raise unwritable_output(e, path, "rebuilt projection file") from e


@contextlib.contextmanager
def _scratch(prefix: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix=prefix) as folder:
        yield Path(folder) / "projections.duckdb"


def rebuild_projections(
    engine: MemoryEngine,
    *,
    to: int | None = None,
    out: str | Path | None = None,
    on_page: OnPage | None = None,
) -> RebuildReport:
    """Rebuild every read model from the ledger into a fresh DuckDB file.

    :param to: last position to apply (default: the ledger head when called).
    :param out: keep the rebuilt file here (must not exist); default: a temporary file that
        is removed afterwards (the report still carries rows and digests).
    :raises PositionOutOfRangeError: ``to`` is negative or beyond the head.
    :raises OutputExistsError: (a ``FileExistsError``) ``out`` exists.
    :raises OutputUnwritableError: (an ``OSError``) ``out`` cannot be created.
    """
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        path = Path(out) if out is not None else stack.enter_context(_scratch("ml-rebuild-"))
        if out is not None and path.exists():
            msg = f"{str(path)!r} exists; choose a new file for the rebuilt projections"
            raise OutputExistsError(msg, path=str(path))
        if out is not None:
            _check_writable(path)
        store = build_projections(engine, to=to, path=str(path), on_page=on_page)
        try:
            with store.guard("read"):
                position = store.position()
                rows = row_counts(store.conn)
                digests = table_digests(store.conn)
        finally:
            store.close()
    return RebuildReport(
        position=position,
        head=engine.head,
        rows=rows,
        digests=digests,
        seconds=time.perf_counter() - started,
        path=str(Path(out).absolute()) if out is not None else None,
    )


def _rows(
    conn: duckdb.DuckDBPyConnection, name: str
) -> tuple[list[str], collections.Counter[bytes], dict[bytes, tuple[Any, ...]]]:
    cursor = conn.execute(f"SELECT * FROM {name}")
    columns = [d[0] for d in cursor.description or ()]
    counts: collections.Counter[bytes] = collections.Counter()
    samples: dict[bytes, tuple[Any, ...]] = {}
    for row in cursor.fetchall():
        key = _encoder.encode(list(row))
        counts[key] += 1
        samples.setdefault(key, row)
    return columns, counts, samples


def _identify(columns: list[str], row: tuple[Any, ...], name: str) -> str:
    parts = []
    for column in _ID_COLUMNS.get(name, tuple(columns[:3])):
        if column in columns:
            text = str(row[columns.index(column)])
            parts.append(f"{column}={text if len(text) <= 60 else text[:59] + '…'}")
    return ", ".join(parts)


def _describe_changes(
    columns: list[str], name: str, live: list[tuple[Any, ...]], rebuilt: list[tuple[Any, ...]]
) -> list[str]:
    """Pair rows of both sides by their first id column; name the columns that differ."""
    key = _PAIR_KEYS.get(name, columns[0])
    index = columns.index(key) if key in columns else 0
    key = columns[index]
    by_key = {row[index]: row for row in rebuilt}
    lines = []
    paired = set()
    for row in live:
        other = by_key.get(row[index])
        if other is None or row[index] in paired:
            lines.append(f"only live: {_identify(columns, row, name)}")
            continue
        paired.add(row[index])
        changed = [
            f"{column} live {_value(a)} != rebuilt {_value(b)}"
            for column, a, b in zip(columns, row, other, strict=True)
            if _encoder.encode(a) != _encoder.encode(b)
        ]
        lines.append(f"{key}={row[index]}: " + "; ".join(changed))
    lines += [
        f"only rebuilt: {_identify(columns, row, name)}"
        for row in rebuilt
        if row[index] not in paired
    ]
    return lines


def _value(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"


def diff_table(
    live: duckdb.DuckDBPyConnection, rebuilt: duckdb.DuckDBPyConnection, name: str
) -> TableDifference:
    """Rows of table or view ``name`` found on one side only (multisets of whole rows).

    ``examples`` pairs rows of both sides with the same id and names the columns that
    differ (``memory_id=...: importance live 0.1 != rebuilt 0.8``); unpaired rows are listed
    as ``only live`` / ``only rebuilt``. At most five examples.
    """
    columns, live_counts, live_rows = _rows(live, name)
    _, rebuilt_counts, rebuilt_rows = _rows(rebuilt, name)
    only_live = live_counts - rebuilt_counts
    only_rebuilt = rebuilt_counts - live_counts
    examples = _describe_changes(
        columns,
        name,
        [live_rows[k] for k in sorted(only_live)],
        [rebuilt_rows[k] for k in sorted(only_rebuilt)],
    )
    return TableDifference(
        name=name,
        live_rows=live_counts.total(),
        rebuilt_rows=rebuilt_counts.total(),
        only_live=only_live.total(),
        only_rebuilt=only_rebuilt.total(),
        examples=tuple(examples[:5]),
    )


def check_projections(
    engine: MemoryEngine, *, to: int | None = None, on_page: OnPage | None = None
) -> CheckReport:
    """Compare the engine's live projection file with a rebuild from the ledger.

    The live file is first caught up (to ``to``, default the head); the rebuild then goes to
    the live file's position, and every table and view is compared by content digest.

    :raises PositionOutOfRangeError: ``to`` is beyond the head, or the live file is already
        past ``to`` (a live file cannot go back; check at its position instead).
    """
    started = time.perf_counter()
    target, _ = _target(engine, to)
    with engine.read_models(to=target) as live:
        position = live.position
        if position != target:
            msg = (
                f"the live projection is at position {position}, past {target}; check without --to"
            )
            raise PositionOutOfRangeError(msg, parameter="to")
        live_digests = table_digests(live.conn)
    with _scratch("ml-check-") as path:
        rebuilt = build_projections(engine, to=position, path=str(path), on_page=on_page)
        try:
            with rebuilt.guard("read"):
                rebuilt_digests = table_digests(rebuilt.conn)
            differing = [n for n in live_digests if live_digests[n] != rebuilt_digests.get(n)]
            with engine.read_models(catch_up=False) as live:
                differences = tuple(diff_table(live.conn, rebuilt.conn, name) for name in differing)
        finally:
            rebuilt.close()
    return CheckReport(
        ok=not differences,
        position=position,
        head=engine.head,
        live_path=str(engine.projection_file),
        checked=tuple(live_digests),
        differences=differences,
        seconds=time.perf_counter() - started,
    )
