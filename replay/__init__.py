"""Re-running recorded things: session scripts, the LoCoMo converter, and the CLI.

Audit and replay API (each function takes an open :class:`commands.MemoryEngine`):

- :func:`rebuild_projections`, :func:`check_projections`, :func:`build_projections`:
  rebuild read models from the ledger; compare them with the live file by content digest.
- :func:`as_of`: the read models at an earlier position, recorded time or occurred time.
- :func:`explain`, :func:`render_mermaid`: the lineage of one memory item.
- :func:`filter_events`, :class:`EventFilter`: ledger events by namespace, session, turn,
  type, position and time.
- :func:`export_store`: events and every read model as Parquet or JSON Lines files.
- :func:`backup_store`, :func:`restore_store`: consistent backups while a host writes.
- :func:`store_stats`: counts, positions and file sizes.
- :func:`verify_store`: walk the ledger's hash chain.
"""

from memory_ledger.replay.backup import (
    BackupManifest,
    BackupReport,
    RestoreReport,
    backup_store,
    restore_store,
)
from memory_ledger.replay.errors import (
    BackupManifestError,
    NotABackupError,
    OutputExistsError,
    OutputNotADirectoryError,
)
from memory_ledger.replay.export import ExportReport, export_store
from memory_ledger.replay.filters import EVENT_TYPES, EventFilter, describe_event, filter_events
from memory_ledger.replay.lineage import (
    Lineage,
    UnknownMemoryError,
    explain,
    render_mermaid,
    stream_events,
)
from memory_ledger.replay.points import PointError, parse_point, parse_timestamp
from memory_ledger.replay.rebuild import (
    CheckReport,
    PositionOutOfRangeError,
    RebuildReport,
    TableDifference,
    build_projections,
    check_projections,
    rebuild_projections,
)
from memory_ledger.replay.stats import StoreStats, store_stats
from memory_ledger.replay.timetravel import AsOf, as_of, position_at
from memory_ledger.replay.verify import VerifyReport, verify_store

__all__ = [
    "EVENT_TYPES",
    "AsOf",
    "BackupManifest",
    "BackupManifestError",
    "BackupReport",
    "CheckReport",
    "EventFilter",
    "ExportReport",
    "Lineage",
    "NotABackupError",
    "OutputExistsError",
    "OutputNotADirectoryError",
    "PointError",
    "PositionOutOfRangeError",
    "RebuildReport",
    "RestoreReport",
    "StoreStats",
    "TableDifference",
    "UnknownMemoryError",
    "VerifyReport",
    "as_of",
    "backup_store",
    "build_projections",
    "check_projections",
    "describe_event",
    "explain",
    "export_store",
    "filter_events",
    "parse_point",
    "parse_timestamp",
    "position_at",
    "rebuild_projections",
    "render_mermaid",
    "restore_store",
    "store_stats",
    "stream_events",
    "verify_store",
]
