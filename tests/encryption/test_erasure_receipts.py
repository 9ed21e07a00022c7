"""Erasure receipts (issue 36 item 1): ``erase --signing-key --receipt`` writes a signed
receipt holding no erased name or word; ``verify-receipt`` checks it alone and against the
store (LMDB and PostgreSQL), and each tampering fails with its named reason: a byte changed
in the receipt, a store restored from before the erasure, a data key kept aside and put back.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

import memory_ledger
from memory_ledger.commands.engine import MemoryEngine, ReceiptScanError, SigningKeyError
from memory_ledger.replay.audit.receipts import (
    ReceiptVerificationError,
    load_public_key,
    verify_receipt,
)
from memory_ledger.replay.cli.app import app

runner = CliRunner()
TENANT, SUBJECT, OTHER = "zorblaxcorp", "quintessa", "bartholomew"
SCOPES = ("chatterbox", "workbench")
WORDS = ("tiramisuvex", "quokkaland", "zanzibarite")
KEPT = "marmaladeo"  # only in the other principal's namespace


def invoke(*args: str, code: int = 0) -> Any:
    result = runner.invoke(app, list(args))
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert "Traceback" not in result.output
    return result


def fill(store: Path, key: bytes, ledger: str | None = None) -> None:
    """The data subject's memories in two scopes; another principal's in one."""
    with MemoryEngine.open(store, ledger=ledger, master_key=key) as engine:
        for scope, word in zip(SCOPES, WORDS, strict=False):
            ns = memory_ledger.Namespace(TENANT, SUBJECT, scope)
            engine.remember(ns, f"The subject loves {word} and {WORDS[2]}.")
        engine.remember(memory_ledger.Namespace(TENANT, OTHER, SCOPES[0]), f"Likes {KEPT}.")


def assert_holds_nothing_erased(receipt: bytes) -> None:
    lowered = receipt.lower()
    for name in (SUBJECT, *SCOPES[1:], *WORDS):
        assert name.encode() not in lowered, name


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    """A master key file and a signing key (made by ``keys new --signing``), both outside
    the store."""
    master = tmp_path / "master.key"
    master.write_bytes(os.urandom(32))
    signing = tmp_path / "signing.key"
    out = invoke("keys", "new", "--signing", "--out", str(signing), "--json")
    assert json.loads(out.stdout)["public"] == f"{signing}.pub"
    assert (signing.stat().st_mode & 0o777) == 0o600
    return master, signing


def erase(store: Path, master: Path, signing: Path, receipt: Path, *extra: str) -> None:
    invoke(
        "erase",
        *("--tenant", TENANT, "--principal", SUBJECT, "--yes", "--requested-by", "dpo"),
        *("--store", str(store), "--master-key-file", str(master)),
        *("--signing-key", str(signing), "--receipt", str(receipt)),
        *extra,
    )


def verify(receipt: Path, signing: Path, *extra: str, code: int = 0) -> Any:
    return invoke(
        "verify-receipt", str(receipt), "--public-key", f"{signing}.pub", *extra, code=code
    )


def test_receipt_round_trip_on_lmdb(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    master, signing = keys
    store, receipt = tmp_path / "store", tmp_path / "receipt.json"
    fill(store, master.read_bytes())
    erase(store, master, signing, receipt)  # every scope of the subject: one command
    data = receipt.read_bytes()
    assert_holds_nothing_erased(data)
    document = json.loads(data)
    assert document["namespaces"] == 2 and len(document["key_ids"]) == 2
    assert document["level"] == "principal" and document["scan"]["hits"] == 0
    assert any(f.startswith("projections/") for f in document["scan"]["files"])
    assert "receipt verified: signature;" in verify(receipt, signing).stdout
    names = ("--namespace", TENANT, SUBJECT, SCOPES[0])
    out = verify(receipt, signing, "--store", str(store), *names).stdout
    assert "store (chain" in out and "names (" in out
    # Someone who does not know the names cannot make the receipt say they were erased.
    wrong = ("--namespace", TENANT, OTHER, SCOPES[0])
    failed = verify(receipt, signing, "--store", str(store), *wrong, code=1)
    assert "namespace_not_in_receipt" in failed.stderr
    # The other principal is untouched.
    with MemoryEngine.open(store, create=False, master_key=master) as engine:
        assert engine.recall(memory_ledger.Namespace(TENANT, OTHER, SCOPES[0]), KEPT)


def test_python_and_async_erase_return_the_receipt(tmp_path: Path) -> None:
    master = os.urandom(32)
    signing = Ed25519PrivateKey.generate()
    fill(tmp_path / "a", master)
    fill(tmp_path / "b", master)
    with MemoryEngine.open(tmp_path / "a", create=False, master_key=master) as engine:
        report = engine.erase(TENANT, SUBJECT, signing_key=signing)
        assert engine.erase(TENANT, SUBJECT, signing_key=signing).receipt is None  # nothing
    assert report.receipt is not None
    check = verify_receipt(report.receipt, signing.public_key(), store=tmp_path / "a")
    assert check.store and not check.names

    async def run() -> bytes | None:
        async with memory_ledger.AsyncMemoryEngine.open(
            tmp_path / "b", master_key=master
        ) as engine:
            return (await engine.erase(TENANT, SUBJECT, SCOPES[0], signing_key=signing)).receipt

    receipt = asyncio.run(run())
    assert receipt is not None
    names = (TENANT, SUBJECT, SCOPES[0])
    check = verify_receipt(receipt, signing.public_key(), store=tmp_path / "b", namespace=names)
    assert check.names and json.loads(receipt)["level"] == "namespace"


def test_a_bad_signing_key_erases_nothing(tmp_path: Path) -> None:
    master = os.urandom(32)
    fill(tmp_path / "s", master)
    bad = tmp_path / "bad.key"
    bad.write_bytes(b"not a key")
    with MemoryEngine.open(tmp_path / "s", create=False, master_key=master) as engine:
        with pytest.raises(SigningKeyError) as e:
            engine.erase(TENANT, SUBJECT, signing_key=bad)
        assert e.value.reason_code == "signing_key_invalid"
        assert engine.keyring.status().erased_keys == 0


def test_a_name_in_clear_at_erasure_time_writes_no_receipt(tmp_path: Path) -> None:
    master = os.urandom(32)
    fill(tmp_path / "s", master)
    (tmp_path / "s" / "copied.txt").write_text(f"notes about {WORDS[0]} by {SUBJECT}")
    with MemoryEngine.open(tmp_path / "s", create=False, master_key=master) as engine:
        with pytest.raises(ReceiptScanError) as e:
            engine.erase(TENANT, SUBJECT, signing_key=Ed25519PrivateKey.generate())
        assert e.value.where == ("copied.txt",) and SUBJECT not in str(e.value)
        assert engine.keyring.status().erased_keys == 2  # the erasure itself is done


def test_a_signed_erasure_while_another_process_reads_erases_nothing(tmp_path: Path) -> None:
    """A reader (the debugger, an MCP server: here another engine, read-only) holds a
    projection file that keeps the erased rows until it next reads: the receipt's scan could
    only fail after the keys were destroyed, and no later call could sign that erasure. So a
    signed erasure is refused first (``readers_open``), and goes through once it is gone."""
    master = os.urandom(32)
    signing = Ed25519PrivateKey.generate()
    fill(tmp_path / "s", master)
    with MemoryEngine.open(tmp_path / "s", create=False, master_key=master) as engine:
        reader = MemoryEngine.open(tmp_path / "s", create=False, master_key=master, read_only=True)
        try:
            assert reader.recall(memory_ledger.Namespace(TENANT, SUBJECT, SCOPES[0]), WORDS[0])
            with pytest.raises(ReceiptScanError) as e:
                engine.erase(TENANT, SUBJECT, signing_key=signing)
            assert e.value.reason_code == "readers_open"
            assert engine.keyring.status().erased_keys == 0  # nothing was erased
        finally:
            reader.close()
        report = engine.erase(TENANT, SUBJECT, signing_key=signing)
        assert report.receipt is not None and report.namespaces == 2


def test_the_cli_wants_both_receipt_options_and_a_new_file(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    master, signing = keys
    store, receipt = tmp_path / "store", tmp_path / "receipt.json"
    fill(store, master.read_bytes())
    base = ("erase", "--tenant", TENANT, "--principal", SUBJECT, "--yes", "--store", str(store))
    lone = invoke(*base, "--master-key-file", str(master), "--signing-key", str(signing), code=2)
    assert "--receipt" in lone.stderr
    receipt.write_text("kept")
    kept = invoke(*base, *("--signing-key", str(signing), "--receipt", str(receipt)), code=2)
    assert "OutputExistsError" in kept.stderr and receipt.read_text() == "kept"
    alone = invoke(
        "verify-receipt",
        str(receipt),
        "--public-key",
        f"{signing}.pub",
        "--namespace",
        TENANT,
        SUBJECT,
        SCOPES[0],
        code=2,
    )
    assert "--namespace" in alone.stderr
    with MemoryEngine.open(store, create=False, master_key=master) as engine:
        assert engine.keyring.status().erased_keys == 0  # nothing was erased


@pytest.fixture(scope="module")
def signed() -> tuple[bytes, Ed25519PrivateKey]:
    """A receipt signed by a fresh key (its content is what an erasure writes)."""
    from memory_ledger.commands.engine.receipt import canonical_json, signer_id

    key = Ed25519PrivateKey.generate()
    document: dict[str, Any] = {
        "format": "memory-ledger-erasure-receipt/1",
        "namespaces": 1,
        "key_ids": ["00000000-0000-0000-0000-000000000001"],
        "signer": signer_id(key.public_key()),
    }
    import base64

    document["signature"] = base64.b64encode(key.sign(canonical_json(document))).decode()
    return canonical_json(document), key


@given(index=st.integers(min_value=0), delta=st.integers(min_value=1, max_value=255))
def test_any_changed_byte_fails_with_a_named_reason(
    signed: tuple[bytes, Ed25519PrivateKey], index: int, delta: int
) -> None:
    receipt, key = signed
    verify_receipt(receipt, key.public_key())  # the untouched receipt verifies
    changed = bytearray(receipt)
    changed[index % len(changed)] = (changed[index % len(changed)] + delta) % 256
    with pytest.raises(ReceiptVerificationError) as e:
        verify_receipt(bytes(changed), key.public_key())
    assert e.value.reason_code in {"bad_signature", "receipt_malformed", "wrong_public_key"}


def test_changed_receipt_and_wrong_key_on_the_cli(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    master, signing = keys
    store, receipt = tmp_path / "store", tmp_path / "receipt.json"
    fill(store, master.read_bytes())
    erase(store, master, signing, receipt)
    changed = tmp_path / "changed.json"
    changed.write_bytes(receipt.read_bytes().replace(b'"namespaces":2', b'"namespaces":3'))
    assert "bad_signature" in verify(changed, signing, code=1).stderr
    other = tmp_path / "other.key"
    invoke("keys", "new", "--signing", "--out", str(other))
    assert "wrong_public_key" in verify(receipt, other, code=1).stderr
    with pytest.raises(ReceiptVerificationError) as e:
        load_public_key(signing)  # the private key file is no public key
    assert e.value.reason_code == "public_key_invalid"


def test_a_store_restored_from_before_the_erasure_fails(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    master, signing = keys
    store, receipt = tmp_path / "store", tmp_path / "receipt.json"
    fill(store, master.read_bytes())
    backup = tmp_path / "backup"
    invoke("backup", "--out", str(backup), "--store", str(store), "--master-key-file", str(master))
    erase(store, master, signing, receipt)
    restored = tmp_path / "restored"
    invoke("restore", str(backup), "--store", str(restored), "--master-key-file", str(master))
    failed = verify(receipt, signing, "--store", str(restored), code=1)
    assert "erasure_record_missing" in failed.stderr
    # Written to since, past the erasure's position: the record there is another one.
    fill(restored, master.read_bytes())
    failed = verify(receipt, signing, "--store", str(restored), code=1)
    assert "erasure_record_mismatch" in failed.stderr


def test_a_key_kept_aside_and_put_back_fails(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    master, signing = keys
    store, receipt = tmp_path / "store", tmp_path / "receipt.json"
    fill(store, master.read_bytes())
    key_file = store / "keys" / "data-keys.msgpack"
    aside = tmp_path / "aside.msgpack"
    shutil.copyfile(key_file, aside)
    erase(store, master, signing, receipt)
    verify(receipt, signing, "--store", str(store))
    shutil.copyfile(aside, key_file)
    failed = verify(receipt, signing, "--store", str(store), "--json", code=1)
    assert json.loads(failed.stdout)["reason_code"] == "data_key_remains"


def test_a_chain_broken_between_the_erasure_and_the_head_fails(
    tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    """A record changed between the erasure record and the receipt's chain head: the chain
    no longer verifies through the receipt's positions (``chain_broken``)."""
    from memory_ledger.ledger.lmdb import LMDBApplicationRecorder

    master, signing = keys
    store, receipt = tmp_path / "store", tmp_path / "receipt.json"
    fill(store, master.read_bytes())
    erase(store, master, signing, receipt)
    verify(receipt, signing, "--store", str(store))
    document = json.loads(receipt.read_bytes())
    erasure, head = document["erasure"]["position"], document["chain_head"]["position"]
    assert head >= erasure
    with MemoryEngine.open(store, create=False, master_key=master.read_bytes()) as engine:
        recorder = engine.recorder
        assert isinstance(recorder, LMDBApplicationRecorder)
        datastore = recorder.datastore
        log = datastore.db(b"log")
        values = dict(recorder.iter_log())
        at = erasure + 1 if head > erasure else head  # after the erasure record, to the head
        changed = bytearray(values[at])
        changed[-5] ^= 0x01
        datastore.write(lambda txn: txn.put(at.to_bytes(8, "big"), bytes(changed), db=log))
    failed = verify(receipt, signing, "--store", str(store), "--json", code=1)
    assert json.loads(failed.stdout)["reason_code"] == "chain_broken"


def test_a_name_left_in_clear_fails(tmp_path: Path, keys: tuple[Path, Path]) -> None:
    master, signing = keys
    store, receipt = tmp_path / "store", tmp_path / "receipt.json"
    fill(store, master.read_bytes())
    erase(store, master, signing, receipt)
    (store / "notes.txt").write_text(f"copied out: {SUBJECT}")
    names = ("--namespace", TENANT, SUBJECT, SCOPES[0])
    failed = verify(receipt, signing, "--store", str(store), *names, code=1)
    assert "plaintext_found" in failed.stderr and "notes.txt" in failed.stderr
    assert SUBJECT not in failed.stderr


def test_receipt_round_trip_on_postgresql(
    pg_url: str, tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    master, signing = keys
    store, receipt = tmp_path / "store", tmp_path / "receipt.json"
    fill(store, master.read_bytes(), ledger=pg_url)
    erase(store, master, signing, receipt, "--ledger", pg_url)
    data = receipt.read_bytes()
    assert_holds_nothing_erased(data)
    document = json.loads(data)
    assert document["ledger"] == "postgresql" and len(document["scan"]["tables"]) == 2
    names = ("--namespace", TENANT, SUBJECT, SCOPES[1])
    verify(receipt, signing, "--store", str(store), "--ledger", pg_url, *names)
    other = tmp_path / "elsewhere"
    fill(other, master.read_bytes())  # another store (LMDB): not the receipt's
    assert "store_mismatch" in verify(receipt, signing, "--store", str(other), code=1).stderr


def test_a_key_kept_aside_on_postgresql_fails(
    pg_url: str, pg_schema: str, tmp_path: Path, keys: tuple[Path, Path]
) -> None:
    import psycopg
    from psycopg import sql

    from tests.pg import BASE_URL

    master, signing = keys
    store, receipt = tmp_path / "store", tmp_path / "receipt.json"
    fill(store, master.read_bytes(), ledger=pg_url)
    table = sql.SQL("{0}.{1}").format(
        sql.Identifier(pg_schema), sql.Identifier("stored_events_keys")
    )
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        row = conn.execute(sql.SQL("SELECT state FROM {0}").format(table)).fetchone()
    assert row is not None
    erase(store, master, signing, receipt, "--ledger", pg_url)
    verify(receipt, signing, "--store", str(store), "--ledger", pg_url)
    with psycopg.connect(BASE_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("UPDATE {0} SET state = %s").format(table), (row[0],))
    failed = verify(receipt, signing, "--store", str(store), "--ledger", pg_url, code=1)
    assert "data_key_remains" in failed.stderr
