"""The ledger's record format, shared by every persistence module (LMDB, PostgreSQL).

A record is one notification of the log: its position (notification id, gapless from 1 in
commit order), its hash and its body. The body is the msgpack array
``[originator_id, originator_version, topic, state]`` (``originator_id`` as 16 raw bytes for
UUIDs, a string for text ids); the hash is ``sha256(prev_hash || body)``, with 32 zero bytes
as the previous hash of record 1. The body is a pure function of the stored columns, so a
record copied between modules (``memory-ledger migrate``, backups) keeps its hash.

:class:`LedgerLog` is what the audit tools (verify, backup, export, explain, migrate) need of
an application recorder; both ``LMDBApplicationRecorder`` and
``PostgresLedgerApplicationRecorder`` provide it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from typing import Protocol, runtime_checkable
from uuid import UUID

import msgspec

from memory_ledger.ledger.errors import LedgerFormatError, LedgerRecordError, at_position

__all__ = [
    "FORMAT_VERSION",
    "GENESIS_HASH",
    "HASH_SIZE",
    "LedgerFormatError",
    "LedgerLog",
    "LedgerRecord",
    "RawRow",
    "chain_hash",
    "check_format_version",
    "decode_body",
    "decode_entry",
    "encode_body",
]

FORMAT_VERSION = 2
"""Version of the record format written by this memory-ledger (2: every record's tags are
indexed for the append condition; the LMDB module's ``FORMAT_VERSION`` is the same)."""

GENESIS_HASH = bytes(32)
"""The previous hash of notification 1 (32 zero bytes)."""

HASH_SIZE = 32

RawRow = tuple[int, bytes | str, int, str, bytes]
"""``(position, raw originator id, version, topic, state)``: a UUID id as its 16 bytes."""


class LedgerRecord(msgspec.Struct, frozen=True):
    """One decoded record of the log.

    ``record_hash`` is ``sha256(prev_hash || body)``; ``body`` is the stored msgpack bytes.
    """

    notification_id: int
    record_hash: bytes
    body: bytes
    originator_id: UUID | str
    originator_version: int
    topic: str
    state: bytes


_body_encoder = msgspec.msgpack.Encoder()
_body_decoder = msgspec.msgpack.Decoder()


def encode_body(originator_id: UUID | str, version: int, topic: str, state: bytes) -> bytes:
    """The record body of one stored event (the bytes the hash chain covers)."""
    raw_id: bytes | str = originator_id.bytes if isinstance(originator_id, UUID) else originator_id
    return _body_encoder.encode((raw_id, version, topic, state))


def decode_body(body: bytes) -> tuple[UUID | str, int, str, bytes]:
    """``(originator_id, version, topic, state)`` of a record body.

    :raises LedgerRecordError: (a ``msgspec.DecodeError``) the body is not a 4-element
        msgpack array of those types.
    """
    try:
        decoded = _body_decoder.decode(body)
    except msgspec.DecodeError as e:
        msg = f"ledger record body is not msgpack: {e}"
        raise LedgerRecordError(msg) from e
    if not (isinstance(decoded, list) and len(decoded) == 4):
        msg = "ledger record body is not a 4-element msgpack array"
        raise LedgerRecordError(msg)
    raw_id, version, topic, state = decoded
    if not (
        isinstance(raw_id, bytes | str)
        and isinstance(version, int)
        and isinstance(topic, str)
        and isinstance(state, bytes)
    ):
        msg = "ledger record body has fields of the wrong types"
        raise LedgerRecordError(msg)
    originator_id: UUID | str = UUID(bytes=raw_id) if isinstance(raw_id, bytes) else raw_id
    return originator_id, version, topic, state


def decode_raw_body(body: bytes) -> tuple[bytes | str, int, str, bytes]:
    """Like :func:`decode_body` without building a UUID (fast path; no type checks)."""
    raw_id, version, topic, state = _body_decoder.decode(body)
    return raw_id, version, topic, state


def decode_entry(position: int, entry: bytes) -> LedgerRecord:
    """Decode one log entry (``entry`` = 32-byte hash followed by the body).

    :raises LedgerRecordError: (a ``msgspec.DecodeError``) the body is not a valid record;
        its message and ``position`` name ``position``.
    """
    body = bytes(entry[HASH_SIZE:])
    try:
        originator_id, version, topic, state = decode_body(body)
    except LedgerRecordError as e:
        raise at_position(e, position) from e
    return LedgerRecord(
        notification_id=position,
        record_hash=bytes(entry[:HASH_SIZE]),
        body=body,
        originator_id=originator_id,
        originator_version=version,
        topic=topic,
        state=state,
    )


def chain_hash(previous: bytes, body: bytes) -> bytes:
    """``sha256(previous || body)``: the hash of a record whose predecessor has ``previous``."""
    return hashlib.sha256(previous + body).digest()


def check_format_version(stored: bytes | str, where: str) -> int:
    """The integer format version ``stored`` of the store ``where`` (named in errors).

    :raises LedgerFormatError: not an integer, or newer than :data:`FORMAT_VERSION`.
    """
    try:
        text = stored.decode("ascii") if isinstance(stored, bytes) else stored
        version = int(text)
    except (UnicodeDecodeError, ValueError):
        msg = f"{where} has an unreadable format version {stored!r}"
        raise LedgerFormatError(msg, reason_code="unreadable_format") from None
    if version > FORMAT_VERSION:
        msg = (
            f"{where} has format version {version}, newer than "
            f"version {FORMAT_VERSION} that this memory-ledger can read: upgrade "
            "memory-ledger to open it"
        )
        raise LedgerFormatError(msg, reason_code="newer_format")
    return version


@runtime_checkable
class LedgerLog(Protocol):
    """The hash-chained log of an application recorder, as the audit tools read it."""

    def max_notification_id(self) -> int | None:
        """The last position, or None when the log is empty."""

    def iter_log(self, start: int = 1, page: int = 1000) -> Iterator[tuple[int, bytes]]:
        """``(position, hash + body)`` of every record from ``start``, in order."""

    def select_raw(self, start: int, limit: int, stop: int | None = None) -> list[RawRow]:
        """At most ``limit`` records after ``start`` (up to ``stop``) as raw rows."""

    def stream_records(self, originator_id: UUID | str) -> list[LedgerRecord]:
        """Every record of one stream, in version order, with its position and hash."""

    def append_log(self, entries: Sequence[tuple[int, bytes]]) -> None:
        """Append records verbatim (``(position, hash + body)``), as a copy of another log.

        :raises IntegrityError: positions do not continue the log, a hash does not chain, or
            a stream version exists; nothing of the batch is written.
        """
