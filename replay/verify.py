"""Tamper evidence: walk the ledger's hash chain (``memory-ledger verify``).

Each log record stores ``sha256(previous hash || body)`` followed by the body, computed in
the write transaction over the bytes as stored (``memory_ledger.ledger.lmdb``, and
``memory_ledger.ledger.postgres``, where the body is re-encoded from the row's columns).
Verification recomputes
the chain from the genesis hash and checks that positions run 1, 2, 3, ... without gaps,
that every body decodes as a record, and that every event decodes with its class. The first
bad position is reported: a changed byte breaks that record's hash, a deleted record leaves a
gap, two swapped records break the first one's hash.

Encrypted stores (issue #16): the chain is computed over the sealed bytes, so it verifies
with or without the master key, before and after an erasure.

- :func:`verify_store` (an engine opened with the master key) also opens every sealed
  payload: it authenticates (AES-GCM) and decodes; a payload whose data key was erased
  counts as ``erased`` (that is the erasure, not damage); one whose key the key store never
  held (a store restored without its ``keys`` folder) is a problem.
- :func:`verify_ledger` needs no master key (an auditor may hold none): it reads the ledger
  alone, checks the chain and positions, decodes clear payloads, and checks only the
  envelope (header, key id) of sealed ones; their bytes are covered by the chain, but their
  authentication tag cannot be checked without the key (``opened`` is False).
  ``memory-ledger verify`` uses it when the store needs a master key and none is configured.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
from eventsourcing.persistence import MapperDeserialisationError

from memory_ledger.commands.engine.memory_engine import MemoryEngine, check_engine
from memory_ledger.ledger.events import ErasedPayload
from memory_ledger.ledger.key_errors import EncryptionError
from memory_ledger.ledger.mapper import MsgspecMapper
from memory_ledger.ledger.records import GENESIS_HASH, HASH_SIZE, LedgerLog, decode_entry
from memory_ledger.ledger.sealing import is_sealed, sealed_key_id

__all__ = ["VerifyReport", "verify_ledger", "verify_store"]

_Check = Callable[[str, bytes, Any, int], bool]
"""``(topic, state, stream id, version) -> erased?``; raises when the payload is bad."""


class VerifyReport(msgspec.Struct, frozen=True, kw_only=True):
    """Outcome of a verification: ``ok``, records checked, and the first problem if any.

    ``sealed``: records with an encrypted payload; ``erased``: of them, those whose data
    key was destroyed (counted only when ``opened``); ``opened``: False when verified
    without the master key (sealed payloads checked for their envelope only).
    """

    ok: bool
    checked: int
    head: int
    first_bad_position: int | None = None
    problem: str | None = None
    sealed: int = 0
    erased: int = 0
    opened: bool = True


def verify_store(engine: MemoryEngine) -> VerifyReport:
    """Verify the hash chain, positions and decodability of every record of ``engine``'s
    ledger (LMDB or PostgreSQL).

    :raises LedgerUnavailableError: the ledger's server cannot be reached.
    """
    with check_engine(engine).ledger_guard():
        decode = engine.event_decoder()

        def check(topic: str, state: bytes, raw_id: Any, version: int) -> bool:
            return type(decode(topic, state, raw_id, version)) is ErasedPayload

        return _verify(engine.ledger_log(), check, opened=True)


def verify_ledger(root: str | Path, ledger: str | None = None) -> VerifyReport:
    """Verify the ledger of the store folder ``root`` (or the PostgreSQL ledger ``ledger``)
    WITHOUT its master key (see the module doc): chain, positions, clear payloads decoded,
    sealed payloads' envelopes. Opens nothing else (no key store, no projections).

    :raises StoreUnavailableError: no ledger at ``root``.
    :raises LedgerUnavailableError: the PostgreSQL ledger cannot be reached.
    """
    from memory_ledger.commands.engine.ledger_url import open_ledger  # the engine's imports

    opened = open_ledger(Path(root).absolute(), ledger or None, create=False)
    try:
        mapper: object = opened.factory.mapper()

        def check(topic: str, state: bytes, raw_id: Any, version: int) -> bool:
            if is_sealed(state):
                sealed_key_id(state)  # header and envelope version
            elif isinstance(mapper, MsgspecMapper):
                mapper.decode(topic, state, raw_id, version)
            return False

        recorder = opened.recorder
        if not isinstance(recorder, LedgerLog):  # pragma: no cover (both backends keep one)
            msg = f"{type(recorder).__name__} does not provide the ledger's log"
            raise TypeError(msg)
        return _verify(recorder, check, opened=False)
    finally:
        opened.factory.close()


def _verify(recorder: LedgerLog, check: _Check, *, opened: bool) -> VerifyReport:
    counts = {"sealed": 0, "erased": 0}

    def report(**fields: Any) -> VerifyReport:
        return VerifyReport(
            **fields, sealed=counts["sealed"], erased=counts["erased"], opened=opened
        )

    expected = 1
    previous = GENESIS_HASH
    checked = 0
    for position, value in recorder.iter_log():
        if position != expected:
            problem = f"position {expected} is missing (next record is at {position})"
            return report(
                ok=False,
                checked=checked,
                head=position,
                first_bad_position=expected,
                problem=problem,
            )
        stored_hash, body = value[:HASH_SIZE], value[HASH_SIZE:]
        if hashlib.sha256(previous + body).digest() != stored_hash:
            return report(
                ok=False,
                checked=checked,
                head=position,
                first_bad_position=position,
                problem=f"record {position} does not match its hash (changed or reordered)",
            )
        try:
            record = decode_entry(position, value)
            sealed = is_sealed(record.state)
            erased = check(
                record.topic, record.state, record.originator_id, record.originator_version
            )
        except (msgspec.DecodeError, MapperDeserialisationError, ValueError, EncryptionError) as e:
            return report(
                ok=False,
                checked=checked,
                head=position,
                first_bad_position=position,
                problem=f"record {position} does not decode: {type(e).__name__}"
                + (f" ({e})" if isinstance(e, EncryptionError) else ""),
            )
        counts["sealed"] += sealed
        counts["erased"] += erased
        previous = stored_hash
        expected += 1
        checked += 1
    return report(ok=True, checked=checked, head=expected - 1)
