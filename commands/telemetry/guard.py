"""Telemetry never changes what an operation does: the one place a failing OpenTelemetry
call is reported.

The host's tracing and metrics set-up (its span processors, exporters, samplers, meter
provider) runs inside the engine's calls: a processor whose ``on_end`` raises would
otherwise turn a remember that was durably written into a raised error. So every call the
engine makes into the OpenTelemetry API (tracer and meter look-ups, span start and end,
attributes, status, instrument creation and records, observable callbacks) is made in
:mod:`~memory_ledger.commands.telemetry.spans` and
:mod:`~memory_ledger.commands.telemetry.instruments` inside a ``try`` whose ``except
Exception`` calls :func:`telemetry_failed`: the operation goes on (untraced, or with a
partial span) and returns what it would have returned without telemetry.

:func:`telemetry_failed` logs a warning on the ``memory_ledger.telemetry`` logger once per
process for each (call site, exception class): the class only, never the message (a
host's exception may quote an attribute, and attributes may hold content).
"""

from __future__ import annotations

import logging
import threading

__all__ = ["LOGGER_NAME", "telemetry_failed"]

LOGGER_NAME = "memory_ledger.telemetry"
"""The logger a failing OpenTelemetry call is reported on."""

_logger = logging.getLogger(LOGGER_NAME)
_reported: set[tuple[str, str]] = set()
_lock = threading.Lock()


def telemetry_failed(site: str, exc: BaseException) -> None:
    """Report that the OpenTelemetry call at ``site`` (``span.start``, ``span.end``,
    ``metrics.record``...) raised ``exc``: one warning per process per (site, exception
    class), naming the class only. Never raises."""
    cls = type(exc)
    name = cls.__qualname__
    if cls.__module__ != "builtins":
        name = f"{cls.__module__}.{name}"
    with _lock:
        if (site, name) in _reported:
            return
        _reported.add((site, name))
    try:
        _logger.warning(
            "OpenTelemetry call %s raised %s; the operation went on without it "
            "(reported once per process)",
            site,
            name,
        )
    except Exception:  # noqa: BLE001, S110 - a broken logging set-up is not the operation's
        pass
