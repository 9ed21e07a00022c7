"""Store identity: what makes an LMDB environment a memory-ledger ledger, checked on open.

The ``meta`` database of a ledger records (all values ASCII):

- ``application``: ``memory-ledger`` (:data:`APPLICATION`), the identity;
- ``store_id``: a random UUID given at creation (copies made by ``backup`` keep it);
- ``format_version``: the record format (``memory_ledger.ledger.lmdb.FORMAT_VERSION``).

On open the folder is refused, untouched, with
:class:`~memory_ledger.ledger.errors.ForeignStoreError` naming it when:

- ``data.mdb`` exists but is empty (``empty_data_file``): LMDB would silently initialize it;
- ``data.mdb`` is not an LMDB file (``not_lmdb``; raised by LMDB, translated);
- the environment holds another application's data (``foreign_lmdb``): ``meta`` names
  another application, or, without an identity, the main database holds names other than
  the ledger's own databases (``meta``, ``log``, ``index``, ``tracking``, ``tags``,
  ``event_tags``, ``agg:*``), or
  the ledger's ``format_version`` is missing.

The ledger of an engine's store also records ``store_kind``: ``memory-engine``
(:data:`ENGINE_STORE`), written when an engine creates (or first adopts) it. The engine
opens an LMDB ledger only with that record (:func:`check_engine_ledger`): a ledger written by
another ``eventsourcing`` application through this package's persistence module (same
``application``, but its own aggregates' events) is refused, untouched, with
``reason_code`` ``"foreign_ledger"``. A ledger without the record whose log is empty, or whose
first records are all memory-ledger events (a store written before the record existed, or
rebuilt by a replay tool), is adopted: the record is written on the next writable open.

A store written before identities were recorded (``meta`` with ``format_version`` only,
nothing but the ledger's own databases) is adopted: its identity is recorded on the next
writable open. Once a store carries the identity, named databases added by later versions
are its own and never make it foreign.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Mapping
from pathlib import Path

from memory_ledger.ledger.errors import ForeignStoreError, LedgerFormatError

__all__ = [
    "APPLICATION",
    "APPLICATION_KEY",
    "ENGINE_STORE",
    "ENGINE_TOPIC_PREFIX",
    "STORE_KIND_KEY",
    "check_engine_ledger",
    "FORMAT_KEY",
    "LEDGER_DATABASES",
    "STORE_ID_KEY",
    "check_data_file",
    "check_store_root",
    "identity_to_record",
]

APPLICATION = b"memory-ledger"
"""The ``application`` value of every memory-ledger ledger."""

APPLICATION_KEY = b"application"
STORE_ID_KEY = b"store_id"
FORMAT_KEY = b"format_version"
STORE_KIND_KEY = b"store_kind"
ENGINE_STORE = b"memory-engine"
"""The ``store_kind`` value of the ledger of an engine's store."""
ENGINE_TOPIC_PREFIX = "memory_ledger."
"""Every event the engine records has a topic in this package."""
ENGINE_SAMPLE = 64
"""How many of a ledger's first records :func:`check_engine_ledger` is given."""

LEDGER_DATABASES = frozenset({b"meta", b"log", b"index", b"tracking", b"tags", b"event_tags"})
"""Named databases every ledger has (plus ``agg:<purpose>`` ones of aggregate recorders)."""

_DATA_FILE = "data.mdb"


def check_data_file(path: str | os.PathLike[str]) -> None:
    """Refuse a ledger directory whose ``data.mdb`` exists but is empty.

    :raises ForeignStoreError: ``reason_code`` ``"empty_data_file"``, naming the file.
    """
    data = Path(path) / _DATA_FILE
    try:
        size = data.stat().st_size
    except OSError:
        return  # absent (a new store) or unreadable (LMDB reports it, translated)
    if size == 0:
        msg = (
            f"{str(data)!r} is empty: it is not a memory-ledger ledger (LMDB would overwrite "
            "it). Remove it if the folder is meant for a new store."
        )
        raise ForeignStoreError(msg, path=str(path), reason_code="empty_data_file")


def check_store_root(root: str | os.PathLike[str]) -> None:
    """Refuse a store folder that holds an LMDB environment at its top level.

    A memory-ledger store keeps its ledger in ``<root>/ledger/``; a ``data.mdb`` directly in
    ``root`` (and no ``ledger/`` folder) is another application's LMDB, or a ledger folder
    given in place of its store folder.

    :raises ForeignStoreError: ``reason_code`` ``"lmdb_at_top_level"``, naming the folder.
    """
    folder = Path(root)
    if (folder / _DATA_FILE).exists() and not (folder / "ledger").exists():
        msg = (
            f"{str(folder)!r} holds an LMDB environment (data.mdb) at its top level, not a "
            f"memory-ledger store (which keeps its ledger in {str(folder / 'ledger')!r}); "
            "if it is a store's ledger folder, open its parent folder"
        )
        raise ForeignStoreError(msg, path=str(folder), reason_code="lmdb_at_top_level")


def _is_ledger_name(name: bytes) -> bool:
    return name in LEDGER_DATABASES or name.startswith(b"agg:")


def identity_to_record(
    path: str,
    names: Iterable[bytes],
    meta: Mapping[bytes, bytes] | None,
    *,
    format_version: int,
) -> dict[bytes, bytes]:
    """Check the identity of the LMDB environment at ``path``; return the ``meta`` entries
    still to record (empty when the store is complete).

    :param names: the keys of the environment's main database (its named databases).
    :param meta: the entries of its ``meta`` database, None when there is none.
    :param format_version: the newest record format this code reads and writes.
    :raises ForeignStoreError: another application's environment (``"foreign_lmdb"``).
    :raises LedgerFormatError: the format version is newer (``"newer_format"``) or not an
        integer (``"unreadable_format"``).
    """
    present = set(names)
    if present <= {b"meta"} and not meta:  # new (or its creation was interrupted)
        return {
            APPLICATION_KEY: APPLICATION,
            STORE_ID_KEY: str(uuid.uuid4()).encode("ascii"),
            FORMAT_KEY: str(format_version).encode("ascii"),
        }
    application = (meta or {}).get(APPLICATION_KEY)
    if application is not None and application != APPLICATION:
        shown = application.decode("utf-8", "replace")
        msg = (
            f"the LMDB environment at {path!r} belongs to another application ({shown!r}), "
            "not memory-ledger; it is left untouched"
        )
        raise ForeignStoreError(msg, path=path, reason_code="foreign_lmdb")
    if application is None:
        foreign = sorted(name for name in present if not _is_ledger_name(name))
        if foreign or meta is None or FORMAT_KEY not in meta:
            shown = ", ".join(repr(n.decode("utf-8", "replace")) for n in foreign[:5])
            what = f"holds names a ledger never has ({shown})" if foreign else "has no identity"
            msg = (
                f"the LMDB environment at {path!r} is not a memory-ledger ledger: it {what}; "
                "it is left untouched"
            )
            raise ForeignStoreError(msg, path=path, reason_code="foreign_lmdb")
    assert meta is not None
    stored = meta.get(FORMAT_KEY)
    if stored is None:
        msg = f"LMDB store at {path!r} has no format version"
        raise LedgerFormatError(msg, path=path, reason_code="unreadable_format")
    try:
        version = int(stored.decode("ascii"))
    except (UnicodeDecodeError, ValueError):
        msg = f"LMDB store at {path!r} has an unreadable format version {stored!r}"
        raise LedgerFormatError(msg, path=path, reason_code="unreadable_format") from None
    if version > format_version:
        msg = (
            f"LMDB store at {path!r} has format version {version}, newer than "
            f"version {format_version} that this memory-ledger can read: upgrade "
            "memory-ledger to open it"
        )
        raise LedgerFormatError(msg, path=path, reason_code="newer_format")
    missing: dict[bytes, bytes] = {}
    if application is None:
        missing[APPLICATION_KEY] = APPLICATION
    if STORE_ID_KEY not in meta:
        missing[STORE_ID_KEY] = str(uuid.uuid4()).encode("ascii")
    return missing


def check_engine_ledger(
    path: str, meta: Mapping[bytes, bytes] | None, topics: Iterable[str]
) -> bool:
    """Check that the LMDB ledger at ``path`` is the ledger of an engine's store; return
    whether its ``store_kind`` record is still to be written (an adopted ledger).

    :param meta: the entries of its ``meta`` database (None: a new ledger).
    :param topics: the topics of the log's first records (at most :data:`ENGINE_SAMPLE`).
    :raises ForeignStoreError: ``reason_code`` ``"foreign_ledger"``: another application's
        ledger (another ``store_kind``, or a record whose topic is not memory-ledger's),
        naming the folder and the first foreign topic.
    """
    kind = (meta or {}).get(STORE_KIND_KEY)
    if kind == ENGINE_STORE:
        return False
    if kind is not None:
        shown = kind.decode("utf-8", "replace")
        msg = (
            f"the LMDB ledger at {path!r} is not the ledger of a memory store (its store_kind "
            f"is {shown!r}); it is left untouched"
        )
        raise ForeignStoreError(msg, path=path, reason_code="foreign_ledger")
    foreign = next((t for t in topics if not t.startswith(ENGINE_TOPIC_PREFIX)), None)
    if foreign is not None:
        msg = (
            f"the LMDB ledger at {path!r} was written by another eventsourcing application "
            f"(it records {foreign!r} events and has no memory-store identity), not by a "
            "memory-ledger engine; it is left untouched (open it with the application that "
            "wrote it, or give the engine another folder)"
        )
        raise ForeignStoreError(msg, path=path, reason_code="foreign_ledger")
    return True
