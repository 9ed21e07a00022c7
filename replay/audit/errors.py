"""Typed errors of the audit and replay tools (export, backup, restore, rebuild).

Each is a :class:`~memory_ledger.ledger.errors.MemoryLedgerError` with a stable
``reason_code`` and ``path`` naming the file or folder, and also the ``OSError`` subclass
the tools raised before (so ``except FileExistsError`` keeps working).
"""

from __future__ import annotations

from memory_ledger.ledger.errors import InvalidArgumentError, MemoryLedgerError

__all__ = [
    "BackupManifestError",
    "ConfirmationRequiredError",
    "KeyFileExistsError",
    "KeyFileUnwritableError",
    "NotABackupError",
    "OutputExistsError",
    "OutputNotADirectoryError",
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
