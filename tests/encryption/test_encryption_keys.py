"""Master key handling (issue #16): a wrong, missing or malformed master key gives a typed
:class:`MasterKeyError` and leaves every file of the store byte-identical; key rotation
re-wraps the data keys (events untouched) and round-trips."""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar
from uuid import uuid4

import pytest

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.key_errors import MasterKeyError
from memory_ledger.ledger.key_store import FileKeyStore, KeyStoreState
from memory_ledger.ledger.keyring import Keyring, NamespaceMatch
from memory_ledger.ledger.master_key import ENV_MASTER_KEY_FILE, MasterKeySpec, master_key_from
from tests.encryption_helpers import snapshot

ALICE = Namespace("acme", "alice", "chat")
BOB = Namespace("acme", "bob", "chat")
T = TypeVar("T")


@pytest.fixture(autouse=True)
def no_key_in_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_MASTER_KEY_FILE, raising=False)


def make_store(path: Path, key: bytes) -> None:
    with MemoryEngine.open(path, master_key=key, sync=False) as engine:
        engine.remember(ALICE, "Alice drinks zanzibarian espresso every morning.")
        engine.remember(BOB, "Bob grows quokkafruit on his balcony.")


def statements(engine: MemoryEngine) -> list[str]:
    return [
        hit.statement
        for ns, query in ((ALICE, "espresso"), (BOB, "quokkafruit"))
        for hit in engine.recall(ns, query, 5).results
    ]


def refused(path: Path, reason: str, **kwargs: object) -> MasterKeyError:
    before = snapshot(path)
    with pytest.raises(MasterKeyError) as caught:
        MemoryEngine.open(path, **kwargs)  # type: ignore[arg-type]
    assert caught.value.reason_code == reason, caught.value
    assert snapshot(path) == before, "a refused open changed the store's files"
    return caught.value


@pytest.mark.parametrize("read_only", [False, True])
def test_missing_master_key_is_refused_and_touches_nothing(tmp_path: Path, read_only: bool) -> None:
    store = tmp_path / "store"
    make_store(store, os.urandom(32))
    kwargs = {"create": False, "read_only": True} if read_only else {}
    error = refused(store, "master_key_missing", **kwargs)
    assert "master key" in str(error)


@pytest.mark.parametrize("read_only", [False, True])
def test_wrong_master_key_is_refused_and_touches_nothing(tmp_path: Path, read_only: bool) -> None:
    store = tmp_path / "store"
    key = os.urandom(32)
    make_store(store, key)
    kwargs = {"create": False, "read_only": True} if read_only else {}
    error = refused(store, "master_key_mismatch", master_key=os.urandom(32), **kwargs)
    assert key.hex() not in str(error)  # a message never holds key bytes


def test_an_open_with_a_key_never_binds_a_store_only_a_write_does(tmp_path: Path) -> None:
    """An audit with a key (or a shell exporting MEMORY_LEDGER_MASTER_KEY_FILE for another
    store) must not lock the owner of a clear store out: only the first sealed write binds
    the store to its key."""
    store = tmp_path / "store"
    MemoryEngine.open(store).close()
    with MemoryEngine.open(store, master_key=os.urandom(32)) as audit:
        assert audit.head == 0
    assert not (store / "keys" / "data-keys.msgpack").exists()
    MemoryEngine.open(store, master_key=os.urandom(32)).close()  # another key: still clear
    MemoryEngine.open(store).close()
    key = os.urandom(32)
    with MemoryEngine.open(store, master_key=key) as owner:
        owner.remember(Namespace("acme", "alice", "chat"), "Alice likes tea.")
    refused(store, "master_key_mismatch", master_key=os.urandom(32))
    refused(store, "master_key_missing")


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (os.urandom(31), "master_key_invalid"),
        (os.urandom(33), "master_key_invalid"),
        (b"0" * 63, "master_key_invalid"),
        (None, "master_key_unreadable"),
    ],
    ids=["31-bytes", "33-bytes", "63-hex-digits", "no-file"],
)
def test_malformed_key_file_is_refused_and_touches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes | None, reason: str
) -> None:
    store = tmp_path / "store"
    make_store(store, os.urandom(32))
    key_file = tmp_path / "master.key"
    if content is not None:
        key_file.write_bytes(content)
    refused(store, reason, master_key=key_file)
    monkeypatch.setenv(ENV_MASTER_KEY_FILE, str(key_file))
    refused(store, reason)  # named by the environment variable instead
    with pytest.raises(MasterKeyError) as caught:
        MemoryEngine.open(tmp_path / "new-store")
    assert caught.value.reason_code == reason
    assert not (tmp_path / "new-store" / "keys").exists()


@pytest.mark.parametrize(
    "as_spec",
    [
        lambda key, path: key,
        lambda key, path: path,
        lambda key, path: str(path),
        lambda key, path: lambda: key,
    ],
    ids=["bytes", "path", "str", "callable"],
)
def test_every_form_of_the_right_key_opens_the_store(
    tmp_path: Path, as_spec: Callable[[bytes, Path], MasterKeySpec]
) -> None:
    store = tmp_path / "store"
    key = os.urandom(32)
    make_store(store, key)
    key_file = tmp_path / "master.key"
    key_file.write_bytes(key.hex().encode() + b"\n")
    with MemoryEngine.open(store, master_key=as_spec(key, key_file), sync=False) as engine:
        assert len(statements(engine)) == 2


def ledger_records(engine: MemoryEngine) -> list[tuple[int, bytes]]:
    return list(engine.recorder.iter_log())  # type: ignore[attr-defined]


def test_key_rotation_round_trip(tmp_path: Path) -> None:
    store = tmp_path / "store"
    key_a, key_b = os.urandom(32), os.urandom(32)
    make_store(store, key_a)
    with MemoryEngine.open(store, master_key=key_a, sync=False) as engine:
        records = ledger_records(engine)
        expected = statements(engine)
        assert len(expected) == 2
        assert engine.rotate_master_key(key_b) == 2  # two namespaces' data keys
        assert statements(engine) == expected  # the open engine keeps working
        assert ledger_records(engine) == records  # rotation never touched an event
        engine.remember(ALICE, "Alice rotates her tyres every autumn.")
        now = ledger_records(engine)
        assert now[: len(records)] == records and len(now) > len(records)
        records = now
    refused(store, "master_key_mismatch", master_key=key_a)
    with MemoryEngine.open(store, master_key=key_b, sync=False) as engine:
        assert ledger_records(engine) == records  # rotation never touched an event
        assert statements(engine) == expected
        assert engine.recall(ALICE, "tyres", 5).results
        # Back to A, this time through a key file.
        key_file = tmp_path / "a.key"
        key_file.write_bytes(key_a)
        assert engine.rotate_master_key(key_file) == 2
    refused(store, "master_key_mismatch", master_key=key_b)
    with MemoryEngine.open(store, master_key=key_a, sync=False) as engine:
        assert ledger_records(engine) == records
        assert statements(engine) == expected
        # An erasure after rotations destroys the re-wrapped key as it would the first one.
        assert engine.erase("acme", "alice").namespaces == 1
        assert engine.recall(ALICE, "espresso", 5).results == ()
        assert engine.recall(BOB, "quokkafruit", 5).results


def test_rotation_to_an_invalid_key_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    key = os.urandom(32)
    make_store(store, key)
    before = snapshot(store / "keys")
    with MemoryEngine.open(store, master_key=key, sync=False) as engine:
        with pytest.raises(MasterKeyError) as caught:
            engine.rotate_master_key(os.urandom(16))
        assert caught.value.reason_code == "master_key_invalid"
        assert snapshot(store / "keys") == before
        assert len(statements(engine)) == 2


@pytest.mark.parametrize("form", ["hex", "base64"])
def test_a_key_passed_as_text_where_a_path_goes_is_refused_unshown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    """A key read from an environment variable or a secret manager and passed as a ``str``
    (which names a key file) is refused without echoing it, from the API and from the
    environment variable the CLI reads (found by a newcomer: the key was in the message)."""
    key = os.urandom(32)
    text = key.hex() if form == "hex" else base64.b64encode(key).decode()
    with pytest.raises(MasterKeyError) as raised:
        MemoryEngine.open(tmp_path / "store", master_key=text)
    assert raised.value.reason_code == "master_key_unreadable"
    assert text not in str(raised.value) and text[:16] not in repr(raised.value)
    assert "bytes.fromhex" in str(raised.value)
    monkeypatch.setenv(ENV_MASTER_KEY_FILE, text)
    with pytest.raises(MasterKeyError) as from_env:
        MemoryEngine.open(tmp_path / "store2")
    assert text[:16] not in str(from_env.value)


class ReplyLostKeyStore(FileKeyStore):
    """A key store whose next write commits and then runs its change again on the state it
    left, as a PostgreSQL key store retrying a commit whose reply was lost does."""

    lose_next = False

    def update(self, change: Callable[[KeyStoreState], tuple[KeyStoreState | None, T]]) -> T:
        result = super().update(change)
        if self.lose_next:
            self.lose_next = False
            return super().update(change)
        return result


def test_erase_and_rotate_run_again_after_a_lost_reply_report_their_work(tmp_path: Path) -> None:
    """A key store write retried after its commit's reply was lost runs the change again: an
    erasure recognises the keys it destroyed (and names them, so its ``NamespaceErased`` is
    recorded), a rotation the master key it installed."""
    store = ReplyLostKeyStore(tmp_path / "keys")
    master = master_key_from(os.urandom(32))
    keyring = Keyring(store, master)
    keyring.sealer(ALICE)
    keyring.sealer(BOB)
    store.lose_next = True
    command = uuid4()
    erased = keyring.erase(
        NamespaceMatch(tenant="acme", principal="alice"), command_id=command, requested_by="dpo"
    )
    assert [r.namespace_id for r in erased] == [keyring.namespace_id(ALICE)]
    assert all(r.erase_command == command and r.erased for r in erased)
    new = master_key_from(os.urandom(32))
    assert new is not None
    store.lose_next = True
    assert keyring.rotate(new) == 1
