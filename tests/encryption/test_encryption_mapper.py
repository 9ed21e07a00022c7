"""The msgspec mapper with a sealing keyring (issue #16), at the level the recorder sees.

The `eventsourcing` library's recorder test cases (``tests/ledger/test_lmdb_conformance.py``) insert
``StoredEvent`` objects of their own straight into the recorders: the mapper, where sealing
happens, is not on their path, so they pass unchanged with encryption on. What sealing must
keep is proved here instead: every stored event class round-trips through a sealing mapper
(with the library's compressor too, and with the library's own ``AESCipher`` stacked under
it), sealed states go through the conformance-tested LMDB recorder and come back equal,
sealed bytes hold no payload text, a sealed state moved to another event fails
authentication, an erased key's payloads read as :class:`ErasedPayload`, and a key the key
store never held is a typed error.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from uuid import uuid4

import msgspec
import pytest
from eventsourcing.cipher import AESCipher
from eventsourcing.compressor import ZlibCompressor
from eventsourcing.persistence import JSONTranscoder, StoredEvent
from eventsourcing.utils import Environment, get_topic
from hypothesis import HealthCheck, given, settings

from memory_ledger.ledger.events import (
    CandidateExtracted,
    ErasedPayload,
    LedgerEvent,
    NamespaceErased,
)
from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.key_errors import DataKeyMissingError
from memory_ledger.ledger.key_store import FileKeyStore
from memory_ledger.ledger.keyring import Keyring, NamespaceMatch
from memory_ledger.ledger.lmdb import LMDBApplicationRecorder, LMDBDatastore
from memory_ledger.ledger.mapper import MsgspecMapper
from memory_ledger.ledger.master_key import LocalMasterKey
from memory_ledger.ledger.sealing import SEALED, SealedPayloadError
from tests.event_factory import EPOCH, item
from tests.ledger.test_events_mapper import any_event

NS = Namespace("acme", "alice", "chat")


def sealing_mapper(folder: Path, **kwargs: Any) -> MsgspecMapper:
    mapper = MsgspecMapper(transcoder=JSONTranscoder(), **kwargs)
    mapper.keyring = Keyring(FileKeyStore(folder / "keys"), LocalMasterKey(os.urandom(32)))
    return mapper


def in_namespace(event: LedgerEvent) -> LedgerEvent:
    """``event`` moved to :data:`NS` (one data key for every example)."""
    return msgspec.structs.replace(event, namespace=NS)


@pytest.fixture(scope="module")
def mappers(tmp_path_factory: pytest.TempPathFactory) -> dict[str, MsgspecMapper]:
    folder = tmp_path_factory.mktemp("mappers")
    env = Environment("Sealed", {AESCipher.CIPHER_KEY: AESCipher.create_key(32)})
    return {
        "plain": sealing_mapper(folder / "plain"),
        "compressed": sealing_mapper(folder / "compressed", compressor=ZlibCompressor()),
        "library_cipher": sealing_mapper(folder / "cipher", cipher=AESCipher(env)),
    }


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(any_event)
def test_every_stored_class_round_trips_sealed(
    mappers: dict[str, MsgspecMapper], event: LedgerEvent
) -> None:
    event = in_namespace(event)
    for mapper in mappers.values():
        stored = mapper.to_stored_event(event)
        assert stored.topic == get_topic(type(event))
        if type(event).sealed:
            assert stored.state[0] == SEALED
        elif mapper.cipher is None:  # the library cipher's first byte is random
            assert stored.state[0] != SEALED
        assert mapper.to_domain_event(stored) == event


def test_a_clear_event_whose_library_ciphertext_starts_like_a_sealed_one_decodes(
    mappers: dict[str, MsgspecMapper],
) -> None:
    """Sealing is the outermost layer, so a state of a class that is never sealed, encrypted
    by the library's cipher, starts with the sealed marker byte once in 256 encryptions: it
    must still decode as the clear event it is (not as a sealed payload with a bogus key)."""
    mapper = mappers["library_cipher"]
    event = NamespaceErased(
        originator_id=uuid4(),
        originator_version=1,
        recorded_at=EPOCH,
        namespace=NS,
        command_id=uuid4(),
        level="tenant",
        namespace_ids=(uuid4(),),
        key_ids=(uuid4(),),
        requested_by="test",
    )
    for _ in range(20_000):  # a fresh nonce each time: about 256 tries expected
        stored = mapper.to_stored_event(event)
        if stored.state[0] == SEALED:
            break
    assert stored.state[0] == SEALED
    assert mapper.to_domain_event(stored) == event


def candidate(statement: str, version: int = 1, stream: Any = None) -> LedgerEvent:
    return CandidateExtracted(
        originator_id=stream or uuid4(),
        originator_version=version,
        recorded_at=EPOCH,
        namespace=NS,
        session_id="s1",
        turn_id=1,
        candidate_id=uuid4(),
        index=0,
        extractor_id="recorded",
        item=item(statement, subject="Zanzibarian"),
        occurred_at=EPOCH,
    )


def test_sealed_states_go_through_the_lmdb_recorder_unchanged(tmp_path: Path) -> None:
    mapper = sealing_mapper(tmp_path)
    datastore = LMDBDatastore(str(tmp_path / "ledger"))
    try:
        recorder = LMDBApplicationRecorder(datastore)
        stream = uuid4()
        events = [candidate(f"Alice likes quokkafruit number {n}.", n, stream) for n in (1, 2, 3)]
        stored = [mapper.to_stored_event(e) for e in events]
        recorder.insert_events(stored)
        selected = recorder.select_events(stream)
        assert [s.state for s in selected] == [s.state for s in stored]
        assert [mapper.to_domain_event(s) for s in selected] == events
        notifications = recorder.select_notifications(start=1, limit=10)
        assert [mapper.to_domain_event(n) for n in notifications] == events
        raw = (tmp_path / "ledger" / "data.mdb").read_bytes()
        assert b"quokkafruit" not in raw and b"Zanzibarian" not in raw
    finally:
        datastore.close()


def test_sealed_bytes_hold_no_payload_text_and_bind_the_event(tmp_path: Path) -> None:
    mapper = sealing_mapper(tmp_path)
    event = candidate("Alice only drinks zanzibarian espresso.")
    stored = mapper.to_stored_event(event)
    assert b"zanzibarian" not in stored.state and b"Zanzibarian" not in stored.state
    assert b"alice" not in stored.state  # the namespace is sealed too
    moves = [
        StoredEvent(uuid4(), stored.originator_version, stored.topic, stored.state),
        StoredEvent(stored.originator_id, 2, stored.topic, stored.state),
        StoredEvent(
            stored.originator_id,
            stored.originator_version,
            get_topic(NamespaceErased),
            stored.state,
        ),
    ]
    for moved in moves:
        with pytest.raises(SealedPayloadError):
            mapper.to_domain_event(moved)
    flipped = bytearray(stored.state)
    flipped[-1] ^= 1
    with pytest.raises(SealedPayloadError):
        mapper.to_domain_event(StoredEvent(stored.originator_id, 1, stored.topic, bytes(flipped)))


def test_an_erased_key_reads_as_erased_and_a_foreign_key_is_a_typed_error(
    tmp_path: Path,
) -> None:
    mapper = sealing_mapper(tmp_path / "one")
    event = candidate("Alice only drinks zanzibarian espresso.")
    stored = mapper.to_stored_event(event)
    with pytest.raises(DataKeyMissingError):
        sealing_mapper(tmp_path / "other").to_domain_event(stored)
    assert mapper.keyring is not None
    erased = mapper.keyring.erase(
        NamespaceMatch(tenant="acme"), command_id=uuid4(), requested_by="t"
    )
    assert len(erased) == 1
    read = mapper.to_domain_event(stored)
    assert isinstance(read, ErasedPayload)
    assert (read.originator_id, read.originator_version) == (event.originator_id, 1)
    assert read.topic == stored.topic and read.recorded_at == event.recorded_at
    assert read.key_id == erased[0].key_id
