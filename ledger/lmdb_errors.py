"""Translation of LMDB driver errors (``lmdb.Error``) into the ledger's typed errors.

As ``eventsourcing/sqlite.py`` maps ``sqlite3`` errors onto the DB-API classes of
``eventsourcing.persistence``, this maps py-lmdb's error classes (one per ``MDB_*`` return
code, plus ``lmdb.Error`` for an ``errno``) onto :mod:`memory_ledger.ledger.errors`, whose
classes are both :class:`~memory_ledger.ledger.errors.MemoryLedgerError` and the library's
class of the same meaning. The message names the store path; the driver's error is kept as
``__cause__``.

============================================  =============================================
LMDB error                                    translated to (reason code)
============================================  =============================================
``KeyExistsError``                            ``LedgerIntegrityError`` (ledger_conflict)
``BadValsizeError``                           ``LedgerDataError`` (ledger_data)
``CorruptedError``, ``PageNotFoundError``,     ``LedgerDamagedError`` (ledger_damaged)
``PanicError``, ``BadChecksumError``,
``CryptoFailError``
``InvalidError``                              ``ForeignStoreError`` (not_lmdb)
``IncompatibleError``                         ``ForeignStoreError`` (foreign_lmdb)
``VersionMismatchError``                      ``LedgerFormatError`` (lmdb_version_mismatch)
``ReadonlyError``                             ``LedgerReadOnlyError`` (ledger_read_only)
``MapFullError``, ``ReadersFullError``, ...    ``LedgerOperationalError`` (ledger_full)
``DiskError``, ``LockError``, ``MemoryError``  ``LedgerOperationalError`` (ledger_unavailable)
``BadTxnError``, ``BadRslotError``,            ``LedgerInternalError`` (ledger_internal)
``BadDbiError``
``InvalidParameterError``, ``NotFoundError``   ``LedgerProgrammingError`` (ledger_programming)
``EnvEncryptionError``                        ``LedgerNotSupportedError``
``lmdb.Error`` (an ``errno``)                 ``LedgerOperationalError`` (permission_denied,
                                              read_only_file_system, ...)
============================================  =============================================

A ``BadTxnError`` met inside a READ-ONLY transaction (``read_only=True``) is
``LedgerDamagedError`` (``ledger_page_unreadable``): a read transaction goes bad only when
an earlier read of it failed on a page (LMDB marks the transaction failed on a page of the
wrong type or a page number past the file, and some cursor walks end on that first error
without raising it), so it is damage of the file, never an internal error.

A full disk (``ENOSPC``, or an input/output error while the ledger's file system has no
space left: :func:`memory_ledger.ledger.disk_full.is_disk_full`) is
``LedgerDiskFullError`` (``disk_full``), whatever LMDB class reported it, with a one-line
message naming the cause and the folder.
"""

from __future__ import annotations

import lmdb

from memory_ledger.ledger.disk_full import disk_full_message, is_disk_full
from memory_ledger.ledger.errors import (
    ForeignStoreError,
    LedgerDamagedError,
    LedgerDataError,
    LedgerDiskFullError,
    LedgerError,
    LedgerFormatError,
    LedgerIntegrityError,
    LedgerInternalError,
    LedgerNotSupportedError,
    LedgerOperationalError,
    LedgerProgrammingError,
    LedgerReadOnlyError,
)

__all__ = ["PAGE_UNREADABLE", "translate_lmdb_error"]

_BY_CLASS: tuple[tuple[type[lmdb.Error], type[LedgerError], str | None], ...] = (
    (lmdb.KeyExistsError, LedgerIntegrityError, None),
    (lmdb.BadValsizeError, LedgerDataError, None),
    (lmdb.CorruptedError, LedgerDamagedError, None),
    (lmdb.PageNotFoundError, LedgerDamagedError, None),
    (lmdb.PanicError, LedgerDamagedError, None),
    (lmdb.BadChecksumError, LedgerDamagedError, None),
    (lmdb.CryptoFailError, LedgerDamagedError, None),
    (lmdb.InvalidError, ForeignStoreError, "not_lmdb"),
    (lmdb.IncompatibleError, ForeignStoreError, "foreign_lmdb"),
    (lmdb.VersionMismatchError, LedgerFormatError, "lmdb_version_mismatch"),
    (lmdb.ReadonlyError, LedgerReadOnlyError, None),
    (lmdb.MapFullError, LedgerOperationalError, "ledger_full"),
    (lmdb.MapResizedError, LedgerOperationalError, "ledger_resized"),
    (lmdb.ReadersFullError, LedgerOperationalError, "ledger_full"),
    (lmdb.DbsFullError, LedgerOperationalError, "ledger_full"),
    (lmdb.TlsFullError, LedgerOperationalError, "ledger_full"),
    (lmdb.TxnFullError, LedgerOperationalError, "ledger_full"),
    (lmdb.CursorFullError, LedgerOperationalError, "ledger_full"),
    (lmdb.PageFullError, LedgerOperationalError, "ledger_full"),
    (lmdb.DiskError, LedgerOperationalError, None),
    (lmdb.LockError, LedgerOperationalError, None),
    (lmdb.MemoryError, LedgerOperationalError, None),
    (lmdb.BadTxnError, LedgerInternalError, None),
    (lmdb.BadRslotError, LedgerInternalError, None),
    (lmdb.BadDbiError, LedgerInternalError, None),
    (lmdb.InvalidParameterError, LedgerProgrammingError, None),
    (lmdb.NotFoundError, LedgerProgrammingError, None),
    (lmdb.EnvEncryptionError, LedgerNotSupportedError, None),
)

_ERRNO_REASONS = (
    ("permission denied", "permission_denied"),
    ("read-only file system", "read_only_file_system"),
    ("no space left", "disk_full"),
    ("disk quota", "disk_full"),
    ("no such file", "not_found"),
    ("not a directory", "not_a_directory"),
    ("input/output error", "io_error"),
)


def _classify(error: lmdb.Error, detail: str) -> tuple[type[LedgerError], str | None]:
    for driver_class, typed, reason in _BY_CLASS:
        if isinstance(error, driver_class):
            return typed, reason
    lowered = detail.lower()
    for fragment, code in _ERRNO_REASONS:
        if fragment in lowered:
            return LedgerOperationalError, code
    return LedgerOperationalError, None


PAGE_UNREADABLE = "ledger_page_unreadable"
"""The reason code of a read-only transaction that went bad on a damaged page."""


def translate_lmdb_error(
    error: lmdb.Error, path: str, action: str = "use", *, read_only: bool = False
) -> LedgerError:
    """The typed error to raise for LMDB ``error`` met while ``action``-ing the store at
    ``path`` (raise it ``from error``).

    :param action: a verb for the message: ``"open"``, ``"read"``, ``"write"``...
    :param read_only: ``error`` was met inside a read-only transaction (a ``BadTxnError``
        there is damage: ``LedgerDamagedError``, ``ledger_page_unreadable``).
    :returns: a :class:`~memory_ledger.ledger.errors.LedgerError` subclass instance (see the
        module table), whose message names ``path`` and the driver's message.
    """
    detail = str(error) or type(error).__name__
    if is_disk_full(error, path):
        return LedgerDiskFullError(disk_full_message("the LMDB ledger", path, detail), path=path)
    if read_only and isinstance(error, lmdb.BadTxnError):
        msg = (
            f"cannot {action} the LMDB ledger at {path!r}: a read transaction failed on a "
            f"damaged page of the file ({detail})"
        )
        return LedgerDamagedError(msg, path=path, reason_code=PAGE_UNREADABLE)
    typed, reason = _classify(error, detail)
    msg = f"cannot {action} the LMDB ledger at {path!r}: {detail}"
    return typed(msg, path=path, reason_code=reason)
