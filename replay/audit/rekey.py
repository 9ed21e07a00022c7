"""The id format step: rewrite a store of id format 1 with keyed ids (``memory-ledger
migrate --store DIR``; issue 36; docs/erasure.md "Migrating a store to keyed ids").

A format-1 store's ids (stream ids, ``namespace:``/``key:`` tags, memory and command ids,
the key store's namespace, tenant and principal ids) are public uuid5 digests of names and
statements; they sit inside hash-chained records, which never change. So the step writes a
**new ledger**: every record in order, at the same position, with every name-derived id
replaced by its keyed id (:mod:`.rekey_ids`), sealed payloads sealed again under the same
data key (the seal binds the stream id), the hash chain computed anew; and a new key store
(id format 2, a new store key, the same data keys and erasure records under the new ids).
The new ledger is verified (chain, positions, every record decodes), then swapped in:

1. the new ``ledger/`` and ``keys/`` are built in ``DIR/.id-migration/new`` (the old store
   is untouched and usable; a crash here is undone by the next run, which starts over);
2. a journal file ``DIR/.id-migration/swapping`` is written; from then on an engine refuses
   to open the store (``StoreUnavailableError``, ``id_migration_unfinished``) until a rerun
   finishes the swap: the old ``ledger/`` and ``keys/`` move to ``DIR/.id-migration/old``,
   the new ones into place (each a ``rename``; a rerun redoes only the ones not done);
3. the derived read models (``projections/``) are deleted and rebuilt from the new ledger;
4. the old ledger and key store are **deleted**, and the journal: the old files hold the
   very digests the step exists to remove, and an erasure made after the step would not
   reach their copy of the data keys. Take a ``memory-ledger backup`` first to keep a
   format-1 copy (a receipt issued before the step verifies against that copy only: the
   step changes every record's hash).

The old->new id map is kept in memory only (written down, it would confirm guesses of the
old digests). A store of id format 2 needs nothing (the report says so). The store must be
closed by every other process: the step refuses (``store_in_use``) and leaves the old store
as it was while another process holds it open (every engine holds a projection slot's lock
for its life; checked after the copy and again once the journal makes new opens refuse) or
when one wrote during the copy. A swap whose new ledger does not open puts the old ledger
and key store back (``swap_failed``).

A PostgreSQL ledger is migrated by :mod:`.rekey_postgres` (the same record mapping,
:func:`copy_rekeyed`, into new tables of its database, swapped in by one transaction).
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from memory_ledger.commands.config import MemoryConfig, load_config, load_config_from
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.commands.engine.opening import ID_MIGRATION_DIR, ID_MIGRATION_JOURNAL
from memory_ledger.ledger.digests import ID_FORMAT_KEYED
from memory_ledger.ledger.errors import MemoryLedgerError
from memory_ledger.ledger.events import ErasedPayload, LedgerEvent
from memory_ledger.ledger.faults import fault
from memory_ledger.ledger.key_store import FileKeyStore, KeyStore, KeyStoreState
from memory_ledger.ledger.master_key import KEY_SIZE, KeyWrapper, MasterKeySpec
from memory_ledger.ledger.records import GENESIS_HASH, chain_hash, decode_entry, encode_body
from memory_ledger.ledger.sealing import SEALED
from memory_ledger.projections.store import remove_idle_slots
from memory_ledger.replay.audit.rekey_ids import IdRewriter
from memory_ledger.replay.audit.verify import VerifyReport, verify_store

__all__ = ["IdMigrationError", "IdMigrationReport", "migrate_ids"]

_PAGE = 1000
_PARTS = ("ledger", "keys")


class IdMigrationError(MemoryLedgerError, RuntimeError):
    """The id format step refused; nothing of the store changed. ``reason_code``:
    ``store_in_use`` (another process holds the store open, or wrote during the copy),
    ``postgres_ledger`` (the store's ledger is in PostgreSQL: :mod:`.rekey_postgres`
    migrates it), ``copy_unverified`` (the new ledger failed verification), ``swap_failed``
    (the swapped-in ledger did not open: the old one was put back), ``work_folder_blocked``
    (``.id-migration`` is a file), ``postgres_error`` (the PostgreSQL server refused the
    step's scratch schema or swap)."""

    reason_code = "id_migration_refused"


class IdMigrationReport(msgspec.Struct, frozen=True, kw_only=True):
    """An id format step: the store folder, the id format before and after, the records
    rewritten (``head``: the last position, the same in both ledgers), how many stream and
    payload ids were mapped under the throwaway key (ids of erased namespaces, ids derived
    from other ids), the verification of the new ledger, and whether anything was done
    (``migrated`` False: the store already had ids of format 2; ``resumed``: a swap an
    earlier run left unfinished was completed)."""

    ok: bool
    store: str
    migrated: bool
    resumed: bool = False
    id_format_before: int
    id_format_after: int
    head: int = 0
    throwaway_ids: int = 0
    verify: VerifyReport | None = None
    seconds: float


def migrate_ids(
    store: str | os.PathLike[str],
    *,
    master_key: MasterKeySpec | None = None,
    config: MemoryConfig | None = None,
) -> IdMigrationReport:
    """Give the LMDB store folder ``store`` keyed ids (id format 2; see the module doc).
    Idempotent: a format-2 store is left as it is; a run interrupted at any point leaves
    the old store usable (or, during the swap, one the next run completes).

    :param master_key: the master key of an encrypted store (default: the configured one).
    :param config: settings (default: ``memory-ledger.toml`` if any); lexical only.
    :raises MasterKeyError: the store is encrypted and its master key is missing
        (``master_key_missing``) or another one (``master_key_mismatch``); nothing changed.
    :raises StoreUnavailableError: ``store`` holds no store.
    :raises IdMigrationError: see its reason codes; nothing changed.
    :raises KeyStoreError: the key store cannot be read or written.
    """
    started = time.perf_counter()
    config = load_config_from(config or load_config(), embeddings="none")
    if config.ledger:
        msg = (
            "this step rewrites an LMDB ledger and the configuration names PostgreSQL: use "
            "memory_ledger.replay.audit.rekey_postgres.migrate_postgres_ids "
            "(memory-ledger migrate --store DIR --ledger URL)"
        )
        raise IdMigrationError(msg, reason_code="postgres_ledger")
    config = load_config_from(config, ledger="")
    root = Path(store).absolute()
    work = root / ID_MIGRATION_DIR
    if work.exists() and not work.is_dir():
        msg = f"{str(work)!r} is not a folder: remove it (the id format step works there)"
        raise IdMigrationError(msg, reason_code="work_folder_blocked")
    if (work / ID_MIGRATION_JOURNAL).exists() and not _swap_begun(work):
        shutil.rmtree(work)  # a journal with nothing to swap: no swap ever began
    if (work / ID_MIGRATION_JOURNAL).exists():  # a swap an earlier run began
        _refuse_if_open(root)
        _swap(root)
        _finish(root, config, master_key)
        with MemoryEngine.open(root, create=False, config=config, master_key=master_key) as e:
            after = e.keyring.digests.id_format
        return IdMigrationReport(
            ok=True,
            store=str(root),
            migrated=True,
            resumed=True,
            id_format_before=1,
            id_format_after=after,
            seconds=time.perf_counter() - started,
        )
    if work.exists():
        shutil.rmtree(work)  # a copy an earlier run did not finish
    with MemoryEngine.open(root, create=False, config=config, master_key=master_key) as source:
        before = source.keyring.digests.id_format
        if before >= ID_FORMAT_KEYED:
            return IdMigrationReport(
                ok=True,
                store=str(root),
                migrated=False,
                id_format_before=before,
                id_format_after=before,
                seconds=time.perf_counter() - started,
            )
        head, throwaway = _copy(source, work / "new", config)
        with source.ledger_guard():
            written = (source.ledger_log().max_notification_id() or 0) != head
        if written or source.remove_idle_projections():
            shutil.rmtree(work)
            msg = (
                f"{str(root)!r} is open in another process (or was written during the id "
                "migration): close it everywhere and rerun"
            )
            raise IdMigrationError(msg, reason_code="store_in_use")
    report = _verify_new(work / "new", config, master_key)
    if not report.ok or report.head != head:
        shutil.rmtree(work)
        msg = f"the rewritten ledger does not verify ({report.problem}); the store is unchanged"
        raise IdMigrationError(msg, reason_code="copy_unverified")
    _journal(work)  # from here on the store refuses to open
    try:
        _refuse_if_open(root)  # one that opened between the check above and the journal
    except IdMigrationError:
        shutil.rmtree(work)
        raise
    fault("rekey.swap")
    _swap(root)
    _finish(root, config, master_key)
    return IdMigrationReport(
        ok=True,
        store=str(root),
        migrated=True,
        id_format_before=before,
        id_format_after=ID_FORMAT_KEYED,
        head=head,
        throwaway_ids=throwaway,
        verify=report,
        seconds=time.perf_counter() - started,
    )


def _copy(source: MemoryEngine, new: Path, config: MemoryConfig) -> tuple[int, int]:
    """Write the rewritten ledger and key store into the folder ``new``; ``(head,
    throwaway ids)``."""

    def open_target(master: KeyWrapper | None) -> MemoryEngine:
        return MemoryEngine.open(new, config=config, master_key=master, sync=True)

    return copy_rekeyed(source, FileKeyStore(new / "keys"), open_target)


def copy_rekeyed(
    source: MemoryEngine,
    keys: KeyStore,
    open_target: Callable[[KeyWrapper | None], MemoryEngine],
) -> tuple[int, int]:
    """Write ``source``'s ledger, every name-derived id replaced by its keyed id, into an
    empty ledger whose key store is ``keys`` (written before the ledger is opened) and
    which ``open_target(master key)`` opens; ``(head, throwaway ids)``. Shared by the
    LMDB step and the PostgreSQL one (:mod:`.rekey_postgres`).

    :raises LedgerError: a ledger cannot be read or written.
    :raises KeyStoreError: a key store cannot be read or written.
    """
    log, decode = source.ledger_log(), source.event_decoder()
    with source.ledger_guard():
        head = source.ledger_log().max_notification_id() or 0
    rewriter = IdRewriter()
    clear = _plain(source.mapper)
    for position, entry in log.iter_log(1, _PAGE):  # pass 1: the names behind the ids
        if position > head:
            break
        record = decode_entry(position, entry)
        event = decode(record.topic, record.state, record.originator_id, record.originator_version)
        rewriter.learn(event, position)
        if isinstance(event, ErasedPayload) and event.key_id is None:  # stored in clear
            hidden = clear.decode(
                record.topic, record.state, record.originator_id, record.originator_version
            )
            rewriter.learn_namespace(hidden.namespace)
    master = source.keyring.master
    old = source.keyring.store.read()
    store_key = os.urandom(KEY_SIZE)
    first = msgspec.structs.replace(  # erasure records come after the copy: opening an
        old,  # engine on an empty ledger would record their erasures again
        keys=tuple(r for r in old.keys if not r.erased),
        id_format=ID_FORMAT_KEYED,
        id_key=None if old.master_key_id else store_key,
        id_key_wrapped=master.wrap(store_key) if old.master_key_id and master else None,
    )
    keys.update(lambda _: (first, None))
    with open_target(master) as target:
        digests = target.keyring.digests
        from_data_key = old.master_key_id is not None and old.clear_until == 0

        def rekeyed(state: KeyStoreState) -> tuple[KeyStoreState, None]:
            records = tuple(
                rewriter.key_record(r, ids_from_data_key=from_data_key) for r in old.keys
            )
            return msgspec.structs.replace(state, keys=records), None

        rewriter.resolve_outer(digests)
        keys.update(rekeyed)
        target.keyring.refresh(force=True)
        rewriter.resolve(digests)
        sealing = target.mapper
        plain = _plain(sealing)
        previous, batch = GENESIS_HASH, []
        target_log = target.ledger_log()
        for position, entry in log.iter_log(1, _PAGE):  # pass 2: the rewritten records
            if position > head:
                break
            record = decode_entry(position, entry)
            event = decode(
                record.topic, record.state, record.originator_id, record.originator_version
            )
            body = _body(event, record.state, record.topic, rewriter, sealing, plain)
            previous = chain_hash(previous, body)
            batch.append((position, previous + body))
            if len(batch) >= _PAGE:
                target_log.append_log(batch)
                batch = []
        if batch:
            target_log.append_log(batch)
    return head, rewriter.unknown


def _plain(mapper: Any) -> Any:
    """A copy of ``mapper`` without its keyring: it neither seals nor hides."""
    plain = copy.copy(mapper)
    plain.keyring = None
    return plain


def _body(
    event: LedgerEvent,
    state: bytes,
    topic: str,
    rewriter: IdRewriter,
    sealing: object,
    plain: object,
) -> bytes:
    """The new record body of ``event`` (stored as ``state``): ids rewritten, sealed again
    when it was sealed; an erased payload's sealed bytes kept (nobody can open them)."""
    if isinstance(event, ErasedPayload):
        stream = rewriter.new_id(event.originator_id)
        return encode_body(stream, event.originator_version, topic, state)
    new = rewriter.struct(event)
    mapper = sealing if state[:1] == bytes((SEALED,)) else plain
    stored = mapper.to_stored_event(new)  # type: ignore[attr-defined]
    return encode_body(stored.originator_id, stored.originator_version, stored.topic, stored.state)


def _verify_new(new: Path, config: MemoryConfig, master_key: MasterKeySpec | None) -> VerifyReport:
    """Open the new store (its tag index is built from the rewritten records) and verify
    its ledger; its projection files are dropped (the store's are rebuilt after the swap)."""
    with MemoryEngine.open(new, create=False, config=config, master_key=master_key) as engine:
        report = verify_store(engine)
    shutil.rmtree(new / "projections", ignore_errors=True)
    return report


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _journal(work: Path) -> None:
    journal = work / ID_MIGRATION_JOURNAL
    with open(journal, "wb") as f:
        f.write(b"the id format step is swapping this store's ledger and key store\n")
        f.flush()
        os.fsync(f.fileno())
    _fsync_dir(work)


def _swap(root: Path) -> None:
    """Move the old ``ledger/`` and ``keys/`` aside and the new ones in (each rename done
    once: a rerun after a crash redoes only what is left)."""
    work = root / ID_MIGRATION_DIR
    (work / "old").mkdir(exist_ok=True)
    for part in _PARTS:
        new, old, live = work / "new" / part, work / "old" / part, root / part
        if not new.exists():
            continue  # moved in already
        if live.exists() and not old.exists():
            live.rename(old)
            fault("rekey.swap_part")
        new.rename(live)
    _fsync_dir(root)


def _finish(root: Path, config: MemoryConfig, master_key: MasterKeySpec | None) -> None:
    """Rebuild the read models from the new ledger, then delete the old ledger, key store
    and journal."""
    shutil.rmtree(root / "projections", ignore_errors=True)
    work = root / ID_MIGRATION_DIR
    (work / ID_MIGRATION_JOURNAL).unlink()
    try:
        with MemoryEngine.open(root, create=False, config=config, master_key=master_key) as e:
            e.catch_up()
    except MemoryLedgerError as e:
        _swap_back(root)  # the old ledger and key store are the only copy: put them back
        msg = (
            f"the rewritten ledger of {str(root)!r} did not open ({e}); the old ledger and "
            "key store were put back, so the store is as it was before the step"
        )
        raise IdMigrationError(msg, reason_code="swap_failed") from None
    with contextlib.suppress(FileNotFoundError):
        shutil.rmtree(work)
    _fsync_dir(root)


def _swap_begun(work: Path) -> bool:
    """Whether ``work`` holds something a swap moves (a new part to move in, or an old part
    moved aside): a journal without either is left by no swap and means nothing."""
    return any((work / side / part).exists() for side in ("new", "old") for part in _PARTS)


def _refuse_if_open(root: Path) -> None:
    """Refuse while another process holds the store open (every engine holds a projection
    slot's lock for its life: :func:`~memory_ledger.projections.store.remove_idle_slots`).

    :raises IdMigrationError: ``store_in_use``.
    """
    if remove_idle_slots(root / "projections"):
        msg = f"{str(root)!r} is open in another process: close it everywhere and rerun"
        raise IdMigrationError(msg, reason_code="store_in_use")


def _swap_back(root: Path) -> None:
    """Undo :func:`_swap`: every part moved aside goes back in place of the new one, and the
    work folder goes."""
    work = root / ID_MIGRATION_DIR
    for part in _PARTS:
        old, live = work / "old" / part, root / part
        if old.exists():
            if live.exists():
                shutil.rmtree(live)
            old.rename(live)
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(root / "projections", ignore_errors=True)
    _fsync_dir(root)
