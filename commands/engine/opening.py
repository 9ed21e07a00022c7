"""Opening a store's parts for
:meth:`~memory_ledger.commands.engine.memory_engine.MemoryEngine.open`: the
master key (checked before the ledger opens), the ledger and its recorder, the mapper with its
keyring, the tag index, the projection slot and the configured embedding provider. On any failure
what was opened is closed again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast
from uuid import UUID

from eventsourcing.persistence import ApplicationRecorder, InfrastructureFactory, Mapper

from memory_ledger.commands.config import MemoryConfig
from memory_ledger.commands.embeddings.config import provider_from_config
from memory_ledger.commands.engine.encryption import open_keyring, resolve_master_key
from memory_ledger.commands.engine.ledger_url import open_ledger
from memory_ledger.commands.errors import StoreUnavailableError
from memory_ledger.ledger.digests import UNKEYED
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.keyring import Keyring
from memory_ledger.ledger.mapper import MsgspecMapper
from memory_ledger.ledger.master_key import MasterKeySpec
from memory_ledger.ledger.tags import TaggedRecorder, stored_event_tagger
from memory_ledger.projections.derived import NO_ERASURE, ErasedNamespaces
from memory_ledger.projections.errors import ProjectionError
from memory_ledger.projections.runner import PROJECTION_VERSION
from memory_ledger.projections.store import ProjectionStore, ProjectionUnavailableError

if TYPE_CHECKING:
    from memory_ledger.commands.embeddings.base import EmbeddingProvider  # numpy: on use only

__all__ = [
    "ID_MIGRATION_DIR",
    "ID_MIGRATION_JOURNAL",
    "StoreParts",
    "check_store_path",
    "open_store_parts",
]

ID_MIGRATION_DIR = ".id-migration"
"""The folder of a store where the id format step builds its new ledger
(:mod:`memory_ledger.replay.audit.rekey`)."""
ID_MIGRATION_JOURNAL = "swapping"
"""The file in :data:`ID_MIGRATION_DIR` that says a swap began: the store refuses to open
until the step is run again."""


def check_store_path(path: object, *, configured: bool) -> None:
    """Refuse a store path that would silently put a store in the current directory.

    :param path: the ``path`` given to :meth:`MemoryEngine.open`.
    :param configured: a configuration was given (its ``store_dir`` then names the folder
        when ``path`` is None).
    :raises InvalidArgumentError: ``path`` is ``""`` (or only blanks; ``reason_code``
        ``"empty_path"``), or None without a configuration (``"path_required"``).
    """
    if path is None and not configured:
        msg = (
            "a store folder path is required: MemoryEngine.open(path) / "
            "memory_ledger.open(path), e.g. open('./store') (or pass config= whose "
            "store_dir names it); there is no implicit default folder"
        )
        raise InvalidArgumentError(msg, parameter="path", reason_code="path_required")
    if isinstance(path, str) and not path.strip():
        msg = (
            f"the store folder path is empty ({path!r}): name a folder, e.g. './store' "
            "(an empty path would put ledger/ and projections/ in the current directory)"
        )
        raise InvalidArgumentError(msg, parameter="path", reason_code="empty_path")


class StoreParts(NamedTuple):
    """What :func:`open_store_parts` opened (the engine owns and closes them)."""

    factory: InfrastructureFactory[Any]
    recorder: ApplicationRecorder
    mapper: Mapper[UUID]
    projections: ProjectionStore
    keyring: Keyring
    read_only: bool
    embeddings: EmbeddingProvider | None
    owned_provider: EmbeddingProvider | None
    """The provider built from the configuration (closed with the engine), or None."""
    ledger_name: str
    ledger_secret: str


def open_projections(
    root: Path, *, read_only: bool, erased: ErasedNamespaces = NO_ERASURE
) -> ProjectionStore:
    """The store's projection slot; for a read-only store whose projection folder cannot
    be written, a temporary projection file instead (removed on close). ``erased``: the
    store's erased namespaces, scrubbed from the file when opened and closed
    (:mod:`memory_ledger.projections.derived`)."""
    folder = root / "projections"
    if not read_only:
        return ProjectionStore.open_slot(folder, version=PROJECTION_VERSION, erased=erased)
    writable = os.access(folder, os.W_OK) if folder.exists() else os.access(root, os.W_OK)
    if writable:
        try:
            return ProjectionStore.open_slot(folder, version=PROJECTION_VERSION, erased=erased)
        except ProjectionUnavailableError:
            pass  # e.g. a read-only mount that os.access did not reveal
    return ProjectionStore.open_temporary(version=PROJECTION_VERSION, erased=erased)


def ensure_tag_index(recorder: ApplicationRecorder, mapper: Mapper[UUID]) -> None:
    """Index the tags of a store written before the tag index (once, all at once).

    :raises StoreUnavailableError: the recorder cannot record tags and append conditions.
    """
    if not isinstance(recorder, TaggedRecorder):
        msg = (
            f"{type(recorder).__name__} cannot record tags and append conditions, which "
            "the engine's consistency boundary needs (docs/design.md)"
        )
        raise StoreUnavailableError(msg)
    if not recorder.tag_index_built():
        keyring = getattr(mapper, "keyring", None)
        digests = keyring.digests if keyring is not None else UNKEYED
        recorder.build_tag_index(stored_event_tagger(mapper, digests))


def open_store_parts(
    root: Path,
    url: str | None,
    config: MemoryConfig,
    *,
    sync: bool,
    map_size: int | None,
    create: bool,
    read_only: bool | None,
    master_key: MasterKeySpec | None,
    embeddings: EmbeddingProvider | None,
) -> StoreParts:
    """Open the parts of the store folder ``root`` (see :meth:`MemoryEngine.open` for the
    parameters and the errors raised)."""
    # The master key is checked before the ledger opens: a bad key file, or a key that
    # is missing or another than the one that wrapped the store's data keys, leaves
    # every file of the store as it was (LMDB rewrites its lock file on every open).
    master = resolve_master_key(master_key, config)
    if not url and (root / ID_MIGRATION_DIR / ID_MIGRATION_JOURNAL).exists():
        msg = (
            f"the id format step (memory-ledger migrate --store) was interrupted while it "
            f"swapped the ledger of {str(root)!r}: run it again to finish; nothing was opened"
        )
        raise StoreUnavailableError(msg, path=str(root), reason_code="id_migration_unfinished")
    if not url and (root / "keys").is_dir():
        open_keyring(root, None, master, read_only=True)
    opened = open_ledger(
        root, url or None, sync=sync, map_size=map_size, create=create, read_only=read_only
    )
    factory, recorder = opened.factory, opened.recorder
    # Read-only when asked even where the ledger itself opens writable (PostgreSQL: the
    # server's grants decide): the engine then never writes (no pending erasure recorded,
    # no tag index built), as the audit commands require.
    read_only = opened.read_only or read_only is True
    owned = None
    projections: ProjectionStore | None = None
    try:
        mapper = cast(Mapper[UUID], factory.mapper())
        keyring = open_keyring(root, recorder, master, read_only=read_only)
        if isinstance(mapper, MsgspecMapper):
            mapper.keyring = keyring
        if not read_only:  # a read-only engine never decides: it needs no tag index
            ensure_tag_index(recorder, mapper)
        erased = ErasedNamespaces.of_keyring(keyring)
        projections = open_projections(root, read_only=read_only, erased=erased)
        if embeddings is None:
            embeddings = owned = provider_from_config(config)
    except (ProjectionError, ProjectionUnavailableError) as e:
        factory.close()
        msg = f"cannot open a projection file in {str(root)!r}: {e}"
        raise StoreUnavailableError(msg, path=str(root), reason_code=e.reason_code) from e
    except BaseException:
        if projections is not None:
            projections.close()
        factory.close()
        raise
    return StoreParts(
        factory=factory,
        recorder=recorder,
        mapper=mapper,
        projections=projections,
        keyring=keyring,
        read_only=read_only,
        embeddings=embeddings,
        owned_provider=owned,
        ledger_name=opened.name,
        ledger_secret=opened.secret,
    )
