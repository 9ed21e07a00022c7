"""Tamper evidence: walk the ledger's hash chain (``memory-ledger verify``).

Each log record stores ``sha256(previous hash || body)`` followed by the body, computed in
the write transaction over the bytes as stored (``memory_ledger.ledger.lmdb``).
Verification recomputes
the chain from the genesis hash and checks that positions run 1, 2, 3, ... without gaps,
that every body decodes as a record, and that every event decodes with its class. The first
bad position is reported: a changed byte breaks that record's hash, a deleted record leaves a
gap, two swapped records break the first one's hash.
"""

from __future__ import annotations

import hashlib

import msgspec
from eventsourcing.persistence import MapperDeserialisationError

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger.lmdb import (
    GENESIS_HASH,
    HASH_SIZE,
    decode_record,
)

__all__ = ["VerifyReport", "verify_store"]


class VerifyReport(msgspec.Struct, frozen=True, kw_only=True):
    """Outcome of a verification: ``ok``, records checked, and the first problem if any."""

    ok: bool
    checked: int
    head: int
    first_bad_position: int | None = None
    problem: str | None = None


def verify_store(engine: MemoryEngine) -> VerifyReport:
    """Verify the hash chain, positions and decodability of every record of ``engine``.

    :raises InvalidArgumentTypeError: (a ``TypeError``) the engine's recorder is not the LMDB
        recorder.
    """
    recorder = engine.lmdb_recorder()
    decode = engine.event_decoder()
    expected = 1
    previous = GENESIS_HASH
    checked = 0
    for position, value in recorder.iter_log():
        if position != expected:
            problem = f"position {expected} is missing (next record is at {position})"
            return VerifyReport(
                ok=False,
                checked=checked,
                head=position,
                first_bad_position=expected,
                problem=problem,
            )
        stored_hash, body = value[:HASH_SIZE], value[HASH_SIZE:]
        if hashlib.sha256(previous + body).digest() != stored_hash:
            return VerifyReport(
                ok=False,
                checked=checked,
                head=position,
                first_bad_position=position,
                problem=f"record {position} does not match its hash (changed or reordered)",
            )
        try:
            record = decode_record(position.to_bytes(8, "big"), value)
            decode(record.topic, record.state, record.originator_id, record.originator_version)
        except (msgspec.DecodeError, MapperDeserialisationError, ValueError) as e:
            return VerifyReport(
                ok=False,
                checked=checked,
                head=position,
                first_bad_position=position,
                problem=f"record {position} does not decode: {type(e).__name__}",
            )
        previous = stored_hash
        expected += 1
        checked += 1
    return VerifyReport(ok=True, checked=checked, head=expected - 1)
