"""The user-facing surface of erasure (issue #16): ``memory-ledger erase``, ``keys new`` and
``keys rotate``, ``--master-key-file``, ``stats``, and every audit tool on a store where one
namespace was erased: none crashes, each shows the erased records as erased, and no output
holds the erased namespace's words or ciphertext of it."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import memory_ledger
from memory_ledger.commands.extraction import RecordedExtractor
from memory_ledger.ledger.keyring import NamespaceMatch
from memory_ledger.ledger.master_key import ENV_MASTER_KEY_FILE, read_master_key_file
from memory_ledger.replay.cli import erase as erase_cli
from memory_ledger.replay.cli.app import app
from tests.conftest import make_item

runner = CliRunner()
ALICE = memory_ledger.Namespace("acme", "alice", "chat")
BOB = memory_ledger.Namespace("acme", "bob", "chat")
SECRET = "zanzibarian"  # only in alice's namespace
KEPT = "quokkafruit"  # only in bob's


def invoke(*args: str, code: int = 0, stdin: str | None = None) -> Any:
    result = runner.invoke(app, list(args), input=stdin)
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.output
    return result


def fill(store: Path, key: bytes) -> dict[str, str]:
    """Two namespaces, each with a direct memory and a finished session (transcript,
    candidate, recall); returns alice's and bob's memory ids by name."""
    ids: dict[str, str] = {}
    with memory_ledger.open(store, master_key=key) as engine:
        for ns, word in ((ALICE, SECRET), (BOB, KEPT)):
            ids[ns.principal] = str(engine.remember(ns, f"{ns.principal} drinks {word}.").memory_id)
            extractor = RecordedExtractor()
            extractor.provide(
                1, [make_item(f"User loves {word} tea", subject="user", tags=[f"{word}tag"])]
            )
            with engine.session(ns, "s1", extractor=extractor) as session:
                session.observe_final_transcript(1, f"user: I love {word} tea")
                session.recall(f"{word} tea")
                session.finish()
    return ids


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "master.key"
    path.write_bytes(os.urandom(32))
    return path


@pytest.fixture
def erased_store(
    tmp_path: Path, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[Path, dict[str, str]]]:
    """A store where alice's namespace was erased through the CLI (key from the env)."""
    store = tmp_path / "store"
    ids = fill(store, key_file.read_bytes())
    monkeypatch.setenv(ENV_MASTER_KEY_FILE, str(key_file))
    invoke("erase", "--tenant", "acme", "--principal", "alice", "--store", str(store), "--yes")
    yield store, ids


def assert_clean(output: str | bytes) -> None:
    """No word of the erased namespace in an output (text or bytes)."""
    data = output.encode() if isinstance(output, str) else output
    assert SECRET.encode() not in data
    assert b"alice" not in data.lower()


# erase ------------------------------------------------------------------------------------


def test_erase_refuses_off_a_terminal_without_yes(tmp_path: Path, key_file: Path) -> None:
    store = tmp_path / "store"
    fill(store, key_file.read_bytes())
    common = ["--store", str(store), "--master-key-file", str(key_file)]
    refused = invoke("erase", "--tenant", "acme", "--principal", "alice", *common, code=2)
    assert "ConfirmationRequiredError" in refused.stderr and "--yes" in refused.stderr
    assert json.loads(invoke("stats", *common, "--json").stdout)["encryption"]["erased_keys"] == 0


def test_erase_asks_on_a_terminal(
    tmp_path: Path, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    fill(store, key_file.read_bytes())
    monkeypatch.setattr(erase_cli, "_on_terminal", lambda: True)
    common = ["--store", str(store), "--master-key-file", str(key_file)]
    no = runner.invoke(
        app, ["erase", "--tenant", "acme", "--principal", "alice", *common], input="n\n"
    )
    assert no.exit_code == 1 and "nothing erased" in no.stderr
    assert "1 namespace(s) with data" in no.stderr
    yes = invoke("erase", "--tenant", "acme", "--principal", "alice", *common, stdin="y\n")
    assert "erased 1 namespace(s)" in yes.stdout
    status = json.loads(invoke("stats", *common, "--json").stdout)["encryption"]
    assert (status["live_keys"], status["erased_keys"]) == (1, 1)


def test_erase_with_yes_reports_and_records_it(tmp_path: Path, key_file: Path) -> None:
    store = tmp_path / "store"
    fill(store, key_file.read_bytes())
    common = ["--store", str(store), "--master-key-file", str(key_file)]
    done = json.loads(
        invoke(
            "erase",
            "--tenant",
            "acme",
            "--principal",
            "alice",
            "--scope-id",
            "chat",
            "--yes",
            "--requested-by",
            "dpo",
            "--json",
            *common,
        ).stdout
    )
    assert done["namespaces"] == 1 and done["position"] == done["ledger_head"]
    records = [
        json.loads(line)
        for line in invoke("events", *common, "--type", "NamespaceErased", "--json").stdout.split(
            "\n"
        )
        if line
    ]
    assert [(r["command_id"], r["requested_by"], r["level"]) for r in records] == [
        (done["command_id"], "dpo", "namespace")
    ]
    again = invoke("erase", "--tenant", "acme", "--principal", "alice", "--yes", *common)
    assert "nothing to erase" in again.stdout


def test_erase_errors_are_one_line(tmp_path: Path, key_file: Path) -> None:
    store = tmp_path / "store"
    fill(store, key_file.read_bytes())
    base = ["erase", "--tenant", "acme", "--store", str(store), "--yes"]
    missing = invoke(*base, code=2)  # the store needs its master key
    assert "MasterKeyError" in missing.stderr and "master key" in missing.stderr
    other = tmp_path / "other.key"
    other.write_bytes(os.urandom(32))
    wrong = invoke(*base, "--master-key-file", str(other), code=2)
    assert "MasterKeyError" in wrong.stderr
    scope = invoke(*base, "--scope-id", "chat", "--master-key-file", str(key_file), code=2)
    assert "InvalidNamespaceError" in scope.stderr
    clear = tmp_path / "clear"
    with memory_ledger.open(clear) as engine:
        engine.remember(BOB, "Bob likes tea.")
    plain = invoke("erase", "--tenant", "acme", "--store", str(clear), "--yes", code=2)
    assert "EncryptionNotConfiguredError" in plain.stderr
    for result in (missing, wrong, scope, plain):
        assert len(result.stderr.strip().splitlines()) == 1


# keys -------------------------------------------------------------------------------------


def test_keys_new_writes_a_private_key_and_never_overwrites(tmp_path: Path) -> None:
    out = tmp_path / "new.key"
    made = json.loads(invoke("keys", "new", "--out", str(out), "--json").stdout)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and out.stat().st_size == 32
    assert made["key_id"] == read_master_key_file(out).key_id
    assert out.read_bytes().hex() not in json.dumps(made)
    before = out.read_bytes()
    refused = invoke("keys", "new", "--out", str(out), code=2)
    assert "KeyFileExistsError" in refused.stderr and out.read_bytes() == before


def test_keys_rotate_round_trip(tmp_path: Path, key_file: Path) -> None:
    store = tmp_path / "store"
    fill(store, key_file.read_bytes())
    new = tmp_path / "new.key"
    invoke("keys", "new", "--out", str(new))
    old_id = read_master_key_file(key_file).key_id
    rotated = json.loads(
        invoke(
            "keys",
            "rotate",
            "--new-master-key-file",
            str(new),
            "--store",
            str(store),
            "--master-key-file",
            str(key_file),
            "--json",
        ).stdout
    )
    assert rotated["rewrapped"] == 2 and rotated["old_master_key_id"] == old_id
    assert rotated["master_key_id"] == read_master_key_file(new).key_id
    old = invoke("stats", "--store", str(store), "--master-key-file", str(key_file), code=2)
    assert "MasterKeyError" in old.stderr
    found = invoke(
        *("recall", "--store", str(store), "--master-key-file", str(new)),
        *("--tenant", "acme", "--principal", "bob", "--scope-id", "chat", KEPT, "--json"),
    )
    assert KEPT in json.loads(found.stdout)["results"][0]["statement"]
    back = invoke(
        *("keys", "rotate", "--new-master-key-file", str(key_file), "--store", str(store)),
        *("--master-key-file", str(new)),
    )
    assert "re-wrapped 2 data key(s)" in back.stdout
    invoke("verify", "--store", str(store), "--master-key-file", str(key_file))


def test_master_key_file_from_the_settings_file(
    tmp_path: Path, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    fill(store, key_file.read_bytes())
    settings = tmp_path / "memory-ledger.toml"
    settings.write_text(f'[memory]\nstore_dir = "store"\nmaster_key_file = "{key_file.name}"\n')
    monkeypatch.delenv(ENV_MASTER_KEY_FILE, raising=False)
    report = json.loads(invoke("--config", str(settings), "stats", "--json").stdout)
    assert report["encryption"]["master_key_id"] == read_master_key_file(key_file).key_id


# stats ------------------------------------------------------------------------------------


def test_stats_shows_encryption_never_the_key(
    erased_store: tuple[Path, dict[str, str]], key_file: Path
) -> None:
    store, _ = erased_store
    shown = invoke("stats", "--store", str(store)).stdout
    key_id = read_master_key_file(key_file).key_id
    assert "encryption at rest" in shown and key_id in shown
    assert "1 live, 1 erased" in shown and "key store" in shown
    assert key_file.read_bytes().hex() not in shown
    report = json.loads(invoke("stats", "--store", str(store), "--json").stdout)
    encryption = report["encryption"]
    assert encryption["encrypting"] and encryption["master_key_id"] == key_id
    assert encryption["key_store"] == str(store / "keys" / "data-keys.msgpack")
    assert encryption["erased_records"] > 0 and encryption["sealed_records"] == report["events"] - 1
    assert report["erased_sessions"] == 2
    assert [(n["tenant"], n["principal"]) for n in report["namespaces"]] == [("acme", "bob")]
    assert_clean(shown)


def test_stats_of_a_clear_store_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_MASTER_KEY_FILE, raising=False)
    store = tmp_path / "clear"
    with memory_ledger.open(store) as engine:
        engine.remember(BOB, "Bob likes tea.")
    shown = invoke("stats", "--store", str(store)).stdout
    assert "payloads are stored in clear" in shown
    report = json.loads(invoke("stats", "--store", str(store), "--json").stdout)
    assert report["encryption"]["encrypting"] is False
    assert report["encryption"]["master_key_id"] is None


# audit tools on an erased store -------------------------------------------------------------


def test_events_show_erased_records_as_erased(erased_store: tuple[Path, dict[str, str]]) -> None:
    store, _ = erased_store
    table = invoke("events", "--store", str(store)).stdout
    assert "[erased]" in table
    assert_clean(table)
    lines = invoke("events", "--store", str(store), "--json").stdout.splitlines()
    records = [json.loads(line) for line in lines]
    erased = [r for r in records if r.get("erased")]
    assert erased and all(
        set(r)
        == {"position", "type", "stream_id", "stream_version", "recorded_at", "erased", "key_id"}
        for r in erased
    )
    assert {"SessionOpened", "TranscriptObserved", "CandidateExtracted"} <= {
        r["type"] for r in erased
    }
    assert any(KEPT in line for line in lines)  # bob's records are untouched
    assert_clean("\n".join(lines))
    typed = invoke("events", "--store", str(store), "--type", "TranscriptObserved", "--json")
    assert len(typed.stdout.splitlines()) == 2


def test_export_holds_no_erased_content(
    erased_store: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    store, _ = erased_store
    for fmt in ("jsonl", "parquet"):
        out = tmp_path / f"export-{fmt}"
        invoke("export", "--store", str(store), "--out", str(out), "--format", fmt)
        files = [p for p in out.rglob("*") if p.is_file()]
        assert files
        blob = b"".join(p.read_bytes() for p in files)
        assert KEPT.encode() in blob
        assert SECRET.encode() not in blob
    events = (tmp_path / "export-jsonl" / "events.jsonl").read_text().splitlines()
    assert any(json.loads(line).get("erased") for line in events)


def test_explain_as_of_recall_replay_verify_on_an_erased_store(
    erased_store: tuple[Path, dict[str, str]],
) -> None:
    store, ids = erased_store
    at = ["--store", str(store)]
    gone = invoke("explain", ids["alice"], *at, code=2)
    assert "was erased" in gone.stderr and len(gone.stderr.strip().splitlines()) == 1
    assert_clean(gone.stderr)
    kept = invoke("explain", ids["bob"][:8], *at).stdout
    assert KEPT in kept
    assert_clean(kept)
    head = json.loads(invoke("verify", *at, "--json").stdout)["head"]
    for point in ("5", str(head)):  # early, and the head (after the erasure)
        then = invoke("as-of", point, *at, "--json").stdout
        assert_clean(then)
    alice = ["--tenant", "acme", "--principal", "alice", "--scope-id", "chat"]
    assert json.loads(invoke("recall", *at, *alice, SECRET, "--json").stdout)["results"] == []
    before = json.loads(invoke("recall", *at, *alice, SECRET, "--as-of", "5", "--json").stdout)
    assert before["results"] == []
    bob = ["--tenant", "acme", "--principal", "bob", "--scope-id", "chat"]
    assert json.loads(invoke("recall", *at, *bob, KEPT, "--json").stdout)["results"]
    checked = invoke("replay", *at, "--check")
    assert "match a rebuild" in checked.stdout
    assert_clean(invoke("replay", *at).stdout)
    verified = json.loads(invoke("verify", *at, "--json").stdout)
    assert verified["ok"] and verified["opened"] and verified["erased"] > 0


def test_verify_without_the_master_key(
    erased_store: tuple[Path, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = erased_store
    monkeypatch.delenv(ENV_MASTER_KEY_FILE)
    shown = invoke("verify", "--store", str(store)).stdout
    assert "hash chain intact" in shown and "envelope only" in shown
    report = json.loads(invoke("verify", "--store", str(store), "--json").stdout)
    assert report["ok"] and not report["opened"] and report["sealed"] == report["checked"] - 1
    # A changed byte is still found without the key.
    data = store / "ledger" / "data.mdb"
    raw = bytearray(data.read_bytes())
    at = raw.find(b"NamespaceErased")
    assert at > 0
    at = raw.find(b"requested_by", at)
    raw[at + 14] ^= 0x01
    data.write_bytes(bytes(raw))
    tampered = invoke("verify", "--store", str(store), code=1)
    assert "does not match its hash" in tampered.stderr


@pytest.mark.parametrize("with_key", [True, False])
def test_a_tampered_erasure_record_is_named_with_or_without_the_key(
    erased_store: tuple[Path, dict[str, str]],
    key_file: Path,
    monkeypatch: pytest.MonkeyPatch,
    with_key: bool,
) -> None:
    store, _ = erased_store
    monkeypatch.delenv(ENV_MASTER_KEY_FILE)
    data = store / "ledger" / "data.mdb"
    raw = bytearray(data.read_bytes())
    at = raw.find(b"key_ids", raw.find(b"NamespaceErased"))
    assert at > 0
    raw[at] ^= 0x01  # a field name: the payload no longer decodes as a NamespaceErased
    data.write_bytes(bytes(raw))
    key = ["--master-key-file", str(key_file)] if with_key else []
    tampered = invoke("verify", "--store", str(store), *key, code=1)
    assert "tampered" in tampered.stderr and "does not match its hash" in tampered.stderr
    report = json.loads(invoke("verify", "--store", str(store), *key, "--json", code=1).stdout)
    assert not report["ok"] and report["first_bad_position"] == report["head"]


def files_holding(folder: Path, canary: bytes) -> list[str]:
    """Every file under ``folder`` whose bytes contain ``canary``."""
    return sorted(
        str(p.relative_to(folder))
        for p in folder.rglob("*")
        if p.is_file() and canary in p.read_bytes()
    )


def test_erase_leaves_no_copy_in_a_set_aside_projection_file(
    tmp_path: Path, key_file: Path
) -> None:
    store = tmp_path / "store"
    fill(store, key_file.read_bytes())
    slot = store / "projections" / "slot-0.duckdb"
    (slot.parent / (slot.name + ".damaged")).touch()  # found damaged: set aside at open
    with memory_ledger.open(store, master_key=key_file) as engine:
        assert engine.recall(ALICE, SECRET)  # rebuilt from the ledger
        aside = list(slot.parent.glob("slot-0.duckdb*.damaged-*"))
        assert aside, "the damaged file was set aside"
        assert any(SECRET.encode() in p.read_bytes() for p in aside), "the canary is there"
        engine.erase("acme", "alice")
    for canary in (SECRET.encode(), f"{SECRET}tag".encode(), b"alice"):
        assert files_holding(store, canary) == [], canary
    assert not list(slot.parent.glob("*.damaged*"))
    with memory_ledger.open(store, master_key=key_file) as engine:  # still works
        assert engine.recall(BOB, KEPT)


def test_a_file_set_aside_after_an_erasure_is_deleted_at_open(
    erased_store: tuple[Path, dict[str, str]], key_file: Path
) -> None:
    store, _ = erased_store
    aside = store / "projections" / "slot-7.duckdb.damaged-1234"
    aside.write_bytes(b"rows of " + SECRET.encode())  # set aside by a host busy at erasure
    with memory_ledger.open(store, master_key=key_file) as engine:
        assert engine.recall(BOB, KEPT)
    assert not aside.exists()


def test_backup_keeps_the_keys_and_restore_reads_it(
    erased_store: tuple[Path, dict[str, str]], tmp_path: Path, key_file: Path
) -> None:
    store, _ = erased_store
    backup = tmp_path / "backup"
    shown = invoke("backup", "--store", str(store), "--out", str(backup)).stdout
    assert "1 data key(s)" in shown and "1 erased" in shown
    manifest = json.loads((backup / "backup.json").read_text())
    assert manifest["master_key_id"] == read_master_key_file(key_file).key_id
    assert (manifest["data_keys"], manifest["erased_keys"]) == (1, 1)
    assert (backup / "keys" / "data-keys.msgpack").is_file()
    assert key_file.read_bytes() not in b"".join(p.read_bytes() for p in backup.rglob("*.*"))
    restored = tmp_path / "restored"
    invoke("restore", str(backup), "--store", str(restored))
    bob = ["--tenant", "acme", "--principal", "bob", "--scope-id", "chat"]
    found = json.loads(invoke("recall", "--store", str(restored), *bob, KEPT, "--json").stdout)
    assert found["results"]
    alice = ["--tenant", "acme", "--principal", "alice", "--scope-id", "chat"]
    none = json.loads(invoke("recall", "--store", str(restored), *alice, SECRET, "--json").stdout)
    assert none["results"] == []


def test_restore_without_the_master_key_verifies_the_chain(
    erased_store: tuple[Path, dict[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, _ = erased_store
    backup = tmp_path / "backup"
    invoke("backup", "--store", str(store), "--out", str(backup))
    monkeypatch.delenv(ENV_MASTER_KEY_FILE)
    done = json.loads(
        invoke("restore", str(backup), "--store", str(tmp_path / "r"), "--json").stdout
    )
    assert done["ok"] and done["verify"]["opened"] is False


def test_a_backup_taken_before_an_erasure_still_reads_it(
    tmp_path: Path, key_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the README tells hosts to deal with: an old backup holds the wrapped key."""
    store = tmp_path / "store"
    fill(store, key_file.read_bytes())
    monkeypatch.setenv(ENV_MASTER_KEY_FILE, str(key_file))
    old = tmp_path / "old-backup"
    invoke("backup", "--store", str(store), "--out", str(old))
    invoke("erase", "--tenant", "acme", "--principal", "alice", "--store", str(store), "--yes")
    restored = tmp_path / "restored"
    invoke("restore", str(old), "--store", str(restored))
    alice = ["--tenant", "acme", "--principal", "alice", "--scope-id", "chat"]
    found = json.loads(invoke("recall", "--store", str(restored), *alice, SECRET, "--json").stdout)
    assert found["results"]  # hence: delete old backups, or rotate and destroy the old key


def test_match_counts_what_the_prompt_names(tmp_path: Path, key_file: Path) -> None:
    store = tmp_path / "store"
    fill(store, key_file.read_bytes())
    with memory_ledger.open(store, master_key=key_file) as engine:
        records = engine.keyring.records()
        digests = engine.keyring.digests
    tenant = NamespaceMatch(tenant="acme")
    principal = NamespaceMatch(tenant="acme", principal="alice")
    assert sum(tenant.matches(r, digests) for r in records) == 2
    assert sum(principal.matches(r, digests) for r in records) == 1


def test_keys_new_under_a_file_is_a_typed_error(tmp_path: Path) -> None:
    """A missing folder is created (mode 0700, tests/cli/test_cli_edges.py); a path through a
    file cannot be, and says so in one line."""
    (tmp_path / "afile").write_text("not a folder")
    out = tmp_path / "afile" / "nodir" / "k"
    result = CliRunner().invoke(app, ["keys", "new", "--out", str(out)])
    assert result.exit_code == 2
    assert "KeyFileUnwritableError" in result.output and "Traceback" not in result.output
    assert (tmp_path / "afile").read_text() == "not a folder"
