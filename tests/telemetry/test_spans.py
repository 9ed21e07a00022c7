"""The memory operations' OpenTelemetry spans and metrics (issue 37, docs/observability.md),
read back with the SDK's in-memory span exporter and metric reader.

Each test gives the engine its own providers (``engine.telemetry.tracer_provider``), so no
global provider of this process is set; ``test_global_provider_and_no_import`` checks the
default (the host's global providers, and no import of OpenTelemetry without it) in a fresh
interpreter.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from memory_ledger import AsyncMemoryEngine
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.commands.telemetry import Telemetry, TelemetryUnavailableError
from memory_ledger.commands.telemetry.conventions import (
    CONTENT_WITHHELD,
    ERROR_TYPE,
    GEN_AI_OPERATION_NAME,
    LEDGER_POSITION,
    MEMORY_QUERY_TEXT,
    MEMORY_RECORD_ID,
    MEMORY_RECORDS,
    MEMORY_STORE_ID,
    NAMESPACE_DIGEST,
    OPERATION,
    OPERATION_DURATION,
    PROJECTION_LAG,
    REASON_CODE,
    RECORDS_RETURNED,
    RECORDS_WRITTEN,
)
from tests.conftest import REPO_ROOT, make_item

NS = Namespace("acme-tenant", "alice-principal", "assistant-scope")
REFUSED = "my openai key is sk-proj-Zq8vR2mK9pL4xWa7Tb3Nc6Yd1Hf5Jg0Ke2Lm4Pn8Qr"
"""A statement the door refuses (``secret_detected``); the key is its secret part."""
SECRET_PART = "sk-proj-Zq8vR2mK9pL4xWa7Tb3Nc6Yd1Hf5Jg0Ke2Lm4Pn8Qr"
REDACTED_QUERY = "what is Alice's wifi? password: Hunter2!Wq9zXk"
"""A query the door redacts (the password after the keyword)."""
BARE_PASSWORD = "Zq8!vR2#mK9pL4xW"
"""A whole text the door refuses as a field (a generated password on its own)."""


class Traced:
    """An engine with its own tracer and meter providers, and what they recorded."""

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])
        attach(engine.telemetry, self)

    def spans(self, operation: str | None = None) -> list[ReadableSpan]:
        spans = list(self.exporter.get_finished_spans())
        if operation is None:
            return spans
        return [s for s in spans if (s.attributes or {}).get(OPERATION) == operation]

    def one(self, operation: str) -> ReadableSpan:
        found = self.spans(operation)
        assert len(found) == 1, [s.name for s in self.spans()]
        return found[0]

    def metrics(self) -> dict[str, list[Any]]:
        points: dict[str, list[Any]] = {}
        data = self.reader.get_metrics_data()
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    points.setdefault(metric.name, []).extend(metric.data.data_points)
        return points


def attach(telemetry: Telemetry, traced: Traced) -> None:
    telemetry.tracer_provider = traced.tracer_provider
    telemetry.meter_provider = traced.meter_provider


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[Traced]:
    with MemoryEngine.open(tmp_path / "store", sync=False) as engine:
        yield Traced(engine)


def values(span: ReadableSpan) -> str:
    """Every attribute value and the status description of ``span``, as one text."""
    parts = [str(v) for v in (span.attributes or {}).values()]
    parts.append(span.status.description or "")
    parts.extend(str(v) for event in span.events for v in (event.attributes or {}).values())
    return "\n".join(parts)


def every_operation(engine: MemoryEngine) -> str:
    """Run each traced operation once; return the id of the first memory remembered."""
    first = engine.remember(NS, "Alice only drinks espresso.")
    engine.remember_many(NS, ["Bob plays the oboe.", "Carol keeps bees."])
    engine.pin(NS, first.memory_id or "")
    engine.correct(NS, "Alice only drinks green tea.", target=first.memory_id)
    engine.recall(NS, "what does Alice drink?")
    engine.forget(NS, "Bob plays the oboe.")
    session = engine.session(NS, "s1")
    session.extractor.provide(1, [make_item("Dave owns a red kayak.", subject="Dave")])  # type: ignore[attr-defined]
    session.observe_final_transcript(1, "user: I own a red kayak")
    session.recall("kayak")
    session.finish()
    engine.forget_all(NS)
    return str(first.memory_id)


GEN_AI_NAMES = {
    "remember": "create_memory",
    "remember_many": "create_memory",
    "pin": "update_memory",
    "correct": "update_memory",
    "recall": "search_memory",
    "forget": "delete_memory",
    "session.turn": "create_memory",
    "session.recall": "search_memory",
    "session.finish": "update_memory",
    "forget_all": "delete_memory",
}


def test_each_operation_is_one_span_named_by_the_genai_memory_conventions(
    traced: Traced,
) -> None:
    first = every_operation(traced.engine)
    spans = traced.spans()
    assert sorted(str((s.attributes or {})[OPERATION]) for s in spans) == sorted(GEN_AI_NAMES)
    store_id = traced.engine.telemetry.store_name()
    assert len(store_id) == 36  # the ledger's random store id (a UUID)
    digests = set()
    for span in spans:
        attributes = span.attributes or {}
        operation = str(attributes[OPERATION])
        assert span.name == GEN_AI_NAMES[operation]
        assert attributes[GEN_AI_OPERATION_NAME] == GEN_AI_NAMES[operation]
        assert attributes[MEMORY_STORE_ID] == store_id
        assert span.status.status_code == StatusCode.UNSET
        assert span.parent is None  # no host span here
        assert isinstance(attributes[LEDGER_POSITION], int)  # forget_all's too
        digests.add(attributes[NAMESPACE_DIGEST])
    assert digests == {traced.engine.telemetry.namespace_digest(NS)}
    remembered = traced.spans("remember")[0].attributes or {}
    assert remembered[MEMORY_RECORD_ID] == first
    recalled = traced.one("recall").attributes or {}
    assert recalled[RECORDS_RETURNED] >= 1


def test_content_is_off_by_default(traced: Traced) -> None:
    every_operation(traced.engine)
    for span in traced.spans():
        attributes = span.attributes or {}
        assert MEMORY_QUERY_TEXT not in attributes
        assert MEMORY_RECORDS not in attributes
        text = values(span)
        for word in ("espresso", "oboe", "kayak", "Alice", "what does"):
            assert word not in text, (span.name, word)


def test_content_on_never_carries_a_secret(traced: Traced) -> None:
    engine = traced.engine
    engine.telemetry.content = True
    engine.remember(NS, "Alice only drinks espresso.")
    with pytest.raises(MemoryLedgerError) as refused:
        engine.remember(NS, REFUSED)
    assert refused.value.reason_code == "secret_detected"
    engine.recall(NS, REDACTED_QUERY)
    engine.recall(NS, BARE_PASSWORD)
    texts = [values(span) for span in traced.spans()]
    assert texts and not any(SECRET_PART in t or "Hunter2!Wq9zXk" in t for t in texts)
    assert not any(BARE_PASSWORD in t for t in texts)
    first, refusal, redacted, bare = traced.spans()
    records = json.loads(str((first.attributes or {})[MEMORY_RECORDS]))
    assert records[0]["content"] == "Alice only drinks espresso."
    assert (refusal.attributes or {})[ERROR_TYPE] == "secret_detected"
    assert MEMORY_RECORDS not in (refusal.attributes or {})
    query = str((redacted.attributes or {})[MEMORY_QUERY_TEXT])
    assert query.startswith("what is Alice's wifi?") and "[REDACTED:" in query
    assert MEMORY_QUERY_TEXT not in (bare.attributes or {})
    assert (bare.attributes or {})[CONTENT_WITHHELD] == "secret_detected"


def test_errors_set_the_status_to_the_reason_code_never_the_message(traced: Traced) -> None:
    engine = traced.engine
    with pytest.raises(MemoryLedgerError) as too_many:
        engine.recall(NS, "espresso secret-words-here", k=10_000_000)
    with pytest.raises(MemoryLedgerError) as unknown:
        engine.forget(NS, "nothing-matches-these-words zebra")
    for error, span in zip((too_many.value, unknown.value), traced.spans(), strict=True):
        attributes = span.attributes or {}
        assert span.status.status_code == StatusCode.ERROR
        assert span.status.description == error.reason_code
        assert attributes[ERROR_TYPE] == attributes[REASON_CODE] == error.reason_code
        assert span.events == ()  # no exception event: its message may quote user text
        assert "secret-words-here" not in values(span) and "zebra" not in values(span)
    durations = traced.metrics()[OPERATION_DURATION]
    assert {p.attributes.get(ERROR_TYPE) for p in durations} == {
        too_many.value.reason_code,
        unknown.value.reason_code,
    }


def test_spans_nest_under_the_hosts_span(traced: Traced) -> None:
    engine = traced.engine
    tracer = traced.tracer_provider.get_tracer("host")
    session = engine.session(NS, "nested")
    session.extractor.provide(1, [make_item("Erin rides a blue bike.", subject="Erin")])  # type: ignore[attr-defined]
    with tracer.start_as_current_span("agent turn") as host:
        session.observe_final_transcript(1, "user: I ride a blue bike")
        with tracer.start_as_current_span("agent wrap-up") as wrap_up:
            report = session.finish()
    turn, finish = traced.one("session.turn"), traced.one("session.finish")
    assert turn.parent is not None and turn.parent.span_id == host.get_span_context().span_id
    assert finish.parent is not None
    assert finish.parent.span_id == wrap_up.get_span_context().span_id
    assert finish.context.trace_id == host.get_span_context().trace_id
    assert (finish.attributes or {})[LEDGER_POSITION] == report.position


def test_async_operations_nest_under_the_hosts_span(tmp_path: Path) -> None:
    async def main() -> tuple[Traced, int]:
        async with AsyncMemoryEngine.open(tmp_path / "store", sync=False) as mem:
            traced = Traced(mem.engine)
            tracer = traced.tracer_provider.get_tracer("host")
            with tracer.start_as_current_span("async host") as host:
                await mem.remember(NS, "Frank keeps a tortoise.")
                await mem.recall(NS, "tortoise")
            return traced, host.get_span_context().span_id

    traced, host_id = asyncio.run(main())
    for operation in ("remember", "recall"):
        span = traced.one(operation)
        assert span.parent is not None and span.parent.span_id == host_id


def test_metrics_count_the_records_written_and_time_each_operation(traced: Traced) -> None:
    every_operation(traced.engine)
    points = traced.metrics()
    assert sum(p.value for p in points[RECORDS_WRITTEN]) == traced.engine.appended
    traced.engine.catch_up()
    assert [p.value for p in traced.metrics()[PROJECTION_LAG]] == [0]
    timed = {p.attributes[OPERATION]: p.count for p in points[OPERATION_DURATION]}
    assert timed == dict.fromkeys(GEN_AI_NAMES, 1)


@settings(max_examples=25, deadline=None)
@given(
    parts=st.tuples(*[st.text(st.characters(categories=("L", "N")), min_size=3, max_size=12)] * 3)
)
def test_the_namespace_is_only_ever_a_keyed_digest(parts: tuple[str, str, str]) -> None:
    namespace = Namespace(*parts)
    key_a, key_b = b"a" * 32, b"b" * 32
    one, same = Telemetry(namespace_key=key_a), Telemetry(namespace_key=key_a)
    other = Telemetry(namespace_key=key_b)
    digest = one.namespace_digest(namespace)
    assert digest == same.namespace_digest(namespace) != other.namespace_digest(namespace)
    assert len(digest) == 32 and all(part not in digest for part in parts if len(part) > 3)
    shifted = Namespace(parts[0] + parts[1][:1], parts[1][1:] or "x", parts[2])
    assert one.namespace_digest(shifted) != digest  # parts are length-prefixed


def test_namespace_names_never_reach_a_span(traced: Traced) -> None:
    traced.engine.telemetry.content = True  # even with content on
    every_operation(traced.engine)
    for span in traced.spans():
        text = values(span)
        assert not any(part in text for part in (NS.tenant, NS.principal, NS.scope_id))


def test_off_means_no_span_and_on_without_the_api_is_refused(
    traced: Traced, monkeypatch: pytest.MonkeyPatch
) -> None:
    traced.engine.telemetry.enabled = False
    traced.engine.remember(NS, "Gina paints murals.")
    assert traced.spans() == []
    monkeypatch.setitem(sys.modules, "opentelemetry.trace", None)
    with pytest.raises(TelemetryUnavailableError) as missing:
        Telemetry(enabled=True)
    assert missing.value.reason_code == "telemetry_unavailable"
    with pytest.raises(MemoryLedgerError):
        Telemetry(namespace_key=b"short")


_PROBE = """
import json, sys
import memory_ledger
ns = memory_ledger.Namespace("t", "p", "s")
report = {}
with memory_ledger.open(sys.argv[1], sync=False) as mem:
    mem.remember(ns, "Hana sails a yawl.")
    mem.recall(ns, "yawl")
    report["loaded_before"] = "opentelemetry" in sys.modules
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)  # the host's, global
    mem.remember(ns, "Hana sails a ketch.")
    mem.recall(ns, "ketch")
    report["names"] = [s.name for s in exporter.get_finished_spans()]
print(json.dumps(report))
"""


def test_global_provider_and_no_import(tmp_path: Path) -> None:
    """Without OpenTelemetry loaded by the host, the engine imports none of it; once the
    host sets a global provider, the same engine's operations are traced through it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO_ROOT), *sys.path])}
    done = subprocess.run(
        [sys.executable, "-c", _PROBE, str(tmp_path / "store")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        timeout=120,
    )
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"loaded_before": False, "names": ["create_memory", "search_memory"]}


def test_the_surfaces_emit_the_same_spans(traced: Traced) -> None:
    """The MCP server's commands go through ``DirectCommands`` (with its own session
    prefix), the LangGraph store's puts through ``apply_batch`` and its search ranks
    memories itself: each is one span with the conventions' names."""
    from memory_ledger.commands.engine import DirectCommands
    from memory_ledger.replay.langgraph_store import LedgerStore

    engine = traced.engine
    direct = DirectCommands(engine, "mcp-")
    remembered = direct.remember(NS, "Ivy grows basil.")
    direct.pin(NS, str(remembered.memory_id))
    store = LedgerStore(engine, NS)
    store.put(("notes",), "n1", {"text": "Jack keeps a ferret."})
    assert store.search(("notes",), query="ferret")
    names = [(s.name, (s.attributes or {})[OPERATION]) for s in traced.spans()]
    assert names == [
        ("create_memory", "remember"),
        ("update_memory", "pin"),
        ("update_memory", "apply_batch"),
        ("search_memory", "langgraph.search"),
    ]
    search = traced.one("langgraph.search").attributes or {}
    assert search[RECORDS_RETURNED] == 1 and MEMORY_QUERY_TEXT not in search
