"""The context features through the async session: workspace, compaction, knowledge."""

from __future__ import annotations

from pathlib import Path

import pytest

import memory_ledger
from memory_ledger.commands.context import (
    BoundKnowledge,
    ChatMessage,
    DeterministicSummarizer,
    KnowledgeBindingError,
)
from memory_ledger.commands.session import WorkspaceOptions
from tests.knowledge_helpers import PackageProvider, binding
from tests.workspace_helpers import write_tree

pytestmark = pytest.mark.anyio

NS = memory_ledger.Namespace("acme", "alice", "coder")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_workspace_and_compaction_through_the_async_session(tmp_path: Path) -> None:
    repo = write_tree(tmp_path / "repo", {"src/a.py": "def park_car():\n    pass\n"})
    async with memory_ledger.AsyncMemoryEngine.open(tmp_path / "store") as mem:
        session = await mem.session(
            NS, "s", workspace=WorkspaceOptions(repo), summarizer=DeterministicSummarizer()
        )
        async with session:
            assert (await session.wait_for_workspace(30)).state == "ready"
            hits = (await session.search_workspace("park car", turn_id=1)).hits
            assert [h.path for h in hits] == ["src/a.py"]
            assert (await session.workspace_status()).files_indexed == 1
            messages = [ChatMessage(role="user", content="## Goal\nShip src/a.py")]
            messages += [ChatMessage(role="assistant", content=f"m{i}") for i in range(6)]
            result = await session.compact(messages, force=True, max_context_tokens=10_000)
            assert result is not None and "Ship src/a.py" in result.summary
            context = await session.assemble_context(1, "park car")
            assert any(item.source == "workspace" for item in context.items)


async def test_a_bound_async_session_fails_closed(tmp_path: Path) -> None:
    provider = PackageProvider(binding())
    async with memory_ledger.AsyncMemoryEngine.open(tmp_path / "store") as mem:
        session = await mem.session(NS, "k", knowledge=BoundKnowledge(provider.binding, provider))
        async with session:
            assert len((await session.assemble_context(1, "deploy")).items) == 2
            provider.mode = "drifted_response"
            with pytest.raises(KnowledgeBindingError) as caught:
                await session.assemble_context(1, "deploy")
            assert caught.value.reason_code == "generation_drift"
