"""Spans of the read and maintenance operations (issue 37 item 1): the LangGraph store's
``get`` and namespace listing, ``memory_map``, ``explain`` and the other tools of a running
MCP server, ``rotate_master_key``, a session's ``prune``, ``remember_success``,
``remember_failure`` and ``activate_candidate``; each one span after the conventions, the
namespace only as its keyed digest."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from opentelemetry.sdk.trace import ReadableSpan

from memory_ledger import AsyncMemoryEngine
from memory_ledger.commands import MemoryEngine
from memory_ledger.commands.telemetry.conventions import (
    CATCH_UP_DURATION,
    GEN_AI_OPERATION_NAME,
    LEDGER_POSITION,
    MEMORY_STORE_ID,
    NAMESPACE_DIGEST,
    OPERATIONS,
    PROJECTION_LAG_SECONDS,
    VECTOR_BACKLOG,
)
from tests.mcp_harness import CLIENT
from tests.telemetry.test_spans import NS, Traced, values


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[Traced]:
    with MemoryEngine.open(tmp_path / "store", sync=False) as engine:
        yield Traced(engine)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def check(traced: Traced, span: ReadableSpan, operation: str) -> None:
    """``span`` is ``operation``'s, after the conventions, naming no namespace part."""
    attributes = span.attributes or {}
    assert span.name == OPERATIONS[operation]  # type: ignore[index]
    assert attributes[GEN_AI_OPERATION_NAME] == OPERATIONS[operation]  # type: ignore[index]
    assert attributes[MEMORY_STORE_ID] == traced.engine.telemetry.store_name()
    text = values(span)
    for part in (NS.tenant, NS.principal, NS.scope_id):
        assert part not in text


def test_engine_and_session_operations_have_spans(traced: Traced) -> None:
    engine = traced.engine
    engine.remember(NS, "Alice plays the cello.")
    engine.memory_map(NS)
    session = engine.session(NS, "s1")
    session.remember_success("deploy", ["make"], "ran make deploy")
    session.remember_failure("deploy", "forgot the tag", ["git"])
    session.prune()
    digest = engine.telemetry.namespace_digest(NS)
    for operation in (
        "memory_map",
        "session.remember_success",
        "session.remember_failure",
        "session.prune",
    ):
        span = traced.one(operation)
        check(traced, span, operation)
        assert (span.attributes or {})[NAMESPACE_DIGEST] == digest


def test_forget_all_span_carries_the_position_of_its_last_event(traced: Traced) -> None:
    """``forget_all`` returns a count, yet its span names the ledger position of the last
    event it wrote (the last MemoryForgotten), as every other write span does; a
    ``forget_all`` that forgets nothing writes nothing and names no position."""
    engine = traced.engine
    engine.remember(NS, "Alice plays the cello.")
    engine.remember(NS, "Alice keeps a red kayak.")
    before = engine.head
    assert engine.forget_all(NS) == 2
    after = engine.head
    assert after > before
    (span,) = traced.spans("forget_all")
    check(traced, span, "forget_all")
    assert (span.attributes or {})[LEDGER_POSITION] == after
    assert engine.forget_all(NS) == 0
    assert engine.head == after
    nothing = traced.spans("forget_all")[1]
    assert LEDGER_POSITION not in (nothing.attributes or {})


def test_rotate_master_key_has_a_span(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "store", sync=False, master_key=os.urandom(32)) as engine:
        traced = Traced(engine)
        engine.remember(NS, "Alice plays the cello.")
        assert engine.rotate_master_key(os.urandom(32)) >= 1
        span = traced.one("rotate_master_key")
        check(traced, span, "rotate_master_key")
        assert NAMESPACE_DIGEST not in (span.attributes or {})


def test_langgraph_get_and_list_have_spans(traced: Traced) -> None:
    from memory_ledger.replay.langgraph_store import LedgerStore

    store = LedgerStore(traced.engine, NS)
    store.put(("notes",), "a", {"text": "Alice plays the cello."})
    assert store.get(("notes",), "a") is not None
    assert store.list_namespaces() == [("notes",)]
    for operation in ("langgraph.get", "langgraph.list_namespaces"):
        check(traced, traced.one(operation), operation)


@pytest.mark.anyio
async def test_a_running_mcp_server_traces_its_tools(tmp_path: Path) -> None:
    from memory_ledger.replay.mcp.server import MemoryMcpServer

    async with AsyncMemoryEngine.open(tmp_path / "store") as memory:
        traced = Traced(memory.engine)
        server = MemoryMcpServer(memory, namespace=NS)
        try:
            async with Client(server.mcp, client_info=CLIENT) as client:
                kept = await client.call_tool("remember", {"statement": "Alice plays the cello."})
                assert not kept.is_error
                memory_id = kept.structured_content["memory_id"]  # type: ignore[index]
                for tool, arguments in (
                    ("recall", {"query": "cello"}),
                    ("recall", {"query": "cello", "as_of": 1}),
                    ("explain", {"memory_id": memory_id}),
                    ("memory_map", {}),
                ):
                    done = await client.call_tool(tool, arguments)
                    assert not done.is_error, done
        finally:
            await server.aclose()
        digest = memory.engine.telemetry.namespace_digest(NS)
        for operation in ("remember", "session.recall", "recall", "explain", "memory_map"):
            span = traced.spans(operation)[-1]
            check(traced, span, operation)
            assert (span.attributes or {})[NAMESPACE_DIGEST] == digest


def test_catch_up_durations_lag_seconds_and_vector_backlog_are_metrics(traced: Traced) -> None:
    engine = traced.engine
    engine.remember(NS, "Alice plays the cello.")
    engine.catch_up()
    assert engine.pending_vectors() == 0  # no semantic channel
    points = traced.metrics()
    assert sum(p.count for p in points[CATCH_UP_DURATION]) >= 1
    assert [p.value for p in points[PROJECTION_LAG_SECONDS]] == [0.0]  # caught up
    assert [p.value for p in points[VECTOR_BACKLOG]] == [0]
    assert engine.telemetry.lag_seconds(engine) == 0.0


def test_the_erasure_of_one_namespace_carries_its_digest(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "store", sync=False, master_key=os.urandom(32)) as engine:
        traced = Traced(engine)
        engine.remember(NS, "Alice plays the cello.")
        engine.erase(NS.tenant, NS.principal, NS.scope_id, requested_by="dpo")
        span = traced.one("erase")
        check(traced, span, "erase")
        digest = engine.telemetry.namespace_digest(NS)
        assert (span.attributes or {})[NAMESPACE_DIGEST] == digest
