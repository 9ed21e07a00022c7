"""The ledger on PostgreSQL beyond the library's cases: chain, identity, format, passwords,
hosts sharing one ledger, and the audit commands (migrate, verify, backup, export, replay
--check, explain) against it. Each test uses its own schema, dropped after."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from uuid import uuid4

import psycopg
import pytest
from eventsourcing.persistence import IntegrityError, StoredEvent
from psycopg import sql
from typer.testing import CliRunner

from memory_ledger.commands import (
    LedgerUnavailableError,
    MemoryEngine,
    Namespace,
    RecordedExtractor,
)
from memory_ledger.ledger.errors import LedgerConnectionError, MemoryLedgerError
from memory_ledger.ledger.postgres import (
    LedgerURLError,
    PostgresLedgerApplicationRecorder,
    parse_ledger_url,
    probe_server,
)
from memory_ledger.ledger.records import GENESIS_HASH, LedgerFormatError, chain_hash
from memory_ledger.replay import verify_store
from memory_ledger.replay.cli.app import app
from tests.conftest import make_item, skip_without_locomo
from tests.pg import BASE_URL, require_postgres, url_for

runner = CliRunner()
NS = Namespace("acme", "alice", "assistant")


def cli(*args: str, code: int = 0) -> str:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == code, result.output
    return result.stdout


def remember(engine: MemoryEngine, session: str, *statements: str) -> None:
    extractor = RecordedExtractor()
    chat = engine.session(NS, session, extractor=extractor)
    for turn, statement in enumerate(statements, 1):
        extractor.provide(turn, [make_item(statement)])
        chat.observe_final_transcript(turn, f"user: {statement}")
    chat.finish()


def recorder_of(engine: MemoryEngine) -> PostgresLedgerApplicationRecorder:
    assert isinstance(engine.recorder, PostgresLedgerApplicationRecorder)
    return engine.recorder


def test_chain_is_computed_over_the_body_and_ids_stay_gapless(pg_url: str, tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "a", ledger=pg_url) as engine:
        remember(engine, "s1", "Alice likes tea", "Alice owns a bike")
        recorder = recorder_of(engine)
        head = engine.head
        # A refused batch (a stream version that exists) leaves no gap behind.
        first = recorder.select_notifications(start=1, limit=1)[0]
        duplicate = StoredEvent(first.originator_id, first.originator_version, "t", b"x")
        fresh = StoredEvent(uuid4(), 1, "t", b"y")
        with pytest.raises(IntegrityError):
            recorder.insert_events([fresh, duplicate])
        assert engine.head == head
        assert list(recorder.insert_events([fresh])) == [head + 1]
        previous = GENESIS_HASH
        for position, (nid, entry) in enumerate(recorder.iter_log(), 1):
            assert nid == position
            assert entry[:32] == chain_hash(previous, entry[32:])
            previous = entry[:32]
        assert position == head + 1


def test_tampering_is_found_by_verify(pg_url: str, pg_schema: str, tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "a", ledger=pg_url) as engine:
        remember(engine, "s1", "Alice likes tea")
        with psycopg.connect(BASE_URL.split("?")[0], autocommit=True) as conn:
            conn.execute(
                sql.SQL(
                    "UPDATE {0}.stored_events SET state = state || '\\x00'::bytea "
                    "WHERE notification_id = 3"
                ).format(sql.Identifier(pg_schema))
            )
        report = verify_store(engine)
        assert not report.ok and report.first_bad_position == 3


@pytest.mark.parametrize(
    ("column", "change"),
    [
        ("state", "set_byte(state, 1, get_byte(state, 1) # 1)"),
        ("record_hash", "set_byte(record_hash, 0, get_byte(record_hash, 0) # 128)"),
        ("topic", "overlay(topic placing 'M' from 1 for 1)"),
        ("originator_version", "originator_version + 100"),
    ],
)
def test_a_changed_column_is_named_by_verify_export_and_as_of(
    pg_url: str, pg_schema: str, tmp_path: Path, column: str, change: str
) -> None:
    """A one-byte change in any column of a row (issue 34): ``verify`` (Python and CLI)
    names its position; export and as-of refuse with a typed error naming it."""
    from memory_ledger.commands.config import MemoryConfig
    from memory_ledger.replay import as_of, export_store, verify_path

    with MemoryEngine.open(tmp_path / "a", ledger=pg_url) as engine:
        remember(engine, "s1", "Alice likes tea", "Alice owns a bike")
        head = engine.head
    with psycopg.connect(BASE_URL.split("?")[0], autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "UPDATE {0}.stored_events SET {1} = " + change + " WHERE notification_id = 4"
            ).format(sql.Identifier(pg_schema), sql.Identifier(column))
        )
    report = verify_path(tmp_path / "b", config=MemoryConfig(ledger=pg_url))
    assert not report.ok and report.first_bad_position == 4, report
    result = runner.invoke(app, ["verify", "--store", str(tmp_path / "b"), "--ledger", pg_url])
    assert result.exit_code == 1 and "record 4" in result.stderr, result.output
    with MemoryEngine.open(tmp_path / "a", ledger=pg_url, create=False) as engine:
        for call in (
            lambda: export_store(engine, tmp_path / "export"),
            lambda: as_of(engine, head).close(),
        ):
            with pytest.raises(MemoryLedgerError) as raised:
                call()
            assert getattr(raised.value, "position", None) == 4, raised.value
            assert raised.value.reason_code


def test_identity_and_newer_format(pg_url: str, pg_schema: str, tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "a", ledger=pg_url) as engine:
        store_id = recorder_of(engine).store_id
        assert store_id
    with MemoryEngine.open(tmp_path / "b", ledger=pg_url) as engine:
        assert recorder_of(engine).store_id == store_id
    with psycopg.connect(BASE_URL.split("?")[0], autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "UPDATE {0}.stored_events_meta SET value = '99' WHERE name = 'format_version'"
            ).format(sql.Identifier(pg_schema))
        )
    with pytest.raises(LedgerFormatError, match="format version 99"):
        MemoryEngine.open(tmp_path / "c", ledger=pg_url)


def test_missing_ledger_with_create_false(pg_url: str, tmp_path: Path) -> None:
    with pytest.raises(LedgerUnavailableError, match="no memory ledger"):
        MemoryEngine.open(tmp_path / "a", ledger=pg_url, create=False)


def test_a_missing_database_fails_at_once_naming_it(tmp_path: Path) -> None:
    """The server answers at once that the database does not exist: the open fails then
    (not after connect_timeout, 5 s here), with a typed error naming the database."""
    require_postgres()
    base = parse_ledger_url(BASE_URL)
    url = f"postgresql://{base.user}@{base.host}:{base.port}/nosuchdb_ml?connect_timeout=5"
    started = time.monotonic()
    with pytest.raises(LedgerUnavailableError) as raised:
        MemoryEngine.open(tmp_path / "a", ledger=url)
    assert time.monotonic() - started < 2.5
    error = raised.value
    assert error.reason_code == "no_database" and "no database 'nosuchdb_ml'" in str(error)
    assert error.__cause__ is None and error.__suppress_context__
    started = time.monotonic()
    result = runner.invoke(app, ["verify", "--store", str(tmp_path / "b"), "--ledger", url])
    assert time.monotonic() - started < 2.5
    assert result.exit_code == 2 and "no database 'nosuchdb_ml'" in result.stderr
    assert "Traceback" not in result.output


def test_an_unknown_role_is_refused_at_once_naming_the_cause(tmp_path: Path) -> None:
    """F3: the server refuses an unknown role at once; the open says so (typed,
    ``authentication_failed``, the user and the server's reason, not the password) instead
    of waiting ``connect_timeout`` and calling the server unavailable (the pool's answer
    would carry ``ledger_connection``)."""
    require_postgres()
    base = parse_ledger_url(BASE_URL)
    role = "ml_norole_f3q"
    url = (
        f"postgresql://{role}:Pw-f3q-secret@{base.host}:{base.port}/{base.dbname}"
        "?connect_timeout=30"
    )
    with pytest.raises(LedgerUnavailableError) as raised:
        MemoryEngine.open(tmp_path / "a", ledger=url)
    error = raised.value
    assert error.reason_code == "authentication_failed", error
    assert f"refused user {role!r}" in str(error) and "does not exist" in str(error)
    assert "Pw-f3q-secret" not in str(error) and "unavailable" not in str(error)
    assert error.__cause__ is None and error.__suppress_context__
    result = runner.invoke(app, ["stats", "--store", str(tmp_path / "b"), "--ledger", url])
    assert result.exit_code == 2 and f"refused user {role!r}" in result.stderr
    assert "Pw-f3q-secret" not in result.output + result.stderr
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    "answer",
    [
        'FATAL:  password authentication failed for user "agent"',
        'FATAL:  no pg_hba.conf entry for host "10.0.0.9", user "agent", database "memory", '
        "no encryption",
        'FATAL:  role "agent" is not permitted to log in',
        "fe_sendauth: no password supplied",
    ],
)
def test_every_authentication_refusal_is_reported_at_once(
    answer: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """F3: the refusals this server (trust authentication) cannot give, as libpq words
    them: each is ``authentication_failed`` naming the server's reason, never the
    password."""

    def refuse(**_: object) -> None:
        raise psycopg.OperationalError(
            f'connection failed: connection to server at "10.0.0.9", port 5432 failed: {answer}'
        )

    monkeypatch.setattr(psycopg, "connect", refuse)
    url = parse_ledger_url("postgresql://agent:Pw-f3q-secret@10.0.0.9/memory")
    with pytest.raises(LedgerConnectionError) as raised:
        probe_server(url)
    assert raised.value.reason_code == "authentication_failed"
    assert answer.removeprefix("FATAL:").strip() in str(raised.value)
    assert "Pw-f3q-secret" not in str(raised.value)


def test_a_server_that_never_answers_is_waited_for_once(tmp_path: Path) -> None:
    """A port that accepts but never answers: one connect_timeout, not the probe's and then
    the pool's."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # the kernel completes the handshake; nobody ever replies
        port = silent.getsockname()[1]
        url = f"postgresql://agent@127.0.0.1:{port}/memory?connect_timeout=2"
        started = time.monotonic()
        with pytest.raises(LedgerUnavailableError, match="did not answer within 2 s") as raised:
            MemoryEngine.open(tmp_path / "a", ledger=url)
        assert time.monotonic() - started < 3.5  # the probe's 2 s, not 2 s more of the pool
        assert raised.value.reason_code == "ledger_connection"


def test_passwords_never_show(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "s3cr3t-Pa55word"
    url = f"postgresql://agent:{secret}@127.0.0.1:9/memory?schema=x&connect_timeout=1"
    with pytest.raises(LedgerUnavailableError) as info:
        MemoryEngine.open(tmp_path / "a", ledger=url)
    text = str(info.value) + repr(info.value)
    assert secret not in text and "postgresql://agent@127.0.0.1:9/memory" in text
    assert info.value.__cause__ is None and info.value.__suppress_context__
    result = runner.invoke(app, ["verify", "--store", str(tmp_path / "b"), "--ledger", url])
    assert result.exit_code == 2 and secret not in result.output
    assert "LedgerUnavailableError" in result.output
    with pytest.raises(LedgerURLError) as bad:
        parse_ledger_url(f"postgresql://agent:{secret}@127.0.0.1/memory?colour=red")
    assert secret not in str(bad.value)
    monkeypatch.setenv("ML_PW", secret)
    parsed = parse_ledger_url("postgresql://agent@h/db?password_env=ML_PW")
    assert parsed.password == secret and secret not in repr(parsed)
    monkeypatch.setenv("PGPASSWORD", "other")
    assert parse_ledger_url("postgresql://agent@h/db").password == "other"
    with pytest.raises(LedgerURLError, match="NOT_SET_HERE"):
        parse_ledger_url("postgresql://agent@h/db?password_env=NOT_SET_HERE")


def test_an_unset_password_env_is_named_never_redacted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The variable's NAME is not a secret: the error names it, in Python and on the CLI
    (whose secret scanner used to blank ``password_env=NAME`` and the rest of the line);
    no value is ever shown, and a password put in ``password_env`` itself is not echoed."""
    monkeypatch.delenv("MY_PG_PASS", raising=False)
    url = "postgresql://agent@127.0.0.1:9/memory?password_env=MY_PG_PASS&schema=s1"
    with pytest.raises(LedgerURLError) as raised:
        parse_ledger_url(url)
    error = raised.value
    assert isinstance(error, MemoryLedgerError) and isinstance(error, ValueError)
    assert error.reason_code == "password_env_unset" and error.parameter == "ledger"
    assert "environment variable MY_PG_PASS" in str(error) and "not set" in str(error)
    result = runner.invoke(app, ["verify", "--store", str(tmp_path / "a"), "--ledger", url])
    assert result.exit_code == 2 and result.stderr.count("\n") == 1
    assert "environment variable MY_PG_PASS (named by password_env) is not set" in result.stderr
    assert "REDACTED" not in result.stderr and "Traceback" not in result.output
    assert "postgresql://agent@127.0.0.1:9/memory?schema=s1" in result.stderr
    secret = "Hunt3r!2-pw"
    bad = f"postgresql://agent@127.0.0.1:9/memory?password_env={secret}"
    result = runner.invoke(app, ["verify", "--store", str(tmp_path / "b"), "--ledger", bad])
    assert result.exit_code == 2 and secret not in result.output
    with pytest.raises(LedgerURLError) as echoed:
        parse_ledger_url(f"postgresql://agent@h/db?password_env={secret}")
    assert echoed.value.reason_code == "password_env_invalid" and secret not in str(echoed.value)


@pytest.mark.parametrize(
    "schema",
    ["x;drop%20table%20y", 'evil"quote', "Mixed", "9lives", "a" * 41, "public.x"],
)
def test_a_schema_name_that_is_no_plain_identifier_is_refused(schema: str) -> None:
    """The schema goes into SQL as an identifier: anything but a plain lower-case name is
    refused before any connection, naming the parameter (never the server's parser)."""
    with pytest.raises(LedgerURLError, match="schema must be a lower-case identifier"):
        parse_ledger_url(f"postgresql://agent@127.0.0.1/memory?schema={schema}")
    assert parse_ledger_url("postgresql://agent@h/db?schema=tenant_7").schema == "tenant_7"


def test_two_hosts_read_each_others_writes(pg_url: str, tmp_path: Path) -> None:
    with (
        MemoryEngine.open(tmp_path / "host-a", ledger=pg_url) as a,
        MemoryEngine.open(tmp_path / "host-b", ledger=pg_url) as b,
    ):
        remember(a, "s1", "Alice plays the cello")
        assert [h.statement for h in b.recall(NS, "cello").results] == ["Alice plays the cello"]
        remember(b, "s2", "Alice grows tomatoes")
        assert [h.statement for h in a.recall(NS, "tomatoes").results] == ["Alice grows tomatoes"]
        assert not (tmp_path / "host-a" / "ledger").exists()
        assert sorted(p.name for p in (tmp_path / "host-b").iterdir()) == ["projections"]


@pytest.fixture(scope="module")
def conv26_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = skip_without_locomo()
    folder = tmp_path_factory.mktemp("conv26")
    script = folder / "conv26.jsonl"
    script.write_text(cli("convert-locomo", str(source), "--sample", "conv-26"))
    cli("run", str(script), "--store", str(folder / "store"), "--no-sync")
    return folder / "store"


def test_migrate_conv26_round_trip(conv26_store: Path, pg_url: str, tmp_path: Path) -> None:
    store = str(conv26_store)
    report = json.loads(cli("migrate", "--to", pg_url, "--store", store, "--json"))
    assert report["ok"] and report["copied"] == report["head"] > 1000
    # Migrating again finds the copy complete (a prefix of the source): nothing to copy.
    again = json.loads(cli("migrate", "--to", pg_url, "--store", store, "--json"))
    assert again["ok"] and again["copied"] == 0 and again["resumed_after"] == report["head"]

    host = str(tmp_path / "host")
    verify = json.loads(cli("verify", "--store", host, "--ledger", pg_url, "--json"))
    assert verify["ok"] and verify["head"] == report["head"]
    source_rebuild = json.loads(cli("replay", "--store", store, "--json"))
    copy_rebuild = json.loads(cli("replay", "--store", host, "--ledger", pg_url, "--json"))
    assert copy_rebuild["digests"] == source_rebuild["digests"]
    check = json.loads(cli("replay", "--check", "--store", host, "--ledger", pg_url, "--json"))
    assert check["ok"]

    # Export: the same events and read models, tied to the same record hash.
    cli("export", "--store", store, "--out", str(tmp_path / "x1"), "--format", "jsonl")
    cli("export", "--store", host, "--ledger", pg_url, "--out", str(tmp_path / "x2"),
        "--format", "jsonl")  # fmt: skip
    m1 = json.loads((tmp_path / "x1" / "manifest.json").read_text())
    m2 = json.loads((tmp_path / "x2" / "manifest.json").read_text())
    assert m1["record_hash"] == m2["record_hash"] == report["head_hash"]
    assert [f["digest"] for f in m1["files"]] == [f["digest"] for f in m2["files"]]
    assert (tmp_path / "x1" / "events.jsonl").read_bytes() == (
        tmp_path / "x2" / "events.jsonl"
    ).read_bytes()

    # Explain a memory through the PostgreSQL ledger: the same lineage as from LMDB.
    memory_id = json.loads(
        cli(
            "recall",
            "--store",
            store,
            "--tenant",
            "locomo",
            "--principal",
            "conv-26",
            "--scope-id",
            "conversation",
            "support group",
            "--json",
        )  # fmt: skip
    )["results"][0]["memory_id"]
    assert json.loads(cli("explain", memory_id, "--store", store, "--format", "json")) == (
        json.loads(
            cli("explain", memory_id, "--store", host, "--ledger", pg_url, "--format", "json")
        )  # fmt: skip
    )

    # Backup of the PostgreSQL ledger: an LMDB backup folder that restores and verifies.
    cli("backup", "--store", host, "--ledger", pg_url, "--out", str(tmp_path / "bk"))
    restored = json.loads(
        cli("restore", str(tmp_path / "bk"), "--store", str(tmp_path / "r"), "--json")
    )
    assert restored["ok"] and restored["verify"]["head"] == report["head"]


def test_migrate_refuses_a_foreign_ledger(conv26_store: Path, pg_url: str, tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "a", ledger=pg_url) as engine:
        remember(engine, "other", "Bob likes jazz")
    result = runner.invoke(app, ["migrate", "--to", pg_url, "--store", str(conv26_store)])
    assert result.exit_code == 2 and "not a prefix" in result.output


def test_url_for_is_well_formed(pg_schema: str) -> None:
    assert parse_ledger_url(url_for(pg_schema)).schema == pg_schema


def test_a_host_follows_other_hosts_appends(pg_url: str, tmp_path: Path) -> None:
    with (
        MemoryEngine.open(tmp_path / "follower", ledger=pg_url) as follower,
        MemoryEngine.open(tmp_path / "writer", ledger=pg_url, follow=False) as writer,
    ):
        assert follower.follower is not None and writer.follower is None
        remember(writer, "s1", "Alice plays the cello")
        deadline = time.monotonic() + 10
        while follower.runner.position < writer.head and time.monotonic() < deadline:
            time.sleep(0.02)
        # Caught up without any read on the follower, woken by the writer's NOTIFY.
        assert follower.runner.position == writer.head
        assert follower.follower.wakeups >= 1
