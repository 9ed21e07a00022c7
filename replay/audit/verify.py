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
- :func:`verify_path` is what ``memory-ledger verify`` runs: the ledger alone first (so a
  damaged record that would stop the store from opening is named like any other), then,
  when the chain is intact and the master key is at hand, :func:`verify_store`.
- :func:`check_chain` is the chain and positions only, up to a position, raising
  :class:`~memory_ledger.ledger.errors.LedgerTamperedError` naming the first bad position:
  ``export`` and ``as-of`` run it on the records they read.

Every one-byte change of a stored record (its hash, the header or payload of its body) is
reported by the first check it reaches: the hash, since a record's body and stored hash are
both covered by the chain; nothing about a damaged record is decoded before its hash matched.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import pickle
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any
from uuid import UUID

import msgspec
from eventsourcing.persistence import MapperDeserialisationError

from memory_ledger.commands.config import MemoryConfig
from memory_ledger.commands.engine.encryption import unrecorded_erasures
from memory_ledger.commands.engine.memory_engine import MemoryEngine, check_engine
from memory_ledger.commands.errors import StoreUnavailableError
from memory_ledger.ledger.errors import (
    ForeignStoreError,
    LedgerDamagedError,
    LedgerRecordError,
    LedgerTamperedError,
    MemoryLedgerError,
)
from memory_ledger.ledger.events import ErasedPayload
from memory_ledger.ledger.ids import erasure_stream_id
from memory_ledger.ledger.key_errors import EncryptionError, KeyStoreError, MasterKeyError
from memory_ledger.ledger.key_store import DataKeyRecord, FileKeyStore
from memory_ledger.ledger.lmdb_walk import walk_databases
from memory_ledger.ledger.mapper import MsgspecMapper
from memory_ledger.ledger.master_key import MasterKeySpec
from memory_ledger.ledger.records import GENESIS_HASH, HASH_SIZE, LedgerLog, decode_entry
from memory_ledger.ledger.sealing import is_sealed, sealed_key_id
from memory_ledger.replay.audit.verify_walk import PROGRESS_EVERY, open_failure_report, walk_ledger

__all__ = [
    "VerifyReport",
    "check_chain",
    "check_records",
    "verify_ledger",
    "verify_path",
    "verify_store",
]

_Check = Callable[[str, bytes, Any, int], bool]
"""``(topic, state, stream id, version) -> erased?``; raises when the payload is bad."""


class VerifyReport(msgspec.Struct, frozen=True, kw_only=True):
    """Outcome of a verification: ``ok``, records checked, and the first problem if any.

    ``sealed``: records with an encrypted payload; ``erased``: of them, those whose data
    key was destroyed (counted only when ``opened``); ``opened``: False when verified
    without the master key (sealed payloads checked for their envelope only). ``damaged``:
    the ledger FILE is damaged below the records (a B-tree page LMDB refuses or aborts on, a
    meta page it refuses), rather than a record changed; ``first_bad_position`` is then the
    first position not read (None when the file does not open).
    """

    ok: bool
    checked: int
    head: int
    first_bad_position: int | None = None
    problem: str | None = None
    sealed: int = 0
    erased: int = 0
    opened: bool = True
    damaged: bool = False


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


def verify_ledger(
    root: str | Path,
    ledger: str | None = None,
    *,
    progress: Callable[[int], None] | None = None,
) -> VerifyReport:
    """Verify the ledger of the store folder ``root`` (or the PostgreSQL ledger ``ledger``)
    WITHOUT its master key (see the module doc): chain, positions, clear payloads decoded,
    sealed payloads' envelopes. Opens nothing else (no key store, no projections).

    :param progress: called with each position once it verified.

    :raises StoreUnavailableError: no ledger at ``root``.
    :raises LedgerUnavailableError: the PostgreSQL ledger cannot be reached.
    """
    from memory_ledger.commands.engine.ledger_url import open_ledger  # the engine's imports

    try:
        opened = open_ledger(Path(root).absolute(), ledger or None, create=False)
    except LedgerDamagedError as e:
        if isinstance(e, LedgerRecordError | LedgerTamperedError):
            raise  # a record, not the file: named as ever
        # A page of the file LMDB refuses while the ledger opens (the main database, the
        # identity records): damage, reported with its reason code, never an error.
        return VerifyReport(
            ok=False,
            checked=0,
            head=0,
            problem=(
                f"the ledger file is damaged below the records ({e.reason_code}; no position "
                f"verified): {e}"
            ),
            opened=False,
            damaged=True,
        )
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
        return _verify(recorder, check, opened=False, progress=progress)
    finally:
        opened.factory.close()


def verify_path(
    root: str | Path,
    *,
    config: MemoryConfig | None = None,
    master_key: MasterKeySpec | None = None,
    isolate: bool = True,
) -> VerifyReport:
    """Verify the store folder ``root`` as ``memory-ledger verify`` does: the ledger alone
    first (:func:`verify_ledger`: chain, positions, clear payloads, sealed envelopes), which
    needs nothing of the store to open and so names any damaged record; then, when that is
    intact and the master key is at hand (``master_key``, or ``config``'s), the store opened
    read-only by the engine and :func:`verify_store` (sealed payloads authenticated).

    :param config: the settings to open the store with (its ``ledger`` and master key file).
    :param isolate: walk an LMDB ledger in a child process (the default; see below) and read
        every database of its file there; False: the chain walked in this process only (a
        page LMDB asserts on then aborts it), for callers that check many copies of a file
        whose pages they did not damage (the record-flip property test).
    :returns: the ledger-only report when the chain is broken or no master key is
        configured (``opened`` False), else :func:`verify_store`'s.
    :raises StoreUnavailableError: no store at ``root``.
    :raises LedgerUnavailableError: the PostgreSQL ledger cannot be reached.
    :raises MasterKeyError: the master key given is not the store's (or is unreadable).

    The store is opened read-only: verify never writes. An erasure the key store records and
    the ledger lacks is reported (not ok), never recorded here.

    A damaged ledger file (a B-tree page LMDB refuses or asserts on, a meta page it refuses in
    a folder that is a memory-ledger store) is a report, not ok, naming the file and the
    positions verified before the damage (``memory_ledger.replay.audit.verify_walk``).
    """
    settings = config if config is not None else MemoryConfig()
    folder = Path(root).absolute()
    try:
        # An LMDB ledger is walked in a child process: LMDB aborts the process on some
        # damaged pages (a C assertion), which must not kill the audit (verify_walk).
        report = (
            verify_ledger(folder, settings.ledger)
            if settings.ledger or not isolate
            else VerifyReport(**walk_ledger(folder))
        )
    except (ForeignStoreError, StoreUnavailableError) as e:
        damaged = None if settings.ledger else open_failure_report(folder, e)
        if damaged is None:
            raise
        return VerifyReport(**damaged)
    if not report.ok or (not report.sealed and not settings.ledger):
        # A clear LMDB ledger is fully checked by the walk; the engine is not opened in this
        # process (its open reads other databases of the file, where LMDB may abort).
        return report
    try:
        try:
            engine = MemoryEngine.open(
                Path(root), create=False, config=settings, master_key=master_key, read_only=True
            )
        except MasterKeyError as e:
            if e.reason_code != "master_key_missing":
                raise
            return report if settings.ledger else _check_erasures_without_key(folder, report)
        with engine:
            # The keys first: a wrapped key that does not open fails every payload sealed
            # with it, and the key store, not those records, is what changed.
            unwrapped = engine.keyring.unwrap_problem()
            if unwrapped is not None:
                return msgspec.structs.replace(report, ok=False, problem=unwrapped)
            verified = verify_store(engine)
            missing = unrecorded_erasures(engine) if verified.ok else []
        return _erasure_mismatch(verified, missing)
    except KeyStoreError as e:
        if e.reason_code not in _KEY_STORE_DAMAGE:
            raise
        # The ledger verified alone first; the key store beside it is what is damaged.
        where = f"positions 1..{report.head}" if report.head else "no record"
        problem = f"{e} (the ledger itself verified: {where})"
        return msgspec.structs.replace(report, ok=False, problem=problem)


_KEY_STORE_DAMAGE = frozenset({"key_store_damaged", "key_store_format"})
"""Reason codes of a key store that reads but is not a key store this version can use."""


def _erasure_mismatch(
    report: VerifyReport, missing: list[tuple[UUID, list[DataKeyRecord]]]
) -> VerifyReport:
    """``report``, or, when the key store records erasures the ledger lacks (``missing``:
    ``(command id, its data key records)``), a report not ok naming the first."""
    if not missing:
        return report
    command, records = missing[0]
    when = records[0].erased_at.isoformat() if records[0].erased_at else "an unknown time"
    return msgspec.structs.replace(
        report,
        ok=False,
        problem=(
            f"the key store says {len(records)} namespace(s) were erased at {when} "
            f"(erasure {command}), and the ledger holds no NamespaceErased record of it "
            "(a ledger copied back from before the erasure, or an erasure interrupted "
            "after its commit point); a writable open of the store records it"
        ),
    )


def _check_erasures_without_key(folder: Path, report: VerifyReport) -> VerifyReport:
    """The erasure check of an LMDB store verified without its master key: the key store's
    erasure records (readable without the key) against the ledger's erasure streams. The
    ledger was walked whole by the child, so reading it here is safe."""
    from memory_ledger.commands.engine.ledger_url import open_ledger  # the engine's imports

    commands: dict[UUID, list[DataKeyRecord]] = {}
    for record in FileKeyStore(folder / "keys", read_only=True).read().keys:
        if record.erase_command is not None:
            commands.setdefault(record.erase_command, []).append(record)
    if not commands:
        return report
    opened = open_ledger(folder, None, create=False, read_only=True)
    try:
        recorder: Any = opened.recorder
        missing = [
            (command, records)
            for command, records in commands.items()
            if not recorder.select_events(erasure_stream_id(command), limit=1)
        ]
    finally:
        opened.factory.close()
    return _erasure_mismatch(report, missing)


def check_chain(log: LedgerLog, to: int | None = None, *, where: str = "") -> int:
    """Check the hash chain and the positions of ``log``'s records 1..``to`` (default: all),
    decoding nothing; return the last position checked.

    :param where: the ledger's name for the error (a path, never a password).
    :raises LedgerTamperedError: a record does not match its hash, or a position is missing;
        the message and ``position`` name the first bad position.
    """
    expected = 1
    previous = GENESIS_HASH
    for position, value in log.iter_log():
        if to is not None and position > to:
            break
        problem = _link_problem(expected, position, previous, value)
        if problem is not None:
            bad = min(expected, position)
            raise LedgerTamperedError(
                f"the ledger was changed after it was written: {problem}; run "
                "`memory-ledger verify`",
                position=bad,
                path=where,
            )
        previous = value[:HASH_SIZE]
        expected += 1
    return expected - 1


def check_records(log: LedgerLog, positions: Iterable[int], *, where: str = "") -> None:
    """Check that the records at ``positions`` chain to the records before them, without
    walking the whole log (what ``explain`` reads: a few streams' records). A record's link
    is its stored hash against its body and the previous record's stored hash: any change
    of the record breaks it. A broken link is followed back while the link before it is
    broken too (a changed stored hash breaks its own link and the next one), so the first
    bad position is named, as :func:`check_chain` would name it.

    :raises LedgerTamperedError: a record does not match its hash, or the one before it is
        missing; the message and ``position`` name the first bad position found.
    """
    for position in sorted(set(positions)):
        if _link_holds(log, position):
            continue
        bad = position
        while bad > 1 and not _link_holds(log, bad - 1):
            bad -= 1
        raise LedgerTamperedError(
            f"the ledger was changed after it was written: record {bad} does not match its "
            "hash (changed, reordered or missing); run `memory-ledger verify`",
            position=bad,
            path=where,
        )


def _link_holds(log: LedgerLog, position: int) -> bool:
    """Whether the record at ``position`` exists and chains to the record before it."""
    entries = dict(itertools.islice(log.iter_log(max(position - 1, 1), page=2), 2))
    value = entries.get(position)
    prior = GENESIS_HASH if position == 1 else entries.get(position - 1, b"")[:HASH_SIZE]
    return (
        value is not None
        and len(prior) == HASH_SIZE
        and (_link_problem(position, position, prior, value) is None)
    )


def _link_problem(expected: int, position: int, previous: bytes, value: bytes) -> str | None:
    """What is wrong with the record at ``position`` (stored ``value``) where ``expected``
    was due after a record whose stored hash is ``previous``; None when it chains."""
    if position != expected:
        return f"position {expected} is missing (next record is at {position})"
    if hashlib.sha256(previous + value[HASH_SIZE:]).digest() != value[:HASH_SIZE]:
        return f"record {position} does not match its hash (changed or reordered)"
    return None


def _verify(
    recorder: LedgerLog,
    check: _Check,
    *,
    opened: bool,
    progress: Callable[[int], None] | None = None,
) -> VerifyReport:
    counts = {"sealed": 0, "erased": 0}

    def report(**fields: Any) -> VerifyReport:
        return VerifyReport(
            **fields, sealed=counts["sealed"], erased=counts["erased"], opened=opened
        )

    expected = 1
    previous = GENESIS_HASH
    checked = 0
    try:
        for position, value in recorder.iter_log():
            bad = _check_one(expected, position, previous, value, check, counts)
            if bad is not None:
                return report(
                    ok=False,
                    checked=checked,
                    head=position,
                    first_bad_position=bad[0],
                    problem=bad[1],
                )
            previous = value[:HASH_SIZE]
            expected += 1
            checked += 1
            if progress is not None:
                progress(position)
    except LedgerDamagedError as e:
        # The file's B-tree is damaged below the records (a page of the wrong type, a key
        # that is not a position): the walk stops where it was.
        position = getattr(e, "position", None) or expected
        return report(
            ok=False,
            checked=checked,
            head=checked,
            first_bad_position=position,
            problem=str(e),
            damaged=True,
        )
    return report(ok=True, checked=checked, head=expected - 1)


def _check_one(
    expected: int,
    position: int,
    previous: bytes,
    value: bytes,
    check: _Check,
    counts: dict[str, int],
) -> tuple[int, str] | None:
    """The first bad position and the problem of the record at ``position`` (stored
    ``value``), or None when it chains and decodes (then ``counts`` are updated)."""
    problem = _link_problem(expected, position, previous, value)
    if problem is not None:
        return min(expected, position), problem
    try:
        record = decode_entry(position, value)
        sealed = is_sealed(record.state)
        erased = check(record.topic, record.state, record.originator_id, record.originator_version)
    except (
        msgspec.DecodeError,
        MapperDeserialisationError,
        ValueError,
        TypeError,
        MemoryLedgerError,
    ) as e:
        # A record that matches its hash yet does not decode (a forger who rehashed the
        # chain, or a bug): named, never raised. The messages of these errors name no
        # content of the record (an EncryptionError's only a key id).
        return position, f"record {position} does not decode: {type(e).__name__}" + (
            f" ({e})" if isinstance(e, EncryptionError) else ""
        )
    counts["sealed"] += sealed
    counts["erased"] += erased
    return None


def _child(root: str) -> int:
    """The child of :func:`~memory_ledger.replay.audit.verify_walk.walk_ledger`: ``P n`` lines as
    it verifies, then ``R <report json>`` or ``E <pickled typed error>``."""
    out = sys.stdout

    def progress(position: int) -> None:
        if position % PROGRESS_EVERY == 0:
            out.write(f"P {position}\n")
            out.flush()

    try:
        report = verify_ledger(root, None, progress=progress)
        if report.ok:
            report = _walk_databases(Path(root), report, out)
    except MemoryLedgerError as e:
        out.write("E " + base64.b64encode(pickle.dumps(e)).decode("ascii") + "\n")
        return 0
    out.write("R " + msgspec.json.encode(report).decode("utf-8") + "\n")
    return 0


def _walk_databases(root: Path, report: VerifyReport, out: Any) -> VerifyReport:
    """After an intact chain: every page of every database of the ledger file read (the
    indexes and identity records the engine needs to open the store); ``D name`` lines name
    the database being read. The report, or one not ok naming the damaged database."""
    current = ["main"]
    out.write(f"P {report.head}\n")  # every position verified

    def visit(name: str) -> None:
        current[0] = name
        out.write(f"D {name}\n")
        out.flush()

    try:
        walk_databases(root / "ledger", visit)
    except LedgerDamagedError as e:
        return msgspec.structs.replace(
            report,
            ok=False,
            damaged=True,
            problem=(
                f"the ledger file is damaged in its {current[0]!r} database, below the records "
                f"(positions 1..{report.head} verified): {e}"
            ),
        )
    return report


if __name__ == "__main__":
    sys.exit(_child(sys.argv[1]))
