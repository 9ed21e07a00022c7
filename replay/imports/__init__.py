"""Imports: bring memories from elsewhere, history kept, and the interchange form.

- :func:`import_mem0`: mem0's history database (every ADD, UPDATE and DELETE at its own
  time), placed by the host's namespace or a mapping of mem0 user ids
  (:func:`read_qdrant_owners` reads whose each memory is from mem0's local vector store).
- :func:`export_interchange`, :func:`import_interchange`: one namespace's memories with
  their versions, times, evidence and status as a versioned JSON Lines file, and back into
  another store (compared by :func:`interchange_digest`; :func:`collect_memories` gives the
  memories in that form without writing a file).

Every import is idempotent (a rerun writes nothing) and resumable (each item is one command
whose session id derives from the item's own ids). The names below are imported on first
use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.replay.imports.errors import (
        ImportSourceError,
        InterchangeFormatError,
        Mem0HistoryMissingError,
        Mem0HistorySchemaError,
        Mem0HistoryUnreadableError,
        Mem0VectorStoreError,
    )
    from memory_ledger.replay.imports.interchange import (
        INTERCHANGE_VERSION,
        InterchangeReport,
        collect_memories,
        export_interchange,
        interchange_digest,
    )
    from memory_ledger.replay.imports.interchange_import import (
        InterchangeImportReport,
        import_interchange,
    )
    from memory_ledger.replay.imports.mem0 import Mem0ImportReport, import_mem0
    from memory_ledger.replay.imports.mem0_owners import Mem0Owner, read_qdrant_owners

__all__ = [
    "INTERCHANGE_VERSION",
    "ImportSourceError",
    "InterchangeFormatError",
    "InterchangeImportReport",
    "InterchangeReport",
    "Mem0HistoryMissingError",
    "Mem0HistorySchemaError",
    "Mem0HistoryUnreadableError",
    "Mem0ImportReport",
    "Mem0Owner",
    "Mem0VectorStoreError",
    "collect_memories",
    "export_interchange",
    "import_interchange",
    "import_mem0",
    "interchange_digest",
    "read_qdrant_owners",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "INTERCHANGE_VERSION": "memory_ledger.replay.imports.interchange",
        "ImportSourceError": "memory_ledger.replay.imports.errors",
        "InterchangeFormatError": "memory_ledger.replay.imports.errors",
        "InterchangeImportReport": "memory_ledger.replay.imports.interchange_import",
        "InterchangeReport": "memory_ledger.replay.imports.interchange",
        "Mem0HistoryMissingError": "memory_ledger.replay.imports.errors",
        "Mem0HistorySchemaError": "memory_ledger.replay.imports.errors",
        "Mem0HistoryUnreadableError": "memory_ledger.replay.imports.errors",
        "Mem0ImportReport": "memory_ledger.replay.imports.mem0",
        "Mem0Owner": "memory_ledger.replay.imports.mem0_owners",
        "Mem0VectorStoreError": "memory_ledger.replay.imports.errors",
        "collect_memories": "memory_ledger.replay.imports.interchange",
        "export_interchange": "memory_ledger.replay.imports.interchange",
        "import_interchange": "memory_ledger.replay.imports.interchange_import",
        "import_mem0": "memory_ledger.replay.imports.mem0",
        "interchange_digest": "memory_ledger.replay.imports.interchange",
        "read_qdrant_owners": "memory_ledger.replay.imports.mem0_owners",
    },
)
