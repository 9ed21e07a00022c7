"""Typed errors of the audit and replay tools (export, backup, restore, rebuild).

Each is a :class:`~memory_ledger.ledger.errors.MemoryLedgerError` with a stable
``reason_code`` and ``path`` naming the file or folder, and also the ``OSError`` subclass
the tools raised before (so ``except FileExistsError`` keeps working).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from memory_ledger.ledger.errors import InvalidArgumentError, MemoryLedgerError

__all__ = [
    "BackupManifestError",
    "ConfirmationRequiredError",
    "KeyFileExistsError",
    "KeyFileUnwritableError",
    "NotABackupError",
    "OutputExistsError",
    "OutputNotADirectoryError",
    "OutputUnwritableError",
    "unwritable_output",
]


class OutputExistsError(MemoryLedgerError, FileExistsError):
    """The output file or folder exists (an export, backup or rebuild writes a new one)."""

    reason_code = "output_exists"

    def __init__(self, message: str, *, path: str = "", reason_code: str | None = None) -> None:
        super().__init__(message, reason_code=reason_code)
        self.path = path


class OutputNotADirectoryError(MemoryLedgerError, NotADirectoryError):
    """The output path is a file where a folder is needed."""

    reason_code = "output_not_a_directory"

    def __init__(self, message: str, *, path: str = "", reason_code: str | None = None) -> None:
        super().__init__(message, reason_code=reason_code)
        self.path = path


class OutputUnwritableError(MemoryLedgerError, OSError):
    """The output path cannot be written (its folder is missing and cannot be made, is not
    writable, is on a read-only or full file system, or is not a place for files, such as
    ``/proc``). ``path`` is the output path the caller gave; ``reason_code`` says why
    (``output_not_writable``, ``output_permission_denied``, ``output_read_only``,
    ``output_disk_full``)."""

    reason_code = "output_not_writable"

    def __init__(self, message: str, *, path: str = "", reason_code: str | None = None) -> None:
        super().__init__(message, reason_code=reason_code)
        self.path = path


_ERRNO_REASONS = {
    errno.EACCES: "output_permission_denied",
    errno.EPERM: "output_permission_denied",
    errno.EROFS: "output_read_only",
    errno.ENOSPC: "output_disk_full",
    errno.EDQUOT: "output_disk_full",
}


def unwritable_output(error: OSError, out: str | Path, what: str) -> OutputUnwritableError:
    """The typed error for ``error``, met writing the output ``out`` (``what``: "export
    folder", "backup folder"...); raise it ``from error``. The message names ``out`` and the
    system's reason (``strerror``), not the hidden staging names the writer used."""
    reason = os.strerror(error.errno) if error.errno else type(error).__name__
    msg = f"cannot write the {what} {str(out)!r}: {reason}"
    code = _ERRNO_REASONS.get(error.errno or 0)
    return OutputUnwritableError(msg, path=str(out), reason_code=code)


class NotABackupError(MemoryLedgerError, FileNotFoundError):
    """The folder holds no memory-ledger backup; the message names what is missing."""

    reason_code = "not_a_backup"

    def __init__(self, message: str, *, path: str = "", reason_code: str | None = None) -> None:
        super().__init__(message, reason_code=reason_code)
        self.path = path


class BackupManifestError(MemoryLedgerError, ValueError):
    """A backup's manifest (``backup.json``) is malformed; the message names the file."""

    reason_code = "bad_backup_manifest"

    def __init__(self, message: str, *, path: str = "", reason_code: str | None = None) -> None:
        super().__init__(message, reason_code=reason_code)
        self.path = path


class KeyFileExistsError(OutputExistsError):
    """``memory-ledger keys new --out FILE``: FILE exists (a key file is never overwritten)."""

    reason_code = "key_file_exists"


class KeyFileUnwritableError(MemoryLedgerError, OSError):
    """``memory-ledger keys new --out FILE``: FILE cannot be created (no such folder, no
    permission); names it."""

    reason_code = "key_file_unwritable"


class ConfirmationRequiredError(InvalidArgumentError):
    """``memory-ledger erase`` ran off a terminal without ``--yes``: nothing was erased."""

    reason_code = "confirmation_required"
