"""What the imports refuse to read: a missing, damaged or foreign mem0 history database, a
missing vector store, an interchange file of another version or with a broken line. Each is
a typed error with its reason code; nothing is written."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.ids import Namespace
from memory_ledger.replay.imports import (
    ImportSourceError,
    InterchangeFormatError,
    Mem0HistoryMissingError,
    Mem0HistorySchemaError,
    Mem0HistoryUnreadableError,
    Mem0VectorStoreError,
    import_interchange,
    import_mem0,
    read_qdrant_owners,
)

NS = Namespace("acme", "alice", "mem0")

MEM0_SCHEMA = """
CREATE TABLE history (
    id TEXT PRIMARY KEY, memory_id TEXT, old_memory TEXT, new_memory TEXT, event TEXT,
    created_at DATETIME, updated_at DATETIME, is_deleted INTEGER, actor_id TEXT, role TEXT
)
"""


def history_db(path: Path, rows: list[tuple[str, str, str | None, str | None, str, str]]) -> Path:
    """A history database of mem0's schema (mem0/memory/storage.py) holding ``rows``:
    (id, memory_id, old_memory, new_memory, event, time)."""
    with sqlite3.connect(path) as conn:
        conn.execute(MEM0_SCHEMA)
        conn.executemany(
            "INSERT INTO history VALUES (?, ?, ?, ?, ?, ?, ?, 0, NULL, 'user')",
            [(i, m, old, new, ev, at, at) for i, m, old, new, ev, at in rows],
        )
    conn.close()
    return path


def test_a_missing_database_is_named_and_not_created(engine: MemoryEngine, tmp_path: Path) -> None:
    with pytest.raises(Mem0HistoryMissingError) as caught:
        import_mem0(engine, tmp_path / "history.db", namespace=NS)
    assert caught.value.reason_code == "mem0_history_missing"
    assert isinstance(caught.value, FileNotFoundError)
    assert not (tmp_path / "history.db").exists()
    assert engine.head == 0


def test_a_file_that_is_not_sqlite_is_unreadable(engine: MemoryEngine, tmp_path: Path) -> None:
    damaged = tmp_path / "history.db"
    damaged.write_bytes(b"not a database at all, " * 200)
    with pytest.raises(Mem0HistoryUnreadableError) as caught:
        import_mem0(engine, damaged, namespace=NS)
    assert caught.value.reason_code == "mem0_history_unreadable"
    assert engine.head == 0


@pytest.mark.parametrize(
    ("schema", "missing"),
    [
        ("CREATE TABLE memories (id TEXT, text TEXT)", "no table 'history'"),
        ("CREATE TABLE history (id TEXT, memory_id TEXT, event TEXT)", "missing old_memory"),
    ],
)
def test_an_unknown_schema_is_refused_naming_what_it_expected(
    engine: MemoryEngine, tmp_path: Path, schema: str, missing: str
) -> None:
    path = tmp_path / "history.db"
    with sqlite3.connect(path) as conn:
        conn.execute(schema)
    conn.close()
    with pytest.raises(Mem0HistorySchemaError) as caught:
        import_mem0(engine, path, namespace=NS)
    assert caught.value.reason_code == "mem0_history_schema_unknown"
    assert missing in str(caught.value) and "new_memory" in str(caught.value)
    assert engine.head == 0


def test_rows_that_cannot_apply_are_refused_one_by_one(
    engine: MemoryEngine, tmp_path: Path
) -> None:
    at = "2024-02-01T10:00:00+00:00"
    path = history_db(
        tmp_path / "history.db",
        [
            ("r1", "m1", None, "Dana runs on Tuesdays.", "ADD", at),
            ("r2", "m2", "Nothing", None, "DELETE", at),  # never added: nothing to forget
            ("r3", "m1", None, None, "NOOP", at),  # an event mem0 does not write
            ("r4", "m1", "Dana runs on Tuesdays.", "Dana runs on Tuesdays.", "UPDATE", at),
            ("r5", "m3", None, "   ", "ADD", at),
        ],
    )
    report = import_mem0(engine, path, namespace=NS)
    assert report.imported == 1 and report.unchanged == 1
    assert [r.reason_code for r in report.refused] == [
        "nothing_to_forget",
        "unknown_event",
        "empty_statement",
    ]
    # Ids that are not UUIDs are shown as digests, never as they are.
    assert all(r.item.startswith("sha256:") for r in report.refused)


@pytest.mark.parametrize(
    "bad",
    # the last two are valid text with a zone, but no datetime holds them in UTC
    ["not-a-date", "9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"],
)
def test_a_row_whose_time_is_not_a_time_is_refused(
    engine: MemoryEngine, tmp_path: Path, bad: str
) -> None:
    path = history_db(
        tmp_path / "history.db",
        [
            ("r1", "m1", None, "Dana runs on Tuesdays.", "ADD", bad),
            ("r2", "m2", None, "Dana swims on Fridays.", "ADD", "2024-02-01T10:00:00+00:00"),
            ("r3", "m3", None, "Dana reads at night.", "ADD", None),  # no time: recorded time
        ],
    )
    report = import_mem0(engine, path, namespace=NS)
    assert report.imported == 2
    assert [(r.reason_code, r.parameter) for r in report.refused] == [
        ("bad_timestamp", "created_at")
    ]
    with engine.read_models() as live:
        rows = live.conn.execute("SELECT statement FROM canonical_memory").fetchall()
    statements = {statement for (statement,) in rows}
    assert "Dana runs on Tuesdays." not in statements


def test_a_naive_time_is_read_as_utc(engine: MemoryEngine, tmp_path: Path) -> None:
    path = history_db(
        tmp_path / "history.db",
        [("r1", "m1", None, "Eve sings in a choir.", "ADD", "2024-02-01T10:00:00")],
    )
    import_mem0(engine, path, namespace=NS)
    with engine.read_models() as live:
        (occurred,) = live.conn.execute("SELECT occurred_at FROM canonical_memory").fetchone()
    assert occurred.isoformat().startswith("2024-02-01T10:00:00")
    assert occurred.utcoffset().total_seconds() == 0


def test_where_the_memories_go_must_be_said(engine: MemoryEngine, tmp_path: Path) -> None:
    path = history_db(tmp_path / "history.db", [])
    with pytest.raises(InvalidArgumentError):
        import_mem0(engine, path)
    with pytest.raises(InvalidArgumentError):
        import_mem0(engine, path, user_map={"u": NS})  # a mapping needs the owners


def test_a_missing_vector_store_is_typed(tmp_path: Path) -> None:
    with pytest.raises(Mem0VectorStoreError) as caught:
        read_qdrant_owners(tmp_path / "qdrant")
    assert caught.value.reason_code == "mem0_vector_store_unreadable"


def test_interchange_files_of_another_form_are_refused(
    engine: MemoryEngine, tmp_path: Path
) -> None:
    missing = tmp_path / "none.jsonl"
    with pytest.raises(ImportSourceError) as caught:
        import_interchange(engine, NS, missing)
    assert caught.value.reason_code == "import_source_missing"
    newer = tmp_path / "newer.jsonl"
    newer.write_text('{"format": "memory-ledger.interchange", "version": 4}\n')
    with pytest.raises(InterchangeFormatError) as caught:
        import_interchange(engine, NS, newer)
    assert caught.value.reason_code == "interchange_version_unknown"
    broken = tmp_path / "broken.jsonl"
    broken.write_text(
        '{"format": "memory-ledger.interchange", "version": 1}\n{"key": "k", "versions": 3}\n'
    )
    with pytest.raises(InterchangeFormatError) as caught:
        import_interchange(engine, NS, broken)
    assert caught.value.reason_code == "interchange_line_invalid" and caught.value.line == 2
    assert engine.head == 0


@pytest.mark.parametrize(
    ("field", "value"),
    [("status", "weird"), ("pruned_rule", "r" * 100_000)],
)
def test_a_line_whose_status_or_rule_cannot_be_represented_is_refused_by_line(
    engine: MemoryEngine, tmp_path: Path, field: str, value: str
) -> None:
    """A status that is none of canonical memory's, or a prune rule far longer than a
    rule's name, would come back as something else (an unknown status as active): the line
    is refused, naming the line and the field, and nothing is written."""
    import json

    version = {"statement": "Alice likes tea.", "subject": "Alice"}
    line = {"key": "k", "status": "pruned", "versions": [version], field: value}
    path = tmp_path / f"{field}.jsonl"
    path.write_text(
        '{"format": "memory-ledger.interchange", "version": 3}\n' + json.dumps(line) + "\n"
    )
    with pytest.raises(InterchangeFormatError) as caught:
        import_interchange(engine, NS, path)
    assert caught.value.reason_code == "interchange_line_invalid" and caught.value.line == 2
    assert field in str(caught.value) and value[:50] not in str(caught.value)
    assert engine.head == 0


def test_the_errors_pickle_with_their_attributes() -> None:
    import pickle

    error = InterchangeFormatError(
        "bad", path="/f", line=3, reason_code="interchange_version_unknown"
    )
    again = pickle.loads(pickle.dumps(error))
    assert (again.reason_code, again.path, again.line) == ("interchange_version_unknown", "/f", 3)
    missing = pickle.loads(pickle.dumps(Mem0HistoryMissingError("gone", path="/h")))
    assert isinstance(missing, FileNotFoundError) and missing.path == "/h"
    assert missing.reason_code == "mem0_history_missing"


def test_a_history_database_locked_by_mem0_says_so(
    engine: MemoryEngine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mem0 writing (an exclusive lock held): the import says the database is locked and a
    rerun resumes, not that it is unreadable."""
    import memory_ledger.replay.imports.mem0_history as history

    path = history_db(
        tmp_path / "history.db",
        [("r1", "m1", None, "Dana runs on Tuesdays.", "ADD", "2024-02-01T10:00:00+00:00")],
    )
    monkeypatch.setattr(history, "BUSY_TIMEOUT", 0.05)
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        with pytest.raises(Mem0HistoryUnreadableError) as caught:
            import_mem0(engine, path, namespace=NS)
        assert caught.value.reason_code == "mem0_history_locked"
        assert "locked" in str(caught.value)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert import_mem0(engine, path, namespace=NS).imported == 1  # the rerun
