"""Telemetry never changes what an operation does (docs/observability.md, "A failing
set-up"): a host's span processor, tracer or meter that raises leaves every operation's
result as it is untraced, and is reported once on the ``memory_ledger.telemetry`` logger by
its class only. And the observable metrics report every open engine of a meter provider.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.commands.telemetry.conventions import (
    ENGINE_INSTANCE,
    MEMORY_STORE_ID,
    PROJECTION_LAG,
    RECORDS_WRITTEN,
)
from memory_ledger.commands.telemetry.guard import LOGGER_NAME
from tests.conftest import make_item

NS = Namespace("acme-tenant", "alice-principal", "assistant-scope")
USER_TEXT = "Alice only drinks espresso."


_FRESH = itertools.count()


def fresh(name: str) -> type[Exception]:
    """An exception class of its own (failures are logged once per process and class, so
    each set-up raises classes no other test raised)."""
    return type(f"{name}{next(_FRESH)}", (Exception,), {})


class Processor:
    """A span processor raising ``error`` from ``on_start`` or ``on_end``, quoting the span's
    attributes (the message must never be logged)."""

    def __init__(self, where: str, error: type[Exception]) -> None:
        self.where, self.error = where, error

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        if self.where == "start":
            raise self.error(f"{USER_TEXT} {dict(span.attributes or {})}")

    def _on_ending(self, span: Any) -> None:
        pass

    def on_end(self, span: Any) -> None:
        if self.where == "end":
            raise self.error(f"{USER_TEXT} {dict(span.attributes or {})}")

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


class RaisingProvider:
    """A tracer or meter provider whose look-up raises ``error``."""

    def __init__(self, error: type[Exception]) -> None:
        self.error = error

    def get_tracer(self, *args: object, **kwargs: object) -> Any:
        raise self.error(USER_TEXT)

    def get_meter(self, *args: object, **kwargs: object) -> Any:
        raise self.error(USER_TEXT)


class RaisingInstrument:
    """A histogram whose ``record`` raises ``error``."""

    def __init__(self, error: type[Exception]) -> None:
        self.error = error

    def record(self, *args: object, **kwargs: object) -> None:
        raise self.error(USER_TEXT)


class HalfMeter:
    """A meter whose histograms raise when recording and whose observable instruments keep
    their callbacks (called by the test, as a reader would)."""

    def __init__(self, error: type[Exception]) -> None:
        self.error = error
        self.callbacks: list[Callable[[Any], Any]] = []

    def create_histogram(self, *args: object, **kwargs: object) -> RaisingInstrument:
        return RaisingInstrument(self.error)

    def create_observable_counter(self, *args: object, callbacks: Any = (), **kw: object) -> None:
        self.callbacks.extend(callbacks)

    def create_observable_gauge(self, *args: object, callbacks: Any = (), **kw: object) -> None:
        self.callbacks.extend(callbacks)


class HalfMeterProvider:
    """A meter provider handing out one :class:`HalfMeter`."""

    def __init__(self, error: type[Exception]) -> None:
        self.meter = HalfMeter(error)

    def get_meter(self, *args: object, **kwargs: object) -> HalfMeter:
        return self.meter


def processor_provider(where: str, error: type[Exception]) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(Processor(where, error))  # type: ignore[arg-type]
    return provider


SETUPS: dict[str, Callable[[], dict[str, Any]]] = {
    "on_end raises": lambda: {"tracer_provider": processor_provider("end", fresh("OnEnd"))},
    "on_start raises": lambda: {"tracer_provider": processor_provider("start", fresh("OnStart"))},
    "get_tracer raises": lambda: {"tracer_provider": RaisingProvider(fresh("Provider"))},
    "get_meter raises": lambda: {"meter_provider": RaisingProvider(fresh("Provider"))},
    "records raise": lambda: {"meter_provider": HalfMeterProvider(fresh("Record"))},
    "all of them": lambda: {
        "tracer_provider": processor_provider("end", fresh("OnEnd")),
        "meter_provider": RaisingProvider(fresh("Provider")),
    },
}


def run_operations(path: Path, settings: dict[str, Any] | None) -> list[object]:
    """Every traced operation on a fresh store (untraced when ``settings`` is None), each
    reduced to what does not depend on random ids: outcome or typed error, positions,
    statements."""
    seen: list[object] = []
    with MemoryEngine.open(path, sync=False) as engine:
        if settings is None:
            engine.telemetry.enabled = False
        else:
            engine.telemetry.content = True
            for name, value in settings.items():
                setattr(engine.telemetry, name, value)
        first = engine.remember(NS, USER_TEXT)
        seen.append((first.intent, first.position))
        batch = engine.remember_many(NS, ["Bob plays the oboe.", "Carol keeps bees."])
        seen.append((len(batch.outcomes), batch.position))
        seen.append(engine.pin(NS, first.memory_id or "").position)
        corrected = engine.correct(NS, "Alice only drinks green tea.", target=first.memory_id)
        seen.append(corrected.intent)
        seen.append([hit.statement for hit in engine.recall(NS, "what does Alice drink?")])
        seen.append(engine.forget(NS, "Bob plays the oboe.").intent)
        try:
            engine.remember(NS, "my key is sk-proj-Zq8vR2mK9pL4xWa7Tb3Nc6Yd1Hf5Jg0Ke2Lm4Pn8Qr")
        except MemoryLedgerError as e:
            seen.append(("refused", type(e).__name__, e.reason_code))
        session = engine.session(NS, "s1")
        session.extractor.provide(1, [make_item("Dave owns a red kayak.", subject="Dave")])  # type: ignore[attr-defined]
        session.observe_final_transcript(1, "user: I own a red kayak")
        seen.append([hit.statement for hit in session.recall("kayak")])
        session.finish()
        engine.catch_up()
        seen.append(engine.forget_all(NS))
        seen.append((engine.head, engine.appended))
    seen.append(engine.closed)
    return seen


@pytest.mark.parametrize("setup", list(SETUPS))
def test_a_failing_set_up_never_changes_an_operation(
    setup: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    untraced = run_operations(tmp_path / "untraced", None)
    with caplog.at_level(logging.WARNING, logger=LOGGER_NAME):
        traced = run_operations(tmp_path / "traced", SETUPS[setup]())
        again = run_operations(tmp_path / "again", SETUPS[setup]())
    assert traced == untraced
    assert again == untraced
    assert any(isinstance(item, tuple) and item[0] == "refused" for item in untraced)
    logged = [r for r in caplog.records if r.name == LOGGER_NAME]
    assert logged, "a failing set-up is reported"
    messages = [r.getMessage() for r in logged]
    assert len(messages) == len(set(messages)), "each (call, class) is reported once"
    for message in messages:
        assert "espresso" not in message and "Alice" not in message


def test_observable_callbacks_never_raise_into_the_reader(tmp_path: Path) -> None:
    provider = HalfMeterProvider(fresh("Record"))
    engine = MemoryEngine.open(tmp_path / "store", sync=False)
    engine.telemetry.meter_provider = provider
    engine.remember(NS, USER_TEXT)
    callbacks = provider.meter.callbacks
    assert len(callbacks) == 4
    observed = [list(callback(None)) for callback in callbacks]
    assert [len(o) for o in observed] == [1, 1, 1, 1]
    assert observed[0][0].value == engine.appended
    engine.close()
    assert [list(callback(None)) for callback in callbacks] == [[]] * 4


def collect(reader: InMemoryMetricReader, name: str) -> dict[int, tuple[object, float]]:
    """Each engine instance's (store id, value) of metric ``name`` now."""
    found: dict[int, tuple[object, float]] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == name:
                    for point in metric.data.data_points:
                        attributes = dict(point.attributes or {})
                        instance = attributes[ENGINE_INSTANCE]
                        assert isinstance(instance, int)
                        found[instance] = (attributes.get(MEMORY_STORE_ID), point.value)
    return found


def test_every_open_engine_of_a_provider_is_observed(tmp_path: Path) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    first = MemoryEngine.open(tmp_path / "one", sync=False)
    second = MemoryEngine.open(tmp_path / "two", sync=False)
    try:
        for engine, count in ((first, 2), (second, 3)):
            engine.telemetry.meter_provider = provider
            for i in range(count):
                engine.remember(NS, f"Fact number {i} of this store.")
        written = collect(reader, RECORDS_WRITTEN)
        assert sorted(value for _, value in written.values()) == sorted(
            [first.appended, second.appended]
        )
        stores = {store for store, _ in written.values()}
        assert stores == {first.telemetry.store_name(), second.telemetry.store_name()}
        assert len(collect(reader, PROJECTION_LAG)) == 2
        first_store, second_store = first.telemetry.store_name(), second.telemetry.store_name()
        first.close()
        after = collect(reader, RECORDS_WRITTEN)
        assert list(after.values()) == [(second_store, second.appended)]
        reopened = MemoryEngine.open(tmp_path / "one", sync=False)
        try:
            reopened.telemetry.meter_provider = provider
            reopened.remember(NS, "A fact after the reopen.")
            now = collect(reader, RECORDS_WRITTEN)
            assert reopened.telemetry.store_name() == first_store  # the same store, reopened
            assert sorted(now.values(), key=str) == sorted(
                [(second_store, second.appended), (first_store, reopened.appended)], key=str
            )
        finally:
            reopened.close()
        assert list(collect(reader, PROJECTION_LAG).values()) == [
            (second_store, second.head - second.projection_position)
        ]
    finally:
        first.close()
        second.close()
