"""Maintenance health of the semantic channel: vector coverage, indexer lag, failures and
the last completed refresh (after seed 000, "Semantic recall and refresh": hosts read
``memory_maintenance_health()``).

:func:`maintenance_health` reports one model: the engine's attached provider (with the
in-process indexer's failure counters and last completed refresh), or, from a process
without a provider (``memory-ledger stats``), each model that has vectors in the
projection file (failures are then unknown: they live in the process that indexes).

Figures:

- ``coverage``: per vector field (``statement``, ``source``), eligible retrievable
  memories and those with a vector of the current revision;
- ``pending``: (memory, field) pairs still lacking a vector;
- ``lag_positions``: how far the vectors trail the ledger, in positions: the ledger head
  minus the position just before the oldest change still lacking a vector (0 when nothing
  is pending and the projections are at the head); it also counts events the projections
  have not read yet;
- ``failures`` / ``consecutive_failures`` / ``last_error``: failed provider batches of the
  in-process indexer;
- ``last_refresh_at`` / ``last_refresh_position``: when the indexer last found every
  retrievable memory embedded, and the projection position then; from a process without
  an indexer, the time the newest vector was written.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

import msgspec

from memory_ledger.projections.vectors import FIELDS, VectorStore

__all__ = ["FieldCoverage", "MaintenanceHealth", "maintenance_health"]

HealthState = Literal["off", "ready", "behind", "degraded"]


class FieldCoverage(msgspec.Struct, frozen=True, kw_only=True):
    """Vectors of one field: ``eligible`` retrievable memories, ``embedded`` of them with a
    vector of their current revision."""

    field: str
    eligible: int
    embedded: int

    @property
    def coverage(self) -> float:
        """``embedded / eligible`` (1.0 when nothing is eligible)."""
        return self.embedded / self.eligible if self.eligible else 1.0


class MaintenanceHealth(msgspec.Struct, frozen=True, kw_only=True):
    """The semantic channel's maintenance state (see the module docstring).

    ``state``: ``off`` (no model), ``ready`` (nothing pending), ``behind`` (vectors
    pending, the indexer not failing), ``degraded`` (the last batch failed).
    """

    state: HealthState
    model: str | None
    ledger_head: int
    projection_position: int
    coverage: tuple[FieldCoverage, ...] = ()
    pending: int = 0
    lag_positions: int = 0
    failures: int | None = None
    consecutive_failures: int | None = None
    last_error: str | None = None
    last_refresh_at: datetime | None = None
    last_refresh_position: int | None = None


def maintenance_health(
    vectors: VectorStore | None,
    model_key: str | None,
    *,
    ledger_head: int,
    projection_position: int,
    fields: tuple[str, ...] = FIELDS,
    failures: int | None = None,
    consecutive_failures: int | None = None,
    last_error: str | None = None,
    last_refresh: tuple[datetime, int] | None = None,
) -> MaintenanceHealth:
    """Measure one model's vectors in ``vectors`` (call with the projection lock held).

    :param fields: the fields the indexer maintains (sources only with a transcript
        reader).
    :param last_refresh: the indexer's last completed refresh (UTC time, position); None
        reports the time the newest vector was written instead.
    """
    if vectors is None or model_key is None:
        return MaintenanceHealth(
            state="off",
            model=None,
            ledger_head=ledger_head,
            projection_position=projection_position,
        )
    totals = vectors.store_coverage(model_key)
    coverage = tuple(
        FieldCoverage(field=f, eligible=totals[f][0], embedded=totals[f][1]) for f in fields
    )
    pending = sum(c.eligible - c.embedded for c in coverage)
    oldest = vectors.oldest_pending_position(model_key, fields) if pending else None
    covered_to = projection_position if oldest is None else oldest - 1
    lag = max(0, ledger_head - covered_to)
    if last_refresh is not None:
        refreshed_at: datetime | None = last_refresh[0]
        refreshed_position: int | None = last_refresh[1]
    else:
        refreshed_at, refreshed_position = vectors.last_embedded_at(model_key), None
    state: HealthState = "ready" if pending == 0 else "behind"
    if consecutive_failures:
        state = "degraded"
    return MaintenanceHealth(
        state=state,
        model=model_key,
        ledger_head=ledger_head,
        projection_position=projection_position,
        coverage=coverage,
        pending=pending,
        lag_positions=lag,
        failures=failures,
        consecutive_failures=consecutive_failures,
        last_error=last_error,
        last_refresh_at=refreshed_at,
        last_refresh_position=refreshed_position,
    )
