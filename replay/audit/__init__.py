"""The audit library: read the ledger and the read models back, never write memory.

- :func:`rebuild_projections`, :func:`check_projections`, :func:`build_projections`:
  rebuild read models from the ledger; compare them with the live file by content digest.
- :func:`as_of`: the read models at an earlier position, recorded time or occurred time.
- :func:`recall_point`, :class:`PastRecall`: recall as of a point from the live projection's
  memory history (no fold; occurred time folds).
- :func:`explain`, :func:`render_mermaid`: the lineage of one memory item.
- :func:`filter_events`, :class:`EventFilter`: ledger events by namespace, session, turn,
  type, position and time.
- :func:`export_store`: events and every read model as Parquet or JSON Lines files.
- :func:`backup_store`, :func:`restore_store`: consistent backups while a host writes.
- :func:`store_stats`: counts, positions and file sizes.
- :func:`verify_store`, :func:`verify_path`, :func:`verify_ledger`: walk the ledger's hash
  chain (an open engine; a store folder, as ``memory-ledger verify``; the ledger alone,
  without the master key).

It never imports typer or rich (the surfaces above it do). The names below are imported on
first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.replay.audit.backup import (
        BackupManifest,
        BackupReport,
        RestoreReport,
        backup_store,
        restore_store,
    )
    from memory_ledger.replay.audit.errors import (
        BackupManifestError,
        NotABackupError,
        OutputExistsError,
        OutputNotADirectoryError,
        OutputUnwritableError,
    )
    from memory_ledger.replay.audit.export import ExportReport, export_store
    from memory_ledger.replay.audit.filters import (
        EVENT_TYPES,
        EventFilter,
        describe_event,
        filter_events,
    )
    from memory_ledger.replay.audit.lineage import (
        Lineage,
        UnknownMemoryError,
        explain,
        render_mermaid,
        stream_events,
    )
    from memory_ledger.replay.audit.past_recall import PastRecall, recall_point
    from memory_ledger.replay.audit.points import PointError, parse_point, parse_timestamp
    from memory_ledger.replay.audit.rebuild import (
        CheckReport,
        PositionOutOfRangeError,
        RebuildReport,
        TableDifference,
        build_projections,
        check_projections,
        rebuild_projections,
    )
    from memory_ledger.replay.audit.stats import StoreStats, store_stats
    from memory_ledger.replay.audit.timetravel import AsOf, as_of, position_at
    from memory_ledger.replay.audit.verify import (
        VerifyReport,
        verify_ledger,
        verify_path,
        verify_store,
    )

__all__ = [
    "AsOf",
    "BackupManifest",
    "BackupManifestError",
    "BackupReport",
    "CheckReport",
    "EVENT_TYPES",
    "EventFilter",
    "ExportReport",
    "Lineage",
    "NotABackupError",
    "OutputExistsError",
    "OutputNotADirectoryError",
    "OutputUnwritableError",
    "PastRecall",
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
    "recall_point",
    "render_mermaid",
    "restore_store",
    "store_stats",
    "stream_events",
    "verify_ledger",
    "verify_path",
    "verify_store",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "AsOf": "memory_ledger.replay.audit.timetravel",
        "BackupManifest": "memory_ledger.replay.audit.backup",
        "BackupManifestError": "memory_ledger.replay.audit.errors",
        "BackupReport": "memory_ledger.replay.audit.backup",
        "CheckReport": "memory_ledger.replay.audit.rebuild",
        "EVENT_TYPES": "memory_ledger.replay.audit.filters",
        "EventFilter": "memory_ledger.replay.audit.filters",
        "ExportReport": "memory_ledger.replay.audit.export",
        "Lineage": "memory_ledger.replay.audit.lineage",
        "NotABackupError": "memory_ledger.replay.audit.errors",
        "OutputExistsError": "memory_ledger.replay.audit.errors",
        "OutputNotADirectoryError": "memory_ledger.replay.audit.errors",
        "OutputUnwritableError": "memory_ledger.replay.audit.errors",
        "PastRecall": "memory_ledger.replay.audit.past_recall",
        "PointError": "memory_ledger.replay.audit.points",
        "PositionOutOfRangeError": "memory_ledger.replay.audit.rebuild",
        "RebuildReport": "memory_ledger.replay.audit.rebuild",
        "RestoreReport": "memory_ledger.replay.audit.backup",
        "StoreStats": "memory_ledger.replay.audit.stats",
        "TableDifference": "memory_ledger.replay.audit.rebuild",
        "UnknownMemoryError": "memory_ledger.replay.audit.lineage",
        "VerifyReport": "memory_ledger.replay.audit.verify",
        "as_of": "memory_ledger.replay.audit.timetravel",
        "backup_store": "memory_ledger.replay.audit.backup",
        "build_projections": "memory_ledger.replay.audit.rebuild",
        "check_projections": "memory_ledger.replay.audit.rebuild",
        "describe_event": "memory_ledger.replay.audit.filters",
        "explain": "memory_ledger.replay.audit.lineage",
        "export_store": "memory_ledger.replay.audit.export",
        "filter_events": "memory_ledger.replay.audit.filters",
        "parse_point": "memory_ledger.replay.audit.points",
        "parse_timestamp": "memory_ledger.replay.audit.points",
        "position_at": "memory_ledger.replay.audit.timetravel",
        "rebuild_projections": "memory_ledger.replay.audit.rebuild",
        "recall_point": "memory_ledger.replay.audit.past_recall",
        "render_mermaid": "memory_ledger.replay.audit.lineage",
        "restore_store": "memory_ledger.replay.audit.backup",
        "store_stats": "memory_ledger.replay.audit.stats",
        "stream_events": "memory_ledger.replay.audit.lineage",
        "verify_ledger": "memory_ledger.replay.audit.verify",
        "verify_path": "memory_ledger.replay.audit.verify",
        "verify_store": "memory_ledger.replay.audit.verify",
    },
)
