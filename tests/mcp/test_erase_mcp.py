"""The MCP tools on a store where one namespace was erased (issue #16): the erased
namespace's server answers nothing and refuses writes with a typed tool error; another
namespace's server is untouched; no tool output holds the erased words."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

import memory_ledger
from memory_ledger.ledger.master_key import ENV_MASTER_KEY_FILE
from tests.mcp_harness import stdio_session

pytestmark = pytest.mark.anyio

ALICE = memory_ledger.Namespace("acme", "alice", "assistant")
BOB = memory_ledger.Namespace("acme", "bob", "assistant")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


async def test_mcp_tools_on_an_erased_namespace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    store = tmp_path / "store"
    with memory_ledger.open(store, master_key=key) as engine:
        alice_id = str(engine.remember(ALICE, "Alice only drinks zanzibarian espresso.").memory_id)
        engine.remember(BOB, "Bob likes quokkafruit tea.")
        engine.erase("acme", "alice")
    monkeypatch.setenv(ENV_MASTER_KEY_FILE, str(key))  # the child server reads it
    async with stdio_session(store, ALICE) as session:
        found = await session.call_tool("recall", {"query": "espresso", "k": 5})
        assert found.is_error and "erased" in text(found)  # its session cannot open
        assert "Traceback" not in text(found)
        then = await session.call_tool("recall", {"query": "espresso", "as_of": "2"})
        assert not then.is_error and then.structured_content["results"] == []
        told = await session.call_tool("explain", {"memory_id": alice_id})
        assert told.is_error and "Traceback" not in text(told)
        refused = await session.call_tool("remember", {"statement": "Alice is back."})
        assert refused.is_error and "erased" in text(refused)
        assert "Traceback" not in text(refused)
        mapped = await session.read_resource("memory://map")
        outputs = [text(found), text(then), text(told), text(refused), mapped.contents[0].text]
        assert not any("zanzibarian" in output for output in outputs), outputs
    async with stdio_session(store, BOB) as session:
        kept = await session.call_tool("recall", {"query": "quokkafruit tea", "k": 5})
        statements = [hit["statement"] for hit in kept.structured_content["results"]]
        assert statements == ["Bob likes quokkafruit tea."]
        assert "zanzibarian" not in text(kept)
