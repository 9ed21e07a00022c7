"""``memory.recall_max_k``: a recall asked for more results than the setting allows is
refused with ``RecallLimitError`` (``k_too_large``, naming the maximum and the setting) on
every surface that shares :func:`~memory_ledger.commands.recall.policy.check_recall_k`
(engine sync and async, session recall, as-of recall), never cut silently to the maximum;
the LangGraph store's ``search(limit=...)`` keeps LangGraph's contract (up to ``limit``).
The CLI and MCP surfaces are tested in their wings (``tests/cli/test_cli_recall.py``,
``tests/mcp/test_mcp_server.py``)."""

from __future__ import annotations

import asyncio
import pickle
from pathlib import Path

import pytest

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.aio import AsyncMemoryEngine
from memory_ledger.commands.config import ConfigError, MemoryConfig
from memory_ledger.commands.recall import RecallLimitError, RecallPolicy
from memory_ledger.replay import as_of
from memory_ledger.replay.langgraph_store import LedgerStore

NS = Namespace("acme", "alice", "assistant")
MAX_K = 7


def fill(engine: MemoryEngine, count: int = 12) -> None:
    engine.remember_many(NS, [f"Alice visited museum number {i} in Vienna." for i in range(count)])


def assert_refused(error: RecallLimitError, asked: int, parameter: str = "k") -> None:
    assert error.reason_code == "k_too_large"
    assert isinstance(error, ValueError)
    assert error.parameter == parameter
    assert (error.requested, error.maximum) == (asked, MAX_K)
    assert f"maximum of {MAX_K}" in str(error) and "recall_max_k" in str(error)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    folder = tmp_path / "store"
    with MemoryEngine.open(folder, config=MemoryConfig(recall_max_k=MAX_K)) as engine:
        fill(engine)
    return folder


def test_engine_recall_refuses_k_above_the_maximum_sync_and_async(store: Path) -> None:
    config = MemoryConfig(recall_max_k=MAX_K)
    with MemoryEngine.open(store, config=config) as engine:
        head = engine.head
        for asked in (MAX_K + 1, 1000):
            with pytest.raises(RecallLimitError) as refused:
                engine.recall(NS, "museum", asked)
            assert_refused(refused.value, asked)
        with pytest.raises(RecallLimitError) as by_policy:
            engine.recall(NS, "museum", policy=RecallPolicy(limit=500))
        assert_refused(by_policy.value, 500, "limit")
        assert len(engine.recall(NS, "museum", MAX_K).results) == MAX_K  # the maximum itself
        assert len(engine.recall(NS, "museum", 3).results) == 3
        assert engine.head == head  # a refused recall recorded nothing

    async def run() -> RecallLimitError:
        async with AsyncMemoryEngine.open(store, config=config) as mem:
            assert len((await mem.recall(NS, "museum", MAX_K)).results) == MAX_K
            with pytest.raises(RecallLimitError) as refused:
                await mem.recall(NS, "museum", 1000)
            return refused.value

    assert_refused(asyncio.run(run()), 1000)


def test_session_recall_refuses_k_above_the_maximum(store: Path) -> None:
    with MemoryEngine.open(store, config=MemoryConfig(recall_max_k=MAX_K)) as engine:
        session = engine.session(NS, "chat-1")
        for call in (
            lambda: session.recall("museum", k=MAX_K + 1),
            lambda: session.recall_similar("museum", k=MAX_K + 1),
        ):
            with pytest.raises(RecallLimitError) as refused:
                call()
            assert_refused(refused.value, MAX_K + 1)
        assert len(session.recall("museum", k=MAX_K).results) == MAX_K


def test_as_of_recall_refuses_k_above_the_maximum(store: Path) -> None:
    with MemoryEngine.open(store, config=MemoryConfig(recall_max_k=MAX_K)) as engine:
        with as_of(engine, engine.head) as then:
            assert then.recall_max_k == MAX_K
            with pytest.raises(RecallLimitError) as refused:
                then.recall(NS, "museum", 100)
            assert_refused(refused.value, 100)
            assert len(then.recall(NS, "museum", MAX_K).results) == MAX_K


def test_the_error_pickles_and_the_setting_is_checked_against_recall_k() -> None:
    error = pickle.loads(pickle.dumps(RecallLimitError(80, MAX_K, parameter="limit")))
    assert_refused(error, 80, "limit")
    with pytest.raises(ConfigError, match="recall_k"):
        MemoryConfig(recall_k=10, recall_max_k=MAX_K)


def test_langgraph_search_returns_up_to_limit_whatever_the_setting(tmp_path: Path) -> None:
    """LangGraph's stores return up to ``limit`` items (``InMemoryStore``,
    ``PostgresStore``): the ledger's store does too, past ``recall_max_k``."""
    config = MemoryConfig(recall_max_k=MAX_K)
    with MemoryEngine.open(tmp_path / "store", config=config) as engine:
        store = LedgerStore(engine, NS)
        for i in range(12):
            store.put(("trips",), f"t{i}", {"text": f"museum number {i} in Vienna"})
        assert len(store.search(("trips",), query="museum", limit=10)) == 10
        assert len(store.search(("trips",), limit=10)) == 10
