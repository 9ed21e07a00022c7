"""OpenTelemetry spans and metrics of the memory operations (issue 37; docs/observability.md).

The engine's entry points (remember, remember_many, apply_batch, correct, pin, forget,
forget_all, erase, recall; a session's turn, recall and finish) each emit one span named and
attributed by OpenTelemetry's GenAI memory conventions (:mod:`.conventions` cites them), with
this engine's extras under ``memory_ledger.*``. The optional extra ``otel`` installs the API
only; the host brings the SDK and exporters. Nothing here imports OpenTelemetry until the
host's process has (:class:`Telemetry`), and nothing sets a provider.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.telemetry.content import door_text
    from memory_ledger.commands.telemetry.options import Telemetry, TelemetryUnavailableError
    from memory_ledger.commands.telemetry.spans import traced

__all__ = ["Telemetry", "TelemetryUnavailableError", "door_text", "traced"]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Telemetry": "memory_ledger.commands.telemetry.options",
        "TelemetryUnavailableError": "memory_ledger.commands.telemetry.options",
        "door_text": "memory_ledger.commands.telemetry.content",
        "traced": "memory_ledger.commands.telemetry.spans",
    },
)
