"""A msgspec (msgpack) mapper for the ``eventsourcing`` library.

Selected the library's way: ``MAPPER_TOPIC=ledger.mapper:MsgspecMapper`` in the ``env`` given
to the infrastructure factory.

Stored state: one byte of class version, then a msgpack map of the event's fields except
``originator_id`` and ``originator_version`` (those live in the stored event itself). The
class version stays outside the typed payload so an upcaster sees it (the library's
``upcast_vN_vN+1`` convention on the event class).

Decoding is typed and done in one msgspec call: the two envelope entries are spliced back
into the stored map (a few bytes of header arithmetic, no intermediate objects) and the
result decodes straight into the event class, so a malformed payload fails with
:class:`EventDecodeError` (a
:class:`~eventsourcing.persistence.MapperDeserialisationError`) instead of yielding a
half-built event. The library's optional compressor and cipher are applied as in its own
``Mapper`` (compress, then encrypt). No JSON on this path.

Encryption at rest per namespace (issue #16): with a
:class:`~memory_ledger.ledger.keyring.Keyring` that encrypts, the state of every event whose class
is ``sealed`` is sealed with its namespace's data key (:mod:`memory_ledger.ledger.sealing`);
decoding opens it, once per event. A payload whose key was erased decodes to an
:class:`~memory_ledger.ledger.events.ErasedPayload` (never an error, never ciphertext).
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any, cast
from uuid import UUID

import msgspec
from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import Mapper, MapperDeserialisationError, StoredEvent
from eventsourcing.utils import get_topic, resolve_topic

from memory_ledger.ledger.errors import LedgerRecordError, MemoryLedgerError
from memory_ledger.ledger.events import ERASED_NAMESPACE, ErasedPayload
from memory_ledger.ledger.key_errors import DataKeyMissingError
from memory_ledger.ledger.keyring import Keyring
from memory_ledger.ledger.sealing import (
    SEALED,
    SealedPayloadError,
    key_id_of,
    open_state,
    sealed_key_id,
    sealed_recorded_at,
)

__all__ = ["RECORD_DAMAGE", "EventDecodeError", "MsgspecMapper", "UnsupportedEventError"]

_encoder = msgspec.msgpack.Encoder(uuid_format="bytes")
_untyped_decoder = msgspec.msgpack.Decoder()
_KEY_ID = _encoder.encode("originator_id")
_KEY_VERSION = _encoder.encode("originator_version")
_BIN16 = b"\xc4\x10"


class UnsupportedEventError(MemoryLedgerError, TypeError):
    """The object given to the mapper is not a msgspec Struct event."""

    reason_code = "unsupported_event"


class EventDecodeError(MemoryLedgerError, MapperDeserialisationError):
    """A stored event cannot be decoded as its topic's class (damaged or foreign payload,
    or a class version newer than this code's); the message names topic, id and version,
    and the ledger position (``position``) when the reader knew it (see ``at_position``)."""

    reason_code = "undecodable_event"
    position: int | None = None


RECORD_DAMAGE: tuple[type[MemoryLedgerError], ...] = (
    EventDecodeError,
    LedgerRecordError,
    SealedPayloadError,
)
"""The errors that reading one damaged record raises (its body, its event or its sealed
payload): a reader of the log names the record's position with ``at_position``."""


_MAP_HEADERS = tuple(bytes((0x80 | n,)) for n in range(16))


def _map_header(count: int) -> bytes:
    if count < 16:
        return _MAP_HEADERS[count]
    return b"\xde" + count.to_bytes(2, "big")


def _split_map(data: bytes) -> tuple[int, int]:
    """``(entry count, header length)`` of a msgpack map; ValueError otherwise."""
    if not data:
        msg = "empty payload"
        raise ValueError(msg)
    first = data[0]
    if 0x80 <= first <= 0x8F:
        return first & 0x0F, 1
    if first == 0xDE and len(data) >= 3:
        return int.from_bytes(data[1:3], "big"), 3
    msg = "payload is not a msgpack map"
    raise ValueError(msg)


class _Codec:
    """What the mapper keeps per event class: its decoder and class version, and for
    encoding its topic, whether it is sealed, and the state prefix (class version byte and
    map header) for each field count."""

    def __init__(self, cls: type[msgspec.Struct]) -> None:
        names = [f.name for f in msgspec.structs.fields(cls)]
        if names[:2] != ["originator_id", "originator_version"]:
            msg = f"{cls.__qualname__} must declare originator_id, originator_version first"
            raise UnsupportedEventError(msg)
        self.decoder = msgspec.msgpack.Decoder(cls)
        self.class_version = int(getattr(cls, "class_version", 1))
        self.topic = get_topic(cls)
        self.sealed = bool(getattr(cls, "sealed", True))
        version = bytes((self.class_version,))
        self.state_prefixes = tuple(version + _map_header(n - 2) for n in range(2, 16))
        """``state_prefixes[count - 2]``: the state's first bytes for an encoded map of
        ``count`` entries (the envelope's two left out)."""


@cache
def _codec(cls: type[msgspec.Struct]) -> _Codec:
    return _Codec(cls)


_ENCODING: dict[type, _Codec] = {}
"""The codec of each event class the mapper encoded (checked once per class)."""


def _encoding(cls: type) -> _Codec:
    """The codec of an event class about to be encoded, checked on first use.

    :raises UnsupportedEventError: not a msgspec Struct, an :class:`ErasedPayload`, or the
        envelope fields are not declared first.
    """
    if not (isinstance(cls, type) and issubclass(cls, msgspec.Struct)):
        msg = f"{cls.__qualname__} is not a msgspec Struct event"
        raise UnsupportedEventError(msg)
    if cls is ErasedPayload:
        msg = "an ErasedPayload is what an erased payload reads as; it is never stored"
        raise UnsupportedEventError(msg)
    codec = _codec(cls)
    _ENCODING[cls] = codec
    return codec


_SMALL_INTS = tuple(_encoder.encode(n) for n in range(4096))
_VERSION_FIELDS = tuple(_KEY_VERSION + encoded for encoded in _SMALL_INTS)
"""``_VERSION_FIELDS[v]``: the encoded ``originator_version`` entry of version ``v``."""
_ID_FIELD = _KEY_ID + _BIN16
"""The encoded ``originator_id`` key and the header of its 16 bytes."""
_ID_FIELD_END = 1 + len(_ID_FIELD) + 16
"""Where the ``originator_version`` entry starts in an encoded event of fewer than 16
fields (after the one-byte map header and the ``originator_id`` entry)."""
_TOPICS: dict[str, tuple[Any, msgspec.msgpack.Decoder[Any], int]] = {}


def _topic_entry(topic: str) -> tuple[Any, msgspec.msgpack.Decoder[Any], int]:
    """``(class, typed decoder, class version)`` of a topic, resolved once per process."""
    cls = resolve_topic(topic)
    codec = _codec(cls)
    entry = (cls, codec.decoder, codec.class_version)
    _TOPICS[topic] = entry
    return entry


def may_be_sealed(topic: str) -> bool:
    """False when events of ``topic`` are never sealed (their class says ``sealed = False``,
    such as ``NamespaceErased``): a stored state of theirs that starts with the sealed marker
    byte is the library cipher's ciphertext (whose first byte is 0xFF once in 256), never a
    sealed payload. True otherwise, and for a topic that does not resolve (decoding it
    reports that)."""
    entry = _TOPICS.get(topic)
    if entry is None:
        try:
            entry = _topic_entry(topic)
        except Exception:  # noqa: BLE001 (decoding the event raises the typed error)
            return True
    return bool(getattr(entry[0], "sealed", True))


def _make_stored_event() -> Any:
    """``StoredEvent(originator_id, version, topic, state)``, made with its ``__dict__`` set
    at once: the frozen dataclass's ``__init__`` sets each field through
    ``object.__setattr__``, which costs more than the rest of encoding a small event. Used
    only where the class is a plain frozen dataclass of those four fields (checked here on a
    probe); the constructor otherwise."""
    new, set_attribute = object.__new__, object.__setattr__

    def make(originator_id: Any, version: int, topic: str, state: bytes) -> StoredEvent:
        stored = new(StoredEvent)
        set_attribute(
            stored,
            "__dict__",
            {
                "originator_id": originator_id,
                "originator_version": version,
                "topic": topic,
                "state": state,
            },
        )
        return stored

    plain = (
        not hasattr(StoredEvent, "__slots__")
        and not hasattr(StoredEvent, "__post_init__")
        and [f.name for f in dataclasses.fields(StoredEvent)]
        == ["originator_id", "originator_version", "topic", "state"]
    )
    if plain:
        args = (UUID(int=1), 2, "a:b", b"c")
        probe, expected = make(*args), StoredEvent(*args)
        if probe == expected and vars(probe) == vars(expected):
            return make
    return StoredEvent


_stored_event = _make_stored_event()


def _envelope(originator_id: UUID, version: int) -> bytes:
    return _KEY_ID + _BIN16 + originator_id.bytes + _KEY_VERSION + _encoder.encode(version)


def _raw_id(originator_id: UUID | bytes | str) -> bytes:
    """The 16 bytes of a stream id given as raw bytes, a UUID or its text."""
    if type(originator_id) is bytes:
        return originator_id
    if isinstance(originator_id, UUID):
        return originator_id.bytes
    return UUID(str(originator_id)).bytes


class MsgspecMapper(Mapper[UUID]):
    """Converts msgspec Struct events to and from ``StoredEvent`` (msgpack, typed decoding).

    :raises UnsupportedEventError: on encoding an object that is not a msgspec Struct event.
    :raises EventDecodeError: (a ``MapperDeserialisationError``) on decoding a state that is
        not a valid payload of the topic's class, or whose class version is newer than the
        class.

    ``keyring`` (set by the engine after the factory built the mapper) seals and opens
    payloads per namespace; without one, sealed payloads raise :class:`DataKeyMissingError`.
    """

    keyring: Keyring | None = None

    def to_stored_event(self, domain_event: DomainEventProtocol[UUID]) -> StoredEvent:
        cls = type(domain_event)
        codec = _ENCODING.get(cls)
        if codec is None:
            codec = _encoding(cls)
        full = _encoder.encode(domain_event)
        version = domain_event.originator_version
        # The envelope (originator_id, originator_version: the first two entries) is left
        # out of the state; with fewer than 16 fields it sits at fixed offsets.
        count = full[0] - 0x80
        if (
            2 <= count < 16
            and type(version) is int
            and 0 <= version < len(_VERSION_FIELDS)
            and full.startswith(_ID_FIELD, 1)
            and full.startswith(_VERSION_FIELDS[version], _ID_FIELD_END)
        ):
            state = (
                codec.state_prefixes[count - 2]
                + full[_ID_FIELD_END + len(_VERSION_FIELDS[version]) :]
            )
        else:
            state = self._state(domain_event, codec, full)
        if self.compressor:
            state = self.compressor.compress(state)
        if self.cipher:
            state = self.cipher.encrypt(state)
        topic = codec.topic
        keyring = self.keyring
        if codec.sealed and keyring is not None and keyring.master is not None:
            state = keyring.sealer(domain_event.namespace).seal(  # type: ignore[attr-defined]
                state,
                topic,
                domain_event.originator_id.bytes,
                version,
                domain_event.recorded_at,  # type: ignore[attr-defined]
            )
        return cast(StoredEvent, _stored_event(domain_event.originator_id, version, topic, state))

    @staticmethod
    def _state(domain_event: DomainEventProtocol[UUID], codec: _Codec, full: bytes) -> bytes:
        """The state of an event whose encoding the fast path does not cover (16 fields or
        more, a version of 4096 or more), and the check that its envelope came first."""
        cls = type(domain_event)
        count, header = _split_map(full)
        envelope = _envelope(domain_event.originator_id, domain_event.originator_version)
        if full[header : header + len(envelope)] != envelope:
            msg = f"{cls.__qualname__} did not encode its envelope first"
            raise UnsupportedEventError(msg)
        payload = _map_header(count - 2) + full[header + len(envelope) :]
        return bytes((codec.class_version,)) + payload

    def plain_state(
        self, topic: str, state: bytes, originator_id: UUID | bytes | str, version: int
    ) -> bytes | None:
        """``state`` opened if sealed (unchanged otherwise); None when its key was erased.

        :raises DataKeyMissingError: sealed with a key the key store never held, or no
            keyring is set.
        :raises MasterKeyError: the store's master key is missing or wrong.
        :raises SealedPayloadError: the sealed bytes fail authentication.
        """
        if not state or state[0] != SEALED:
            return state
        keyring = self.keyring
        if keyring is None:
            msg = f"a sealed payload of topic {topic!r} and no keyring to open it"
            raise DataKeyMissingError(msg)
        key_id = key_id_of(state)
        aead = keyring._openers.get(key_id)  # noqa: SLF001 (the hot path: a dict lookup)
        if aead is None:
            aead = keyring.opener(key_id)
            if aead is None:
                return None
        raw = originator_id if type(originator_id) is bytes else _raw_id(originator_id)
        return open_state(aead, state, topic, raw, version)

    def to_domain_event(self, stored_event: StoredEvent) -> DomainEventProtocol[UUID]:
        return self.decode(
            stored_event.topic,
            stored_event.state,
            stored_event.originator_id,
            stored_event.originator_version,
        )

    def decode(
        self, topic: str, state: bytes, originator_id: UUID | bytes | str, version: int
    ) -> DomainEventProtocol[UUID]:
        """Decode one stored event given its parts (``originator_id`` may be raw 16 bytes).

        :raises EventDecodeError: the state is not a valid event of ``topic``.
        """
        sealed = (
            bool(state)
            and state[0] == SEALED
            and (self.cipher is None or may_be_sealed(topic))  # see may_be_sealed
        )
        if sealed:
            opened = self.plain_state(topic, state, originator_id, version)
            if opened is None:
                return self._erased(topic, state, originator_id, version)
            state = opened
        try:
            entry = _TOPICS.get(topic)
            if entry is None:
                entry = _topic_entry(topic)
            cls, decoder, class_version = entry
            if self.cipher:
                state = self.cipher.decrypt(state)
            if self.compressor:
                state = self.compressor.decompress(state)
            if not state:
                msg = "empty state"
                raise ValueError(msg)
            from_version = state[0]
            payload = state[1:]
            if from_version != class_version:
                if from_version > class_version:
                    msg = (
                        f"stored class version {from_version} is newer than "
                        f"{cls.__qualname__}.class_version {class_version}"
                    )
                    raise ValueError(msg)
                payload = self._upcast(cls, payload, from_version, class_version)
            count, header = _split_map(payload)
            raw = _raw_id(originator_id)
            encoded_version = (
                _SMALL_INTS[version]
                if 0 <= version < len(_SMALL_INTS)
                else _encoder.encode(version)
            )
            event = decoder.decode(
                b"".join(
                    (
                        _map_header(count + 2),
                        _KEY_ID,
                        _BIN16,
                        raw,
                        _KEY_VERSION,
                        encoded_version,
                        payload[header:],
                    )
                )
            )
        except Exception as e:
            msg = (
                f"Failed to deserialise state of stored event with topic '{topic}', "
                f"originator_id '{originator_id!r}' and originator_version {version}: {e}"
            )
            raise EventDecodeError(msg) from e
        keyring = self.keyring
        if not sealed and keyring is not None and keyring.erased_namespace_ids:
            # Stored in clear before encryption was turned on: its namespace's erasure
            # hides it too (the bytes stay in the ledger; the README says so).
            namespace = getattr(event, "namespace", None)
            if namespace is not None and keyring.is_erased(namespace):
                return cast(
                    DomainEventProtocol[UUID],
                    ErasedPayload(
                        originator_id=event.originator_id,
                        originator_version=version,
                        recorded_at=event.recorded_at,
                        namespace=ERASED_NAMESPACE,
                        topic=topic,
                        key_id=None,
                    ),
                )
        return cast(DomainEventProtocol[UUID], event)

    @staticmethod
    def _erased(
        topic: str, state: bytes, originator_id: UUID | bytes | str, version: int
    ) -> DomainEventProtocol[UUID]:
        return cast(
            DomainEventProtocol[UUID],
            ErasedPayload(
                originator_id=UUID(bytes=_raw_id(originator_id)),
                originator_version=version,
                recorded_at=sealed_recorded_at(state),
                namespace=ERASED_NAMESPACE,
                topic=topic,
                key_id=UUID(bytes=sealed_key_id(state)),
            ),
        )

    @staticmethod
    def _upcast(cls: Any, payload: bytes, from_version: int, to_version: int) -> bytes:
        state = _untyped_decoder.decode(payload)
        if not isinstance(state, dict):
            msg = "payload is not a map"
            raise ValueError(msg)
        while from_version < to_version:
            getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(state)
            from_version += 1
        return _encoder.encode(state)
