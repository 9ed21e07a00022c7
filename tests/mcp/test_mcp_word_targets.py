"""The MCP ``correct`` and ``forget`` tools follow the one rule of targets named by words
(issue 34 item 1): a model calling them without a target never changes another subject's
memory, is told which memories are near when none is clearly meant, and can retry with the
id; the tool descriptions tell it to pass ``target``."""

from __future__ import annotations

from typing import Any

import pytest

import memory_ledger
from tests.mcp_harness import inprocess_client

pytestmark = pytest.mark.anyio

ALICE = memory_ledger.Namespace("acme", "alice", "assistant")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if hasattr(block, "text"))


async def statements(client: Any) -> set[str]:
    found = await client.call_tool("recall", {"query": "Alice Bob allergic lives", "k": 10})
    return {hit["statement"] for hit in found.structured_content["results"]}


async def test_mcp_correct_and_forget_by_words_never_touch_another_subject(tmp_path: Any) -> None:
    async with inprocess_client(tmp_path / "store", ALICE) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        for name in ("correct", "forget", "pin"):
            said = " ".join((listed[name].description or "").split())
            assert "id recall returned" in said, name
        assert "subject" in listed["correct"].input_schema["properties"]

        peanuts = await client.call_tool("remember", {"statement": "Alice is allergic to peanuts."})
        lisbon = await client.call_tool("remember", {"statement": "Alice lives in Lisbon."})
        bob = await client.call_tool("correct", {"statement": "Bob is allergic to shellfish."})
        assert not bob.is_error, text(bob)
        assert bob.structured_content["replaced"] is None

        refused = await client.call_tool("forget", {"memory": "where Bob lives"})
        assert refused.is_error and "no memory clearly matches" in text(refused)
        assert lisbon.structured_content["memory_id"] in text(refused)  # retry with the id
        assert await statements(client) == {
            "Alice is allergic to peanuts.",
            "Alice lives in Lisbon.",
            "Bob is allergic to shellfish.",
        }

        fixed = await client.call_tool(
            "correct", {"statement": "Is allergic to walnuts.", "subject": "Alice"}
        )
        assert fixed.structured_content["replaced"] == peanuts.structured_content["memory_id"]
        gone = await client.call_tool("forget", {"memory": lisbon.structured_content["memory_id"]})
        assert not gone.is_error, text(gone)
        assert await statements(client) == {
            "Is allergic to walnuts.",
            "Bob is allergic to shellfish.",
        }
