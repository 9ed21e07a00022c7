"""The sealed payload format: an event's stored state encrypted with its namespace's data key.

A sealed state is ``header || nonce || AES-256-GCM(state)`` where ``header`` is 26 bytes:

- ``0xFF`` (a class version byte is never 0xFF, so sealed and clear states tell apart),
- the envelope version (1),
- the data key id (16 bytes),
- ``recorded_at`` in microseconds since the Unix epoch (signed 64 bits, big-endian): the
  event's time stays readable after its key is erased;

the nonce is 12 bytes, unique per data key (:class:`Sealer`: a random field and a
counter), the ciphertext carries GCM's 16-byte tag. The associated data
(authenticated, not encrypted) is the header, the topic, the stream id and the version: a
sealed state moved to another event, or a header edited, fails authentication.

Encryption happens in the mapper, before the recorder computes the record's hash, so the
hash chain covers the sealed bytes and verifies with or without the key (docs/design.md:
"computed over the bytes as stored").
"""

from __future__ import annotations

import itertools
import os
import struct
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from uuid import UUID

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from memory_ledger.ledger.key_errors import EncryptionError
from memory_ledger.ledger.sealed_header import sealed_key_ids

__all__ = [
    "HEADER_SIZE",
    "SEALED",
    "SealedPayloadError",
    "Sealer",
    "is_sealed",
    "open_state",
    "sealed_key_id",
    "sealed_key_ids",
    "sealed_recorded_at",
]

SEALED = 0xFF
"""First byte of a sealed state."""

_HEADER = struct.Struct(">BB16sq")
HEADER_SIZE = _HEADER.size
_NONCE = 12
_VERSION = struct.Struct(">q")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SealedPayloadError(EncryptionError, ValueError):
    """A sealed state failed authentication or is truncated (damaged bytes, or sealed for
    another event); names nothing of its content."""

    reason_code = "sealed_payload_damaged"


def is_sealed(state: bytes) -> bool:
    """Whether ``state`` is a sealed state."""
    return bool(state) and state[0] == SEALED


_TOPICS: dict[str, bytes] = {}
_MIN_SIZE = HEADER_SIZE + _NONCE + 16
_CIPHERTEXT = HEADER_SIZE + _NONCE


def _topic(topic: str) -> bytes:
    """``topic`` as the associated data spells it (UTF-8 and a NUL), cached per topic."""
    found = _TOPICS.get(topic)
    if found is None:
        found = _TOPICS[topic] = topic.encode("utf-8") + b"\x00"
    return found


def _micros(when: datetime) -> int:
    """Microseconds since the Unix epoch (exact, no float)."""
    delta = when - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


_COUNTER_LIMIT = 1 << 32
_forks = [0]
"""How many times this process was forked into (a child's count differs from its
parent's): sealers draw a new random field in a child (as the ``random`` module reseeds)."""


def _after_fork_in_child() -> None:
    _forks[0] += 1


os.register_at_fork(after_in_child=_after_fork_in_child)


class Sealer:
    """Seals the states of one namespace's events with one data key (the format of the
    module doc).

    Nonces are 8 random bytes drawn per process and per key, then a 32-bit counter: unique
    for this key in this process without a system call per event (NIST SP 800-38D, 8.2.1:
    a fixed field and an invocation counter). A new random field is drawn after 2**32
    nonces and in a forked child (an ``os.register_at_fork`` hook counts forks, as the
    ``random`` module's does to reseed), so two processes share a field only by a 64-bit
    random collision. The clear header of a
    command's events (same key, same ``recorded_at``) is packed once.

    :param key_id: the data key's id (16 bytes).
    :param aead: the data key's cipher.
    """

    __slots__ = ("_encrypt", "_header", "_nonces", "key_id")

    def __init__(self, key_id: bytes, aead: AESGCM) -> None:
        self.key_id = key_id
        self._encrypt = aead.encrypt
        self._header: tuple[datetime | None, bytes] = (None, b"")
        self._nonces = self._new_field()

    @staticmethod
    def _new_field() -> tuple[bytes, Iterator[int], int]:
        """``(random field, its counter, fork count)``: replaced as one (thread-safe)."""
        return os.urandom(8), itertools.count(), _forks[0]

    def seal(self, state: bytes, topic: str, raw_id: bytes, version: int, when: datetime) -> bytes:
        """``state`` sealed for the event ``(topic, raw_id, version)`` recorded at ``when``
        (timezone-aware)."""
        cached = self._header
        if cached[0] is not when:
            cached = (when, _HEADER.pack(SEALED, 1, self.key_id, _micros(when)))
            self._header = cached
        header = cached[1]
        field, counter, fork = self._nonces
        count = next(counter)
        if count >= _COUNTER_LIMIT or fork != _forks[0]:
            field, counter, fork = self._nonces = self._new_field()
            count = next(counter)
        nonce = field + _COUNT.pack(count)
        aad = b"".join((header, _topic(topic), raw_id, _VERSION.pack(version)))
        return b"".join((header, nonce, self._encrypt(nonce, state, aad)))


_COUNT = struct.Struct(">I")


def _header(state: bytes) -> tuple[int, int, bytes, int]:
    if len(state) < HEADER_SIZE + _NONCE + 16:
        msg = f"a sealed payload of {len(state)} bytes is truncated"
        raise SealedPayloadError(msg)
    mark, version, key_id, micros = _HEADER.unpack_from(state)
    if version != 1:
        msg = f"sealed payload envelope version {version} is newer than this memory-ledger's 1"
        raise SealedPayloadError(msg, reason_code="sealed_payload_format")
    return mark, version, key_id, micros


def sealed_key_id(state: bytes) -> bytes:
    """The data key id (16 bytes) of a sealed state.

    :raises SealedPayloadError: truncated, or an unknown envelope version.
    """
    return _header(state)[2]


def sealed_recorded_at(state: bytes) -> datetime:
    """The ``recorded_at`` in the clear header of a sealed state (UTC)."""
    return _EPOCH + timedelta(microseconds=_header(state)[3])


def key_id_of(state: bytes) -> bytes:
    """The data key id (16 bytes) of a sealed state, checked only for length and envelope
    version (the hot path of :func:`open_state`; see :func:`sealed_key_id`).

    :raises SealedPayloadError: truncated, or an unknown envelope version.
    """
    if len(state) < _MIN_SIZE or state[1] != 1:
        _header(state)  # raises the precise error
    return state[2:18]


def open_state(aead: AESGCM, state: bytes, topic: str, raw_id: bytes, version: int) -> bytes:
    """The clear state inside a sealed ``state`` (checked by :func:`key_id_of` first).

    :raises SealedPayloadError: authentication failed (damaged, or not this event's payload).
    """
    aad = b"".join((state[:HEADER_SIZE], _topic(topic), raw_id, _VERSION.pack(version)))
    try:
        return aead.decrypt(state[HEADER_SIZE:_CIPHERTEXT], state[_CIPHERTEXT:], aad)
    except InvalidTag:
        key = UUID(bytes=sealed_key_id(state))
        msg = f"a payload sealed with data key {key} failed authentication (damaged bytes?)"
        raise SealedPayloadError(msg) from None
