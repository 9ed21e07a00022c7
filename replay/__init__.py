"""Re-running recorded things, in wings: the audit library, session scripts and their
surfaces.

- :mod:`~memory_ledger.replay.audit`: the audit library (each function takes an open
  :class:`commands.MemoryEngine` or a store folder): rebuild and check the read models,
  as-of reads, lineage (explain), event filters, export, backup and restore, stats, the
  hash-chain verifier, moments and points in time, migrate. It never imports typer or rich.
- :mod:`~memory_ledger.replay.scripts`: session scripts (``run_script``) and the LoCoMo
  converter.
- The surfaces, on those two: :mod:`~memory_ledger.replay.mcp` (the MCP server),
  :mod:`~memory_ledger.replay.ui` (the read-only web UI),
  :mod:`~memory_ledger.replay.langgraph_store` (a LangGraph ``BaseStore``) and
  :mod:`~memory_ledger.replay.conformance` (the store conformance kit); and
  :mod:`~memory_ledger.replay.cli` (``memory-ledger``), on the surfaces.

This face keeps the audit library's names where hosts and docs import them
(``from memory_ledger.replay import explain``); each is the audit face's own name, looked up
there on first use (see :mod:`memory_ledger.ledger.lazy_exports`), so the table of which module
defines it is kept once, in :mod:`memory_ledger.replay.audit`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.replay.audit import (
        EVENT_TYPES,
        AsOf,
        BackupManifest,
        BackupManifestError,
        BackupReport,
        CheckReport,
        EventFilter,
        ExportReport,
        Lineage,
        NotABackupError,
        OutputExistsError,
        OutputNotADirectoryError,
        OutputUnwritableError,
        PastRecall,
        PointError,
        PositionOutOfRangeError,
        RebuildReport,
        RestoreReport,
        StoreStats,
        TableDifference,
        UnknownMemoryError,
        VerifyReport,
        as_of,
        backup_store,
        build_projections,
        check_projections,
        describe_event,
        explain,
        export_store,
        filter_events,
        parse_point,
        parse_timestamp,
        position_at,
        rebuild_projections,
        recall_point,
        render_mermaid,
        restore_store,
        store_stats,
        stream_events,
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

__getattr__, __dir__ = lazy_exports(__name__, dict.fromkeys(__all__, "memory_ledger.replay.audit"))
