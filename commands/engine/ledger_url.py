"""Open the ledger a store uses: LMDB inside the store folder, or PostgreSQL by URL.

:func:`open_ledger` builds the ``eventsourcing`` infrastructure factory from settings passed
as ``env=`` (never process-wide environment variables) and returns its application recorder.
The PostgreSQL password (from the URL, the variable its ``password_env`` names, or
``PGPASSWORD``) stays inside the factory: names and messages show the URL without it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eventsourcing.persistence import (
    ApplicationRecorder,
    InfrastructureFactory,
    InterfaceError,
    OperationalError,
    ProgrammingError,
)
from eventsourcing.utils import get_topic

from memory_ledger.commands.errors import (
    LedgerDriverNotInstalledError,
    LedgerUnavailableError,
    StoreUnavailableError,
)
from memory_ledger.ledger.errors import LedgerConnectionError
from memory_ledger.ledger.mapper import MsgspecMapper
from memory_ledger.ledger.store_identity import check_store_root

__all__ = ["OpenedLedger", "is_ledger_url", "ledger_writable", "open_ledger", "redact"]


def is_ledger_url(text: str | None) -> bool:
    """Whether ``text`` names a PostgreSQL ledger (``postgresql://`` or ``postgres://``)."""
    return bool(text) and str(text).startswith(("postgresql://", "postgres://"))


def redact(text: str, password: str) -> str:
    """``text`` with every occurrence of ``password`` replaced by ``***``."""
    return text.replace(password, "***") if password else text


@dataclass(frozen=True)
class OpenedLedger:
    """An open ledger: its factory and application recorder, a name safe to show (the LMDB
    folder or the URL without password) and the password to keep out of messages."""

    factory: InfrastructureFactory[Any]
    recorder: ApplicationRecorder
    name: str
    secret: str = ""
    read_only: bool = False


def open_ledger(
    root: Path,
    url: str | None,
    *,
    sync: bool = True,
    map_size: int | None = None,
    create: bool = True,
    read_only: bool | None = None,
) -> OpenedLedger:
    """Open the ledger of the store folder ``root``: LMDB in ``root/ledger`` when ``url`` is
    None, else the PostgreSQL ledger at ``url``.

    :param create: create the ledger when absent; with False a missing one is an error.
    :param read_only: open the LMDB ledger read-only (it must exist); None: read-only
        exactly when ``create`` is False and this process cannot write it. A PostgreSQL
        ledger is never opened read-only (the server's grants decide).
    :raises StoreUnavailableError: the store folder cannot be created, or (``create=False``)
        holds no LMDB ledger.
    :raises ForeignStoreError: the folder holds another application's LMDB.
    :raises LedgerUnavailableError: the PostgreSQL server cannot be reached, has no such
        database (``reason_code`` ``"no_database"``, at once, naming it), refuses the
        credentials (``"authentication_failed"``, at once, naming the user), or
        (``create=False``) holds no ledger there; the message shows no password.
    :raises ValueError: ``url`` is not a valid ledger URL (``LedgerURLError``).
    :raises LedgerDriverNotInstalledError: ``url`` names a PostgreSQL ledger and the
        ``postgres`` extra (psycopg) is not installed.
    """
    if url is None:
        return _open_lmdb(root, sync=sync, map_size=map_size, create=create, read_only=read_only)
    return _open_postgres(root, url, create=create)


def ledger_writable(ledger: Path) -> bool:
    """Whether this process may write the ledger folder and its files (LMDB needs all)."""
    paths = [ledger, *(ledger / name for name in ("data.mdb", "lock.mdb"))]
    return all(os.access(p, os.W_OK) for p in paths if p.exists())


def _open_lmdb(
    root: Path, *, sync: bool, map_size: int | None, create: bool, read_only: bool | None
) -> OpenedLedger:
    ledger = root / "ledger"
    if (not create or read_only) and not (ledger / "data.mdb").is_file():
        check_store_root(root)
        msg = f"no memory store at {str(root)!r} (expected {str(ledger)!r})"
        raise StoreUnavailableError(msg, path=str(root), reason_code="no_store")
    check_store_root(root)
    if read_only is None:
        read_only = not create and not ledger_writable(ledger)
    if not read_only:
        try:
            root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            msg = f"cannot create memory store directory {str(root)!r}: {e.strerror or e}"
            raise StoreUnavailableError(msg, path=str(root)) from e
    env = {
        "PERSISTENCE_MODULE": "memory_ledger.ledger.lmdb",
        "LMDB_PATH": str(ledger),
        "LMDB_SYNC": "y" if sync else "n",
        "LMDB_READONLY": "y" if read_only else "n",
        "LMDB_ENGINE_STORE": "y",
        "MAPPER_TOPIC": get_topic(MsgspecMapper),
    }
    if map_size is not None:
        env["LMDB_MAP_SIZE"] = str(map_size)
    try:
        factory = InfrastructureFactory.construct(env=env)
    except OperationalError as e:
        reason = getattr(e, "reason_code", None)
        raise StoreUnavailableError(str(e), path=str(root), reason_code=reason) from e
    try:
        recorder = factory.application_recorder()
    except BaseException:
        factory.close()
        raise
    return OpenedLedger(factory, recorder, str(ledger), read_only=read_only)


def _open_postgres(root: Path, url: str, *, create: bool) -> OpenedLedger:
    # Imported here: psycopg is needed only by stores whose ledger is on PostgreSQL.
    try:
        from memory_ledger.ledger.postgres import (
            parse_ledger_url,
            probe_server,
            settings_from_url,
        )
    except ImportError as e:
        raise LedgerDriverNotInstalledError.missing(e.name) from e

    parsed = parse_ledger_url(url)
    name = parsed.redacted
    secret = parsed.password
    try:
        probe_server(parsed)  # a missing database or refused login fails now
    except LedgerConnectionError as e:
        raise LedgerUnavailableError(
            redact(str(e), secret), path=name, reason_code=e.reason_code
        ) from None
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        msg = f"cannot create memory store directory {str(root)!r}: {e.strerror or e}"
        raise StoreUnavailableError(msg) from e
    env = settings_from_url(parsed)
    env["MAPPER_TOPIC"] = get_topic(MsgspecMapper)
    env["CREATE_TABLE"] = "y" if create else "n"
    try:
        factory = InfrastructureFactory.construct(env=env)
    except OSError as e:
        msg = f"cannot configure ledger {name}: {redact(str(e), secret)}"
        raise LedgerUnavailableError(msg) from None
    try:
        recorder = factory.application_recorder()
        if not create and not getattr(recorder, "store_id", None):
            recorder.open_store()  # type: ignore[attr-defined]
    except (OperationalError, InterfaceError) as e:
        factory.close()
        msg = f"ledger {name} is unavailable: {redact(str(e), secret)}"
        raise LedgerUnavailableError(msg) from None
    except ProgrammingError as e:
        factory.close()
        msg = f"no memory ledger at {name} ({redact(str(e), secret).splitlines()[0]})"
        raise LedgerUnavailableError(msg) from None
    except BaseException:
        factory.close()
        raise
    return OpenedLedger(factory, recorder, name, secret)
