"""The engine's metric instruments, one set per meter provider, shared by every engine that
uses the provider.

A meter provider hands out one instrument per name: an SDK ``Meter`` asked again for an
observable gauge it already has returns the first one and drops the new callbacks. So the
instruments of a provider are made once, here (:func:`shared_instruments`), and each
observable callback reads every engine registered with them (:meth:`SharedInstruments.register`)
that is still open: two engines on one provider (two stores, a store opened twice, a
reopen) each report their observations while open, told apart by ``gen_ai.memory.store.id``
and ``memory_ledger.engine.instance``. A closed or collected engine reports nothing and is
dropped at the next collection.

Every call into the API here is guarded (:mod:`~memory_ledger.commands.telemetry.guard`): a
provider whose meter or instruments raise leaves the engine without metrics, never failing
an operation, and a callback never raises into the host's metric reader.
"""

from __future__ import annotations

import itertools
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from memory_ledger.commands.telemetry.conventions import (
    CATCH_UP_DURATION,
    ENGINE_INSTANCE,
    INSTRUMENTATION_NAME,
    MEMORY_STORE_ID,
    OPERATION_DURATION,
    PROJECTION_LAG,
    PROJECTION_LAG_SECONDS,
    RECORDS_WRITTEN,
    VECTOR_BACKLOG,
)
from memory_ledger.commands.telemetry.guard import telemetry_failed

__all__ = ["SharedInstruments", "shared_instruments"]

_instances = itertools.count(1)
_registry_lock = threading.Lock()
_by_provider: weakref.WeakKeyDictionary[Any, SharedInstruments] = weakref.WeakKeyDictionary()
_unweakable: dict[int, tuple[Any, SharedInstruments]] = {}


def _appended(engine: Any) -> Any:
    return engine.appended


def _lag(engine: Any) -> Any:
    return engine.head - engine.projection_position


def _lag_seconds(engine: Any) -> Any:
    return engine.telemetry.lag_seconds(engine)


def _backlog(engine: Any) -> Any:
    return engine.pending_vectors()


class SharedInstruments:
    """The instruments of one meter provider and the engines they observe.

    ``duration`` and ``catch_up`` are the histograms (None when the provider could not make
    them); the observable counter and gauges read each registered open engine.

    :param provider: an OpenTelemetry ``MeterProvider`` (the SDK's or any other).
    """

    def __init__(self, provider: Any) -> None:
        self.duration: Any = None
        self.catch_up: Any = None
        self._engines: dict[int, tuple[weakref.ref[Any], dict[str, str | int]]] = {}
        self._lock = threading.Lock()
        try:
            from opentelemetry import metrics

            from memory_ledger.commands.telemetry.version import version

            self._observation = metrics.Observation
            meter = provider.get_meter(INSTRUMENTATION_NAME, version())
            self.duration = meter.create_histogram(
                OPERATION_DURATION, unit="s", description="Duration of memory operations"
            )
            self.catch_up = meter.create_histogram(
                CATCH_UP_DURATION, unit="s", description="Duration of projection catch-ups"
            )
            meter.create_observable_counter(
                RECORDS_WRITTEN,
                callbacks=[self._callback(_appended)],
                unit="{event}",
                description="Ledger events appended by each open engine",
            )
            meter.create_observable_gauge(
                PROJECTION_LAG,
                callbacks=[self._callback(_lag)],
                unit="{position}",
                description="Ledger positions each engine's read models are behind",
            )
            meter.create_observable_gauge(
                PROJECTION_LAG_SECONDS,
                callbacks=[self._callback(_lag_seconds)],
                unit="s",
                description="Seconds each engine's read models have been behind",
            )
            meter.create_observable_gauge(
                VECTOR_BACKLOG,
                callbacks=[self._callback(_backlog)],
                unit="{memory}",
                description="Retrievable memories still lacking a vector",
            )
        except Exception as e:  # noqa: BLE001 - telemetry never fails an operation
            telemetry_failed("metrics.instruments", e)

    def register(self, engine: object, store_id: str) -> None:
        """Observe ``engine`` (weakly referenced) until it closes or is collected; its
        observations carry ``store_id`` (when not empty) and a new engine instance number."""
        attributes: dict[str, str | int] = {ENGINE_INSTANCE: next(_instances)}
        if store_id:
            attributes[MEMORY_STORE_ID] = store_id
        with self._lock:
            self._engines[id(engine)] = (weakref.ref(engine), attributes)

    def unregister(self, engine: object) -> None:
        """Stop observing ``engine``."""
        with self._lock:
            known = self._engines.get(id(engine))
            if known is not None and known[0]() is engine:
                del self._engines[id(engine)]

    def engines(self) -> int:
        """How many engines are registered now (closed ones until the next collection)."""
        with self._lock:
            return len(self._engines)

    def _callback(self, read: Callable[[Any], Any]) -> Callable[[Any], Iterable[Any]]:
        def observe(options: Any) -> list[Any]:
            try:
                return self._observe(read)
            except Exception as e:  # noqa: BLE001 - a callback never raises into the reader
                telemetry_failed("metrics.observe", e)
                return []

        return observe

    def _observe(self, read: Callable[[Any], Any]) -> list[Any]:
        with self._lock:
            engines = list(self._engines.items())
        found: list[Any] = []
        for key, (reference, attributes) in engines:
            engine = reference()
            if engine is None or getattr(engine, "closed", False):
                with self._lock:
                    if self._engines.get(key, (None,))[0] is reference:
                        del self._engines[key]
                continue
            try:
                value = read(engine)
            except Exception:  # noqa: BLE001, S112 - closed meanwhile, ledger unreachable
                continue
            if isinstance(value, int | float) and not isinstance(value, bool):
                found.append(self._observation(value, attributes))
        return found


def shared_instruments(provider: Any) -> SharedInstruments:
    """The instruments of ``provider`` (None: the global meter provider), made on first use
    (a provider that cannot make them gives instruments that are all None)."""
    if provider is None:
        try:
            from opentelemetry import metrics

            provider = metrics.get_meter_provider()
        except Exception as e:  # noqa: BLE001 - telemetry never fails an operation
            telemetry_failed("metrics.provider", e)
            provider = None
    with _registry_lock:
        try:
            found = _by_provider.get(provider)
            weak = True
        except TypeError:  # not weakly referenceable (or unhashable): kept for the process
            pair = _unweakable.get(id(provider))
            found = pair[1] if pair is not None and pair[0] is provider else None
            weak = False
        if found is None:
            found = SharedInstruments(provider)
            if weak:
                _by_provider[provider] = found
            else:
                _unweakable[id(provider)] = (provider, found)
        return found
