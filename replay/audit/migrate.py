"""Moving up: copy a store's LMDB ledger into a PostgreSQL ledger (``memory-ledger migrate``).

Records are copied verbatim, page by page, each page one PostgreSQL transaction: positions,
stored bytes and hashes are preserved, and the target checks that every page continues its
log (positions without gaps, hashes chaining) before writing it. The target must be empty,
or hold a prefix of this very ledger (an interrupted migration): the copy then resumes after
it. Afterwards the copy is verified (hash chain, positions, decodability) and its head and
head hash are compared with the source's.

An encrypted store's data keys go first (``<store>/keys`` into the PostgreSQL ledger's keys
table, wrapped as they are, under the same master key), so every copied sealed record can be
opened there and erased namespaces stay erased. So do the store's id format and store key
(:mod:`memory_ledger.ledger.digests`): the copy derives the ids its records hold (a store of
id format 1 stays format 1: its ids are inside its hash-chained records, which are copied
verbatim, so they cannot be re-derived under a key).

The store folder keeps working with the copy: ``MemoryEngine.open(store, ledger=URL)`` finds
its projection files at the same positions of the same records.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

from memory_ledger.commands.config import MemoryConfig, load_config, load_config_from
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.ledger.key_store import KeyStoreState
from memory_ledger.ledger.keyring import Keyring
from memory_ledger.ledger.master_key import MasterKeySpec
from memory_ledger.ledger.records import HASH_SIZE, LedgerLog
from memory_ledger.replay.audit.verify import VerifyReport, verify_store

__all__ = ["MigrateError", "MigrateReport", "copy_keys", "migrate_store"]


class MigrateError(MemoryLedgerError, ValueError):
    """The target ledger holds records that are not a prefix of the source ledger."""


class MigrateReport(msgspec.Struct, frozen=True, kw_only=True):
    """A migration: source folder, target URL (no password), records copied, where it
    resumed (0: from the start), the verification of the copy, and whether the copy's head
    and head hash equal the source's."""

    ok: bool
    source: str
    target: str
    copied: int
    resumed_after: int
    head: int
    head_hash: str | None
    verify: VerifyReport
    problem: str | None = None
    seconds: float


def _hash_at(log: LedgerLog, position: int) -> bytes | None:
    for nid, entry in log.iter_log(start=position, page=1):
        return entry[:HASH_SIZE] if nid == position else None
    return None


def copy_keys(source: Keyring, target: Keyring) -> int:
    """Copy ``source``'s key records (wrapped keys and erasure records), id format and store
    key into ``target``'s key store, keeping records it holds already; return how many key
    records were added. Durable on return.

    :raises MigrateError: the two stores' keys are wrapped by different master keys, or
        the target derives its ids under another id format or store key.
    """
    records = source.records()
    state = source.store.read()
    id_format = state.id_format or source.digests.id_format

    def merge(current: KeyStoreState) -> tuple[KeyStoreState | None, int]:
        if current.master_key_id not in (None, state.master_key_id):
            msg = (
                f"the target's keys are wrapped by master key {current.master_key_id}, "
                f"the store's by {state.master_key_id}"
            )
            raise MigrateError(msg)
        ids = (id_format, state.id_key, state.id_key_wrapped)
        held_ids = (current.id_format, current.id_key, current.id_key_wrapped)
        if held_ids != (0, None, None) and held_ids != ids:
            msg = "the target derives its ids under another id format or store key"
            raise MigrateError(msg)
        held = {r.key_id for r in current.keys}
        added = tuple(r for r in records if r.key_id not in held)
        if not added and held_ids == ids:
            return None, 0
        new = KeyStoreState(
            format=max(current.format, state.format),
            master_key_id=state.master_key_id or current.master_key_id,
            keys=(*current.keys, *added),
            clear_until=state.clear_until,
            id_format=id_format,
            id_key=state.id_key,
            id_key_wrapped=state.id_key_wrapped,
        )
        return new, len(added)

    count = target.store.update(merge)
    target.refresh(force=True)
    return count


def migrate_store(
    store: str | Path,
    to: str,
    *,
    page: int = 5000,
    on_page: Callable[[int], None] | None = None,
    master_key: MasterKeySpec | None = None,
    config: MemoryConfig | None = None,
) -> MigrateReport:
    """Copy the LMDB ledger of the store folder ``store`` into the PostgreSQL ledger ``to``.

    :param page: records per PostgreSQL transaction.
    :param on_page: progress callback ``(last position copied)``.
    :param master_key: the master key of an encrypted store (default: the configured one;
        see :meth:`MemoryEngine.open`); the copy is opened with the same key.
    :param config: settings (default: ``memory-ledger.toml`` if any); lexical only.
    :raises MasterKeyError: the store is encrypted and its master key is missing or wrong.
    :raises StoreUnavailableError: ``store`` holds no LMDB ledger.
    :raises LedgerUnavailableError: the PostgreSQL server cannot be reached.
    :raises MigrateError: the target holds records that are not a prefix of the source.
    :raises ValueError: ``to`` is not a PostgreSQL URL.
    """
    started = time.perf_counter()
    config = load_config_from(config or load_config(), embeddings="none", ledger="")
    root = Path(store)
    with MemoryEngine.open(root, create=False, config=config, master_key=master_key) as source:
        source_log = source.ledger_log()
        with source.ledger_guard():
            head = source_log.max_notification_id() or 0
        with (
            tempfile.TemporaryDirectory(prefix="ml-migrate-") as scratch,
            MemoryEngine.open(
                scratch, ledger=to, config=config, master_key=source.keyring.master
            ) as target,
        ):
            target_log = target.ledger_log()
            with target.ledger_guard():
                resumed = target_log.max_notification_id() or 0
                if resumed > head or (
                    resumed and _hash_at(target_log, resumed) != _hash_at(source_log, resumed)
                ):
                    msg = (
                        f"ledger {target.ledger_name} holds {resumed} records that are not a "
                        f"prefix of the ledger in {str(root)!r}; migrate into an empty ledger"
                    )
                    raise MigrateError(msg)
                copy_keys(source.keyring, target.keyring)  # before any record they open
                copied = 0
                batch: list[tuple[int, bytes]] = []
                for position, entry in source_log.iter_log(resumed + 1, page):
                    if position > head:
                        break
                    batch.append((position, entry))
                    if len(batch) >= page:
                        target_log.append_log(batch)
                        copied += len(batch)
                        if on_page is not None:
                            on_page(position)
                        batch = []
                if batch:
                    target_log.append_log(batch)
                    copied += len(batch)
                    if on_page is not None:
                        on_page(batch[-1][0])
            report = verify_store(target)
            source_hash = _hash_at(source_log, head) if head else None
            with target.ledger_guard():
                target_hash = _hash_at(target_log, head) if head else None
            name = target.ledger_name
    problem = report.problem
    if report.ok and (report.head != head or target_hash != source_hash):
        problem = f"the copy's head {report.head} or its hash differs from the source's {head}"
    return MigrateReport(
        ok=report.ok and problem is None,
        source=str(root.absolute()),
        target=name,
        copied=copied,
        resumed_after=resumed,
        head=head,
        head_hash=source_hash.hex() if source_hash else None,
        verify=report,
        problem=problem,
        seconds=time.perf_counter() - started,
    )
