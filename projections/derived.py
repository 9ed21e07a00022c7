"""The one place every derived file of a store is written through, and the one that knows
which namespaces were erased (issue 34, item 2).

A store folder holds the ledger (the source of truth: sealed payloads, digests) and files
derived from it: the projection slots (DuckDB), the persisted recall index of each slot,
the workspace vector cache, and the files a backup or an export writes. An erasure
(crypto-shredding, ``docs/erasure.md``) must reach every one of them whenever it is
written: before the erasure, after it, by the erasing process or by another one that
held a slot at the time, after a ``kill -9`` and after a restore. So the rule is checked
where files are written, not only where ``erase`` runs:

- :class:`ErasedNamespaces` answers which namespaces are erased now: it asks the keyring
  (one ``stat`` of the key store when nothing changed), so another process's erasure is
  seen at the next write;
- its :meth:`~ErasedNamespaces.kept` drops the entries of erased namespaces from what a
  writer is about to write, and :meth:`~ErasedNamespaces.scrub` deletes their rows from
  a DuckDB file (opened, or about to be closed);
- :func:`write_atomic` writes every derived file the engine writes itself (the recall
  index, workspace vectors, manifests, stamps: temporary name, fsync, rename, folder
  fsync); files DuckDB writes (slots, rebuilds, an export's read models) are scrubbed
  through :meth:`~ErasedNamespaces.scrub` first;
- a projection slot's files are stamped, when its holder closes them scrubbed, with how
  many namespaces were erased then (:func:`stamp_slot`, ``slot-N.erasures``, a number
  only); a slot whose stamp is older than the store's erasures (its holder was killed,
  perhaps while an erasure ran, or the erasing process was) is stale
  (:func:`slot_stale`): whoever claims or sweeps it next deletes its files
  (:func:`slot_files`).

``tests/project/test_derived_writes.py`` greps the package for file writes outside this
module and a short list of writers that hold no namespace's content (the ledger, the key
store, key files), so a writer added later goes through here.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar
from uuid import UUID

import msgspec

from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.keyring import namespace_ids

if TYPE_CHECKING:
    import duckdb

__all__ = [
    "VECTOR_CACHE_FOLDER",
    "NO_ERASURE",
    "ErasedNamespaces",
    "KeyringLike",
    "remove_erased_folders",
    "slot_files",
    "slot_stale",
    "stamp_slot",
    "write_atomic",
]

T = TypeVar("T")

STAMP_SUFFIX = ".erasures"

VECTOR_CACHE_FOLDER = "workspace-vectors"
"""Folder of the store holding workspace vectors, one sub-folder per namespace (derived;
:mod:`memory_ledger.commands.workspace.vector_cache` writes it, erasure removes an erased
namespace's sub-folder: :func:`remove_erased_folders`). Here, without numpy, so that an
open reaching erasures imports nothing heavy."""
"""``slot-N.erasures``: how many erased namespaces slot N's files were last written knowing."""


class KeyringLike(Protocol):
    """What :class:`ErasedNamespaces` reads of a :class:`~memory_ledger.ledger.keyring.Keyring`."""

    erased_namespace_ids: frozenset[UUID]

    def namespace_id(self, namespace: Namespace) -> UUID:
        """The id of ``namespace`` in the keyring's store (its id format)."""

    def refresh(self, *, force: bool = False) -> None:
        """Reread the key store when another process changed it."""


class ErasedNamespaces:
    """Which namespaces are erased, asked afresh at every write.

    :param source: returns the erased namespace ids (digests,
        :meth:`~memory_ledger.ledger.keyring.Keyring.namespace_id`) now.
    :param namespace_id: the id of a namespace in the store (default: id format 1,
        :func:`~memory_ledger.ledger.keyring.namespace_ids`).
    """

    def __init__(
        self,
        source: Callable[[], frozenset[UUID]] = frozenset,
        namespace_id: Callable[[Namespace], UUID] | None = None,
    ) -> None:
        self._source = source
        self._namespace_id = namespace_id or (lambda namespace: namespace_ids(namespace)[0])
        self._by_key: dict[str, bool] = {}
        self._seen: frozenset[UUID] = frozenset()

    @classmethod
    def of_keyring(cls, keyring: KeyringLike) -> ErasedNamespaces:
        """The erased namespaces of ``keyring``, refreshed from its key store at each ask (a
        key store that cannot be read then leaves the ids last read: never fewer)."""

        def source() -> frozenset[UUID]:
            from memory_ledger.ledger.key_errors import KeyStoreError, MasterKeyError

            with contextlib.suppress(KeyStoreError, MasterKeyError, OSError):
                keyring.refresh()
            return keyring.erased_namespace_ids

        return cls(source, keyring.namespace_id)

    def ids(self) -> frozenset[UUID]:
        """The erased namespace ids now."""
        ids = self._source()
        if ids != self._seen:
            self._seen, self._by_key = ids, {}
        return ids

    def is_erased(self, namespace: Namespace) -> bool:
        """Whether ``namespace`` is erased now."""
        return self.key_erased(namespace.key(), self.ids())

    def key_erased(self, key: str, ids: frozenset[UUID] | None = None) -> bool:
        """Whether the namespace of text key ``key`` (:meth:`Namespace.key`, a JSON array of
        its three parts) is erased; a key that is no namespace's counts as erased (never
        written)."""
        ids = self.ids() if ids is None else ids
        if not ids:
            return False
        found = self._by_key.get(key)
        if found is None:
            try:
                parts = msgspec.json.decode(key, type=tuple[str, str, str])
            except msgspec.DecodeError:
                return True
            found = self._namespace_id(Namespace(*parts)) in ids
            self._by_key[key] = found
        return found

    def namespace_id(self, namespace: Namespace) -> UUID:
        """The id of ``namespace`` in the store (what :meth:`ids` holds once it is erased):
        the name of its folder in a per-namespace cache (:func:`remove_erased_folders`)."""
        return self._namespace_id(namespace)

    def kept(self, items: Iterable[T], key: Callable[[T], str]) -> list[T]:
        """``items`` less those whose namespace (``key(item)``, a text key) is erased: what a
        writer may write."""
        ids = self.ids()
        return [item for item in items if not self.key_erased(key(item), ids)]

    def scrub(self, conn: duckdb.DuckDBPyConnection) -> int:
        """Delete every row of an erased namespace from the read models of ``conn`` (one
        transaction, then a ``CHECKPOINT`` when rows went); return how many namespaced rows
        went. The caller holds the connection's lock."""
        ids = self.ids()
        if not ids:
            return 0
        from memory_ledger.projections.erasure import erase_namespace_rows

        conn.execute("BEGIN TRANSACTION")
        try:
            deleted = erase_namespace_rows(conn, ids, self._namespace_id)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        if deleted:
            conn.execute("CHECKPOINT")
        return deleted


NO_ERASURE = ErasedNamespaces()
"""Nothing erased (a store without a keyring, a temporary file)."""


def remove_erased_folders(directory: str | os.PathLike[str], erased: frozenset[UUID]) -> int:
    """Delete each sub-folder of a per-namespace cache ``directory`` (the workspace vector
    cache: ``<folder>/<namespace id hex>/...``) named by a namespace id in ``erased``, and
    each sub-folder not named by a namespace id at all (a cache written before the cache
    was kept per namespace: whose it is cannot be told). Returns how many went; a folder
    that cannot be listed or deleted is left (its error is not raised: the next erasure or
    open tries again)."""
    folder = Path(directory)
    try:
        names = sorted(entry.name for entry in os.scandir(folder) if entry.is_dir())
    except OSError:
        return 0
    removed = 0
    for name in names:
        try:
            owner: UUID | None = UUID(hex=name) if len(name) == 32 else None
        except ValueError:
            owner = None
        if owner is not None and owner not in erased:
            continue
        shutil.rmtree(folder / name, ignore_errors=True)
        removed += not (folder / name).exists()
    return removed


def _fsync_folder(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(
    path: Path,
    chunks: Iterable[bytes | memoryview],
    *,
    fault_point: str | None = None,
    before_replace: Callable[[], None] | None = None,
    mode: int | None = None,
) -> None:
    """Write ``chunks`` as the whole new content of ``path``: under a temporary name in the
    same folder, fsynced, renamed over ``path``, the folder fsynced. A crash leaves the old
    file or the new one, never a mix; a failure removes the temporary file.

    :param fault_point: ``<point>.write`` runs after the first chunk and
        ``<point>.replace`` before the rename (:mod:`memory_ledger.ledger.faults`).
    :param before_replace: called right before the rename (e.g. to unmap the old file).
    :param mode: the new file's permission bits (default: the umask's).
    :raises OSError: the folder cannot be written (``path`` is unchanged).
    """
    from memory_ledger.ledger.faults import fault

    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    try:
        with open(tmp, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            for number, chunk in enumerate(chunks):
                f.write(chunk)
                if number == 0 and fault_point is not None:
                    fault(f"{fault_point}.write")
            f.flush()
            os.fsync(f.fileno())
        if fault_point is not None:
            fault(f"{fault_point}.replace")
        if before_replace is not None:
            before_replace()
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    _fsync_folder(path.parent)


def _stamp(slot_file: Path) -> Path:
    return slot_file.with_suffix(STAMP_SUFFIX)


def stamp_slot(slot_file: Path, erasures: int) -> None:
    """Record that every file of the slot of DuckDB file ``slot_file`` was written knowing
    ``erasures`` erased namespaces (call with the slot held, after its files were written
    and scrubbed). The stamp holds that number only.

    :raises OSError: the folder cannot be written.
    """
    write_atomic(_stamp(slot_file), [str(erasures).encode()])


def slot_stale(slot_file: Path, erasures: int) -> bool:
    """Whether the slot of ``slot_file`` has files that may hold a namespace erased since
    they were written: the store has ``erasures`` erased namespaces (> 0), the slot has a
    DuckDB file or recall index, and its stamp (:func:`stamp_slot`) is older or missing (its
    holder was killed, or an erasure ran while it was held, or it predates stamps)."""
    if erasures <= 0:
        return False
    if not (slot_file.exists() or slot_file.with_suffix(".recall").exists()):
        return False
    try:
        stamped = int(_stamp(slot_file).read_bytes() or b"-1")
    except (OSError, ValueError):
        return True
    return stamped < erasures


def slot_files(slot_file: Path) -> list[Path]:
    """Every derived file of the slot of ``slot_file`` (DuckDB file, WAL, damage marker,
    recall index, temporary files of writes killed before their rename), its stamp last:
    what is deleted when a stale slot is claimed or swept, or an idle one erased (call with
    the slot's lock held)."""
    recall = slot_file.with_suffix(".recall")
    leftovers = [  # writes killed before their rename
        *slot_file.parent.glob(f"{glob.escape(recall.name)}.tmp-*"),
        *slot_file.parent.glob(f"{glob.escape(slot_file.name)}.rewrite*"),
    ]
    return [
        slot_file,
        slot_file.with_name(slot_file.name + ".wal"),
        slot_file.with_name(slot_file.name + ".damaged"),
        recall,
        *sorted(leftovers),
        _stamp(slot_file),
    ]
