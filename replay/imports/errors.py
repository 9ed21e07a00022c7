"""The errors of imports (mem0's history database, its vector store, interchange files).

Each is a :class:`~memory_ledger.ledger.errors.MemoryLedgerError` with a stable
``reason_code`` (listed in docs/errors.md). None echoes a value read from the imported data:
they name the file, the table or column, or a line number.
"""

from __future__ import annotations

from memory_ledger.ledger.errors import MemoryLedgerError

__all__ = [
    "ImportSourceError",
    "InterchangeFormatError",
    "Mem0HistoryMissingError",
    "Mem0HistorySchemaError",
    "Mem0HistoryUnreadableError",
    "Mem0VectorStoreError",
]


class ImportSourceError(MemoryLedgerError, ValueError):
    """The data to import cannot be read as what it should be; nothing was imported.
    ``path`` is the file or folder."""

    reason_code = "import_source_invalid"

    def __init__(self, message: str, *, path: str = "", reason_code: str | None = None) -> None:
        super().__init__(message, reason_code=reason_code)
        self.path = path


class Mem0HistoryMissingError(ImportSourceError, FileNotFoundError):
    """``--history-db`` names no file (a SQLite database is never created by reading)."""

    reason_code = "mem0_history_missing"


class Mem0HistoryUnreadableError(ImportSourceError):
    """The history file is not a SQLite database, or SQLite reports it damaged."""

    reason_code = "mem0_history_unreadable"


class Mem0HistorySchemaError(ImportSourceError):
    """The database has no ``history`` table of mem0's schema: the message names the
    columns expected and the ones missing."""

    reason_code = "mem0_history_schema_unknown"


class Mem0VectorStoreError(ImportSourceError):
    """mem0's local vector store (``--qdrant-path``) cannot be read: missing, locked by a
    running mem0, no such collection, or ``qdrant-client`` is not installed (the ``mem0``
    extra); the reason code says which (``mem0_vector_store_unreadable``,
    ``mem0_extra_not_installed``)."""

    reason_code = "mem0_vector_store_unreadable"


class InterchangeFormatError(ImportSourceError):
    """An interchange file is not one this version reads: a missing or unknown header
    (``interchange_version_unknown``), or a line that is not a memory of the format
    (``interchange_line_invalid``; ``line`` is its 1-based number)."""

    reason_code = "interchange_line_invalid"

    def __init__(
        self, message: str, *, path: str = "", line: int = 0, reason_code: str | None = None
    ) -> None:
        super().__init__(message, path=path, reason_code=reason_code)
        self.line = line
