"""Tamper evidence: `memory-ledger verify` names the first bad position."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine
from memory_ledger.ledger.lmdb import LMDBApplicationRecorder
from memory_ledger.replay import verify_store
from memory_ledger.replay.cli.app import app
from tests.conftest import REPO_ROOT

runner = CliRunner()


def build(tmp_path: Path) -> Path:
    store = tmp_path / "store"
    result = runner.invoke(
        app, ["run", str(REPO_ROOT / "examples" / "quickstart.jsonl"), "--store", str(store)]
    )
    assert result.exit_code == 0, result.output
    return store


def tamper(store: Path, change: Callable[[Any, Any, dict[int, bytes]], None]) -> None:
    with MemoryEngine.open(store) as engine:
        recorder = engine.recorder
        assert isinstance(recorder, LMDBApplicationRecorder)
        datastore = recorder.datastore
        log = datastore.db(b"log")
        values = dict(recorder.iter_log())
        datastore.write(lambda txn: change(txn, log, values))


def key(position: int) -> bytes:
    return position.to_bytes(8, "big")


def verify_json(store: Path) -> tuple[int, dict[str, Any]]:
    result = runner.invoke(app, ["verify", "--store", str(store), "--json"])
    return result.exit_code, json.loads(result.stdout)


def test_intact_store_verifies(tmp_path: Path) -> None:
    store = build(tmp_path)
    code, report = verify_json(store)
    assert code == 0 and report["ok"] and report["checked"] == report["head"] > 10


@pytest.mark.parametrize("position", [1, 7, 20])
def test_changed_byte_is_found(tmp_path: Path, position: int) -> None:
    store = build(tmp_path)

    def flip(txn: Any, log: Any, values: dict[int, bytes]) -> None:
        value = bytearray(values[position])
        value[-5] ^= 0x01
        txn.put(key(position), bytes(value), db=log)

    tamper(store, flip)
    code, report = verify_json(store)
    assert code == 1 and not report["ok"] and report["first_bad_position"] == position


def test_deleted_record_is_found(tmp_path: Path) -> None:
    store = build(tmp_path)
    tamper(store, lambda txn, log, values: txn.delete(key(9), db=log))
    code, report = verify_json(store)
    assert code == 1 and report["first_bad_position"] == 9 and "missing" in report["problem"]


def test_swapped_records_are_found(tmp_path: Path) -> None:
    store = build(tmp_path)

    def swap(txn: Any, log: Any, values: dict[int, bytes]) -> None:
        txn.put(key(12), values[13], db=log)
        txn.put(key(13), values[12], db=log)

    tamper(store, swap)
    code, report = verify_json(store)
    assert code == 1 and report["first_bad_position"] == 12


def test_rehashed_but_undecodable_record_is_found(tmp_path: Path) -> None:
    """A forger who recomputes the whole chain still cannot store a body that does not decode."""
    import hashlib

    from memory_ledger.ledger.lmdb import GENESIS_HASH, HASH_SIZE

    store = build(tmp_path)

    def forge(txn: Any, log: Any, values: dict[int, bytes]) -> None:
        previous = GENESIS_HASH
        for position in sorted(values):
            body = values[position][HASH_SIZE:]
            if position == 5:
                body = b"\x94\xc4\x10" + b"\x00" * 16 + b"\x01\xa1x\xc4\x01z"
            digest = hashlib.sha256(previous + body).digest()
            txn.put(key(position), digest + body, db=log)
            previous = digest

    tamper(store, forge)
    with MemoryEngine.open(store) as engine:
        report = verify_store(engine)
    assert not report.ok and report.first_bad_position == 5 and "decode" in (report.problem or "")


def test_a_damaged_key_store_is_a_report_after_the_ledger_verified(tmp_path: Path) -> None:
    """A damaged key store beside an encrypted store's ledger stopped ``verify`` with an error
    (exit 2) before it said anything of the ledger; now the ledger is verified alone first
    and the key store's damage is the report's problem (not ok), with or without the key."""
    import os

    from memory_ledger.commands import MemoryEngine, Namespace
    from memory_ledger.ledger.key_store import KEY_STORE_FILE
    from memory_ledger.replay import verify_path

    key = os.urandom(32)
    with MemoryEngine.open(tmp_path / "s", master_key=key) as engine:
        engine.remember(Namespace("acme", "alice", "assistant"), "Alice likes sealed tea.")
    file = tmp_path / "s" / "keys" / KEY_STORE_FILE
    raw = file.read_bytes()
    file.write_bytes(raw[: len(raw) // 2])  # cut short: never a key store that decodes
    for master in (key, None):
        report = verify_path(tmp_path / "s", master_key=master)
        assert not report.ok
        assert report.problem is not None and "key store" in report.problem
        assert "ledger itself verified" in report.problem


@pytest.mark.parametrize("which", ["store key", "data key"])
def test_a_wrapped_key_that_no_longer_opens_is_found(tmp_path: Path, which: str) -> None:
    """A changed byte inside a wrapped key of the key store passed ``verify`` (every
    payload opened with the keys already unwrapped) while every later write failed with
    ``master_key_mismatch``; now verify unwraps every wrapped key first and names the one
    that does not open, not the records sealed with it."""
    import os

    import msgspec

    from memory_ledger.commands import MemoryEngine, Namespace
    from memory_ledger.ledger.key_store import KEY_STORE_FILE, KeyStoreState
    from memory_ledger.replay import verify_path

    key = os.urandom(32)
    with MemoryEngine.open(tmp_path / "s", master_key=key) as engine:
        engine.remember(Namespace("acme", "alice", "assistant"), "Alice likes sealed tea.")
    assert verify_path(tmp_path / "s", master_key=key).ok
    file = tmp_path / "s" / "keys" / KEY_STORE_FILE
    state = msgspec.msgpack.decode(file.read_bytes(), type=KeyStoreState)

    def flipped(wrapped: bytes | None) -> bytes:
        assert wrapped
        return bytes([wrapped[0] ^ 0xFF]) + wrapped[1:]

    if which == "store key":
        state = msgspec.structs.replace(state, id_key_wrapped=flipped(state.id_key_wrapped))
    else:
        first = msgspec.structs.replace(state.keys[0], wrapped=flipped(state.keys[0].wrapped))
        state = msgspec.structs.replace(state, keys=(first, *state.keys[1:]))
    file.write_bytes(msgspec.msgpack.encode(state))
    report = verify_path(tmp_path / "s", master_key=key)
    assert not report.ok
    assert report.problem is not None and "does not open with the master key" in report.problem
    assert which in report.problem
