"""The id format step for a PostgreSQL ledger (docs/erasure.md "Migrating a store to keyed
ids"): the documented route, as the four commands a host runs.

A format-1 store written by this release on PostgreSQL (its ``<events>_keys`` table records
id format 1 before the first write) goes through ``backup --ledger`` -> ``restore`` ->
``migrate --store`` -> ``migrate --to`` a new, empty schema. Afterwards every memory, recall
answer, history and event read from the new ledger equals the one read from the old ledger
modulo ids, the chain verifies, and no public digest of a name or statement is in any table
of the new schema.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine
from memory_ledger.commands.config import MemoryConfig, load_config_from
from memory_ledger.ledger.digests import ID_FORMAT_KEYED, ID_FORMAT_UNKEYED
from memory_ledger.ledger.faults import FAULTS
from memory_ledger.replay import verify_store
from memory_ledger.replay.audit import rekey_ids, rekey_postgres
from memory_ledger.replay.audit.rekey import IdMigrationError, migrate_ids
from memory_ledger.replay.audit.rekey_postgres import migrate_postgres_ids
from memory_ledger.replay.cli.app import app
from tests.encryption.test_id_migration import OTHER, _answers, _public_guesses, format1_store
from tests.encryption.test_keyed_digests import ERASED, KEPT
from tests.pg import BASE_URL, drop_schema, fresh_schema, url_for


def _cli(*args: str) -> dict[str, object]:
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    decoded: dict[str, object] = json.loads(result.output)
    return decoded


def _schema_text(schema: str) -> str:
    """Every row of every table of ``schema`` as the server prints it (bytea as hex)."""
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        tables = [
            str(r[0])
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
                (schema,),
            ).fetchall()
        ]
        assert tables
        rows: list[str] = []
        for table in tables:
            query = sql.SQL("SELECT t::text FROM {0}.{1} t").format(
                sql.Identifier(schema), sql.Identifier(table)
            )
            rows += [str(r[0]) for r in conn.execute(query).fetchall()]
    return "\n".join(rows).lower()


def _in_schema(text: str, value: bytes | UUID) -> bool:
    if isinstance(value, UUID):
        return any(n in text for n in (str(value), value.hex))
    return value.hex() in text or value.decode("utf-8", "replace").lower() in text


@pytest.mark.parametrize("encrypted", [False, True])
def test_a_format_1_postgres_ledger_moves_to_keyed_ids_by_the_documented_route(
    tmp_path: Path, encrypted: bool
) -> None:
    master = os.urandom(32) if encrypted else None
    key_args: list[str] = []
    if master is not None:
        (tmp_path / "master.key").write_bytes(master)
        key_args = ["--master-key-file", str(tmp_path / "master.key")]
    with fresh_schema() as old_schema, fresh_schema() as new_schema:
        old, new = url_for(old_schema), url_for(new_schema)
        host = format1_store(tmp_path / "host", master, ledger=old)
        with MemoryEngine.open(host, sync=False, master_key=master, ledger=old) as engine:
            assert engine.keyring.digests.id_format == ID_FORMAT_UNKEYED
        _answers(host, master, old)  # recall appends records: compare the second answers
        before = _answers(host, master, old)
        guesses = [g for ns in (ERASED, KEPT, OTHER) for g in _public_guesses(ns)]
        assert any(_in_schema(_schema_text(old_schema), v) for _, v in guesses)

        # The route (docs/erasure.md), with every host of the old ledger stopped.
        backup, folder = tmp_path / "backup", tmp_path / "folder"
        _cli("backup", "--store", str(host), "--ledger", old, "--out", str(backup), *key_args)
        restored = _cli("restore", str(backup), "--store", str(folder), *key_args)
        assert restored["ok"]
        step = _cli("migrate", "--store", str(folder), *key_args)
        assert step["migrated"] and step["id_format_after"] == ID_FORMAT_KEYED
        copied = _cli("migrate", "--store", str(folder), "--to", new, *key_args)
        assert copied["ok"] and copied["copied"] == step["head"]

        new_host = tmp_path / "new-host"
        after = _answers(new_host, master, new)
        assert after["events"][: len(before["events"])] == before["events"]
        assert {k: v for k, v in after.items() if k != "events"} == {
            k: v for k, v in before.items() if k != "events"
        }
        with MemoryEngine.open(new_host, sync=False, master_key=master, ledger=new) as engine:
            assert engine.keyring.digests.id_format == ID_FORMAT_KEYED
            assert verify_store(engine).ok
        text = _schema_text(new_schema)
        assert [label for label, v in guesses if _in_schema(text, v)] == []


def _schemas(prefix: str) -> list[str]:
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT schema_name FROM information_schema.schemata WHERE schema_name LIKE %s",
            (prefix + "%",),
        ).fetchall()
    return sorted(str(r[0]) for r in rows)


@pytest.mark.parametrize("encrypted", [False, True])
def test_migrate_ledger_rewrites_a_format_1_postgres_ledger_in_place(
    tmp_path: Path, encrypted: bool
) -> None:
    master = os.urandom(32) if encrypted else None
    key_args: list[str] = []
    if master is not None:
        (tmp_path / "master.key").write_bytes(master)
        key_args = ["--master-key-file", str(tmp_path / "master.key")]
    with fresh_schema() as schema:
        url = url_for(schema)
        host = format1_store(tmp_path / "host", master, ledger=url)
        _answers(host, master, url)
        before = _answers(host, master, url)
        guesses = [g for ns in (ERASED, KEPT, OTHER) for g in _public_guesses(ns)]

        report = _cli("migrate", "--store", str(host), "--ledger", url, *key_args)
        assert report["migrated"] and report["id_format_after"] == ID_FORMAT_KEYED
        assert report["head"] == before["events"][-1]["position"]
        assert _schemas(schema) == [schema]  # the scratch and aside schemas are gone
        # This host's projections were rebuilt; another host builds its own.
        for folder in (host, tmp_path / "other-host"):
            after = _answers(folder, master, url)
            assert after["events"][: len(before["events"])] == before["events"]
            assert {k: v for k, v in after.items() if k != "events"} == {
                k: v for k, v in before.items() if k != "events"
            }
        with MemoryEngine.open(host, sync=False, master_key=master, ledger=url) as engine:
            assert engine.keyring.digests.id_format == ID_FORMAT_KEYED
            assert verify_store(engine).ok
        text = _schema_text(schema)
        assert [label for label, v in guesses if _in_schema(text, v)] == []
        again = _cli("migrate", "--store", str(host), "--ledger", url, *key_args)
        assert again["migrated"] is False


def test_a_write_during_the_copy_or_a_crash_in_the_swap_leaves_the_old_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fresh_schema() as schema:
        url = url_for(schema)
        host = format1_store(tmp_path / "host", None, ledger=url)
        _answers(host, None, url)
        before = _answers(host, None, url)
        verify = rekey_postgres.verify_store

        def written_meanwhile(engine: MemoryEngine) -> object:
            with MemoryEngine.open(tmp_path / "writer", sync=False, ledger=url) as writer:
                writer.remember(KEPT, "Bartholomew likes plums.")
            return verify(engine)

        monkeypatch.setattr(rekey_postgres, "verify_store", written_meanwhile)
        with pytest.raises(IdMigrationError) as e:
            migrate_postgres_ids(host, url)
        assert e.value.reason_code == "store_in_use"
        monkeypatch.setattr(rekey_postgres, "verify_store", verify)
        assert _schemas(schema) == [schema]
        with pytest.raises(IdMigrationError) as e:  # the LMDB step points to this one
            migrate_ids(host, config=load_config_from(MemoryConfig(), ledger=url))
        assert e.value.reason_code == "postgres_ledger"
        with MemoryEngine.open(host, sync=False, ledger=url) as engine:
            assert engine.keyring.digests.id_format == ID_FORMAT_UNKEYED
            engine.forget(KEPT, "Bartholomew likes plums.")
        _answers(host, None, url)
        before = _answers(host, None, url)

        def crash() -> None:
            raise KeyboardInterrupt

        FAULTS["rekey_postgres.swap"] = crash
        try:
            with pytest.raises(KeyboardInterrupt):
                migrate_postgres_ids(host, url)
        finally:
            del FAULTS["rekey_postgres.swap"]
        assert _schemas(schema) == [schema]
        unchanged = _answers(host, None, url)
        assert unchanged["memories"] == before["memories"]
        with MemoryEngine.open(host, sync=False, ledger=url) as engine:
            assert engine.keyring.digests.id_format == ID_FORMAT_UNKEYED
        assert migrate_postgres_ids(host, url).migrated  # the rerun completes
        after = _answers(host, None, url)
        assert after["memories"] == before["memories"] and after["history"] == before["history"]


def test_a_crash_during_the_copy_leaves_a_scratch_schema_that_the_rerun_drops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with fresh_schema() as schema:
        url = url_for(schema)
        host = format1_store(tmp_path / "host", None, ledger=url)
        _answers(host, None, url)
        before = _answers(host, None, url)
        calls = {"n": 0}
        struct = rekey_ids.IdRewriter.struct

        def failing(self: rekey_ids.IdRewriter, value: Any) -> Any:
            calls["n"] += 1
            if calls["n"] > 20:  # noqa: PLR2004
                raise KeyboardInterrupt
            return struct(self, value)

        monkeypatch.setattr(rekey_ids.IdRewriter, "struct", failing)
        with pytest.raises(KeyboardInterrupt):
            migrate_postgres_ids(host, url)
        monkeypatch.setattr(rekey_ids.IdRewriter, "struct", struct)
        try:
            assert _schemas(schema) == [schema, f"{schema}_id_migration"]  # the half copy
            assert _answers(host, None, url)["memories"] == before["memories"]
            assert migrate_postgres_ids(host, url).migrated
            assert _schemas(schema) == [schema]
            after = _answers(host, None, url)
            assert after["memories"] == before["memories"]
            assert after["history"] == before["history"]
        finally:
            drop_schema(f"{schema}_id_migration")
