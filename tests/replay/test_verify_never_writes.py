"""``verify`` and the audit commands never write the store (issue 34 item 3 follow-up): a
ledger copied back from before an erasure under the live ``keys/`` made ``verify`` with the
master key append the missing ``NamespaceErased`` record (and report "ok, 11 records");
it now reports the mismatch, not ok, and leaves every file as it was."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import psycopg
from psycopg import sql

import memory_ledger
from memory_ledger.commands.config import MemoryConfig
from memory_ledger.replay import backup_store, verify_path
from tests.pg import BASE_URL, url_for

ALICE = memory_ledger.Namespace("acme", "alice", "s")


def _digests(folder: Path) -> dict[str, str]:
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.parent.name in ("ledger", "keys") and p.name != "lock.mdb"
    }


def _pre_erasure_ledger_under_live_keys(tmp_path: Path) -> tuple[Path, bytes]:
    store, key = tmp_path / "store", os.urandom(32)
    with memory_ledger.open(store, master_key=key) as engine:
        for n in range(4):
            engine.remember(ALICE, f"alice fact {n} about tea.")
        backup_store(engine, tmp_path / "backup")
        engine.erase("acme", "alice")
    shutil.copyfile(tmp_path / "backup" / "ledger" / "data.mdb", store / "ledger" / "data.mdb")
    return store, key


def test_verify_reports_an_unrecorded_erasure_and_writes_nothing(tmp_path: Path) -> None:
    store, key = _pre_erasure_ledger_under_live_keys(tmp_path)
    before = _digests(store)
    for given in (key, None):  # the key store's erasure records are readable without it
        report = verify_path(store, master_key=given)
        assert not report.ok, given
        assert "NamespaceErased" in (report.problem or "")
        assert "erased" in (report.problem or "")
        assert _digests(store) == before


def test_a_recorded_erasure_verifies(tmp_path: Path) -> None:
    store, key = tmp_path / "store", os.urandom(32)
    with memory_ledger.open(store, master_key=key) as engine:
        engine.remember(ALICE, "alice drinks tea.")
        engine.erase("acme", "alice")
    for given in (key, None):
        report = verify_path(store, master_key=given)
        assert report.ok, report
        assert (report.erased > 0) == (given is not None)


def test_audit_commands_leave_the_store_alone(tmp_path: Path) -> None:
    store, key = _pre_erasure_ledger_under_live_keys(tmp_path)
    key_file = tmp_path / "master.key"
    key_file.write_bytes(key)
    key_file.chmod(0o600)
    before = _digests(store)
    root = str(Path(memory_ledger.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root, "NO_COLOR": "1"}
    for command in (["verify"], ["stats"], ["events"]):
        result = subprocess.run(
            [sys.executable, "-m", "memory_ledger.replay", *command, "--store", str(store)]
            + ["--master-key-file", str(key_file)],
            capture_output=True,
            text=True,
            env=env,
            check=False,
            timeout=120,
        )
        assert result.returncode == (1 if command == ["verify"] else 0), result.stderr
        assert _digests(store) == before, command


def test_verify_of_a_postgres_ledger_reports_and_writes_nothing(
    tmp_path: Path, pg_schema: str
) -> None:
    # Before: verify with the key tried to record the missing NamespaceErased record (10.8 s
    # of retries, then ConcurrencyConflictError).
    url, key, folder = url_for(pg_schema), os.urandom(32), tmp_path / "store"
    with memory_ledger.open(folder, ledger=url, master_key=key) as engine:
        engine.remember(ALICE, "alice drinks tea.")
        engine.erase("acme", "alice")
    table = sql.Identifier(pg_schema, "stored_events")
    last = sql.SQL("(SELECT max(notification_id) FROM {0})").format(table)
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        tags = sql.Identifier(pg_schema, "stored_events_tags")
        conn.execute(sql.SQL("DELETE FROM {0} WHERE notification_id = {1}").format(tags, last))
        conn.execute(sql.SQL("DELETE FROM {0} WHERE notification_id = {1}").format(table, last))
        count = sql.SQL("SELECT count(*) FROM {0}").format(table)
        before = conn.execute(count).fetchall()
    report = verify_path(folder, config=MemoryConfig(ledger=url), master_key=key)
    assert not report.ok
    assert "NamespaceErased" in (report.problem or "")
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        assert conn.execute(count).fetchall() == before
