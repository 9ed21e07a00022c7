"""``memory-ledger mcp`` with a real MCP client (the SDK's ClientSession): over stdio (a child
process) and over streamable HTTP on 127.0.0.1 with bearer tokens."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import ClientSession, MCPError
from mcp_types import Implementation

import memory_ledger
from memory_ledger import replay
from memory_ledger.ledger.events import ExplicitCommandApplied, MemoryForgotten, RecallServed
from memory_ledger.replay.mcp import new_token
from memory_ledger.replay.mcp.server import READ_FLUSH_SECONDS, _stdio_line
from memory_ledger.replay.mcp.tokens import (
    TokenFileError,
    TokenRegistry,
    hash_token,
    token_entry_toml,
)
from tests.mcp_harness import (
    HttpServer,
    RawStdio,
    http_session,
    inprocess_client,
    stdio_session,
)

pytestmark = pytest.mark.anyio

ALICE = memory_ledger.Namespace("acme", "alice", "assistant")
BOB = memory_ledger.Namespace("acme", "bob", "assistant")
TOOLS = {
    "remember",
    "remember_many",
    "recall",
    "forget",
    "correct",
    "pin",
    "explain",
    "memory_map",
}
API_KEY = "sk-proj-T3stK3yAAAABBBBCCCCDDDDEEEEFFFFGGGG1234"
"""A client that names itself after its API key (the tester's case)."""
MISTYPED = [
    ("recall", {"query": "cat", "k": "five"}, "argument 'k' must be an integer", 'string "five"'),
    ("recall", {"query": "cat", "k": 1.5}, "argument 'k' must be an integer", "number 1.5"),
    ("recall", {"query": "cat", "k": True}, "argument 'k' must be an integer", "boolean true"),
    ("recall", {"query": 123}, "argument 'query' must be a string", "number 123"),
    # Integral floats past 64 bits: the SDK's validation answered its own multi-line text.
    ("recall", {"query": "cat", "k": 1e20}, "argument 'k' must be an integer", "number 1e+20"),
    ("recall", {"query": "cat", "k": -1e20}, "argument 'k' must be an integer", "number -1e+20"),
    ("recall", {"query": "cat", "as_of": 1e20}, "'as_of' must be an integer or", "number 1e+20"),
    ("recall", {"query": "cat", "as_of": 1e308}, "'as_of' must be an integer", "number 1e+308"),
    ("recall", {"query": "cat", "about": 7}, "'about' must be a string or null", "number 7"),
    ("remember", {"statement": ["a"]}, "'statement' must be a string", "an array"),
    ("forget", {"memory": {"id": 1}}, "'memory' must be a string", "an object"),
    (
        "remember_many",
        {"statements": ["Alice likes tea.", 5]},
        "'statements' must be an array of items that are each a string",
        "an array whose item 1 is the number 5",
    ),
]
"""Tool calls with an argument of the wrong type: the refusal names the argument, the
expected type and what was given."""


def assert_refused_in_one_line(result: Any, tool: str, *parts: str) -> None:
    """A tool error of one line naming ``tool`` and ``parts``, with no validator's dump."""
    said = text(result)
    assert result.is_error, said
    assert "\n" not in said and said.startswith(f"{tool}: ") and said.endswith("nothing was done")
    for part in parts:
        assert part in said, said
    assert "pydantic" not in said.lower() and "validation error" not in said.lower()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content)


async def statements(session: ClientSession, query: str) -> list[str]:
    result = await session.call_tool("recall", {"query": query, "k": 10})
    assert not result.is_error, text(result)
    return [hit["statement"] for hit in result.structured_content["results"]]


def ledger(store: Path) -> list[Any]:
    with memory_ledger.open(store, create=False) as engine:
        return [event for _, event in replay.filter_events(engine)]


# stdio ------------------------------------------------------------------------------------


async def test_stdio_tools_resource_and_lineage(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with stdio_session(store, ALICE) as session:
        listed = await session.list_tools()
        assert {tool.name for tool in listed.tools} == TOOLS
        recall_schema = next(t for t in listed.tools if t.name == "recall").input_schema
        assert set(recall_schema["properties"]) == {"query", "k", "about", "attribute", "as_of"}

        kept = await session.call_tool(
            "remember",
            {
                "statement": "Alice lives in Lisbon.",
                "subject": "Alice",
                "predicate": "lives_in",
                "value": "Lisbon",
            },
        )
        assert not kept.is_error, text(kept)
        lisbon = kept.structured_content["memory_id"]
        assert kept.structured_content["session_id"].startswith("mcp-pytest-agent-")
        await session.call_tool("remember", {"statement": "Alice only drinks espresso."})
        assert (await statements(session, "where does Alice live?"))[0] == "Alice lives in Lisbon."

        fixed = await session.call_tool("correct", {"statement": "Alice lives in Porto now."})
        assert fixed.structured_content["replaced"] == lisbon
        hinted = await session.call_tool(
            "recall", {"query": "Alice", "about": "Alice", "attribute": "lives_in"}
        )
        assert hinted.structured_content["results"][0]["statement"] == "Alice lives in Porto now."

        pinned = await session.call_tool("pin", {"memory": "espresso"})
        assert not pinned.is_error, text(pinned)
        gone = await session.call_tool("forget", {"memory": "espresso"})
        espresso = gone.structured_content["memory_id"]
        assert await statements(session, "espresso") == []

        story = text(await session.call_tool("explain", {"memory_id": espresso}))
        assert "status forgotten" in story
        assert "MemoryForgotten" in story and "in session mcp-pytest-agent-" in story
        assert "command remember" in story

        mapped = await session.read_resource("memory://map")
        assert "Alice" in mapped.contents[0].text
        tool_map = text(await session.call_tool("memory_map", {}))
        assert tool_map == mapped.contents[0].text

        missing = await session.call_tool("forget", {"memory": "kangaroo"})
        assert missing.is_error and "no memory of this namespace matches" in text(missing)
        assert "Traceback" not in text(missing)
    events = ledger(store)
    commands = [e for e in events if isinstance(e, ExplicitCommandApplied)]
    assert [c.intent for c in commands] == ["remember", "remember", "correct", "pin", "forget"]
    assert all(c.session_id.startswith("mcp-pytest-agent-") for c in commands)
    recalls = [e for e in events if isinstance(e, RecallServed)]
    assert recalls and all(r.session_id.startswith("mcp-pytest-agent-") for r in recalls)
    forgotten = [e for e in events if isinstance(e, MemoryForgotten)]
    assert [str(e.originator_id) for e in forgotten] == [espresso]


async def test_stdio_remember_many_is_one_command_all_or_none(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with stdio_session(store, ALICE) as session:
        done = await session.call_tool(
            "remember_many", {"statements": ["Alice likes tea.", "Alice plays the cello."]}
        )
        assert not done.is_error, text(done)
        assert len(done.structured_content["memory_ids"]) == 2
        assert done.structured_content["session_id"].startswith("mcp-pytest-agent-")
        refused = await session.call_tool(
            "remember_many", {"statements": ["Alice likes jazz.", "   "]}
        )
        assert refused.is_error and "statements[1]" in text(refused)
        assert "ops" not in text(refused)
        empty = await session.call_tool("remember_many", {"statements": []})
        assert empty.is_error and text(empty).endswith(": statements holds no statement")
        assert sorted(await statements(session, "Alice")) == [
            "Alice likes tea.",
            "Alice plays the cello.",
        ]
    commands = [e for e in ledger(store) if isinstance(e, ExplicitCommandApplied)]
    assert len(commands) == 2 and len({c.session_id for c in commands}) == 1


async def test_stdio_refuses_a_namespace_in_tool_arguments(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with stdio_session(store, ALICE) as session:
        sneaky = await session.call_tool(
            "remember",
            {"statement": "Mallory was here.", "tenant": "acme", "principal": "bob"},
        )
        assert sneaky.is_error and "'principal', 'tenant'" in text(sneaky)
        assert "namespace is fixed by the server" in text(sneaky)
        also = await session.call_tool("recall", {"query": "Mallory", "namespace": ["x"]})
        assert also.is_error
        # A misspelt argument is named, with what the tool takes; no validator's dump.
        typo = await session.call_tool("remember", {"statment": "Mallory was here."})
        assert typo.is_error
        assert "unexpected argument(s) 'statment'" in text(typo)
        assert "missing argument(s) 'statement'" in text(typo)
        assert "namespace" not in text(typo) and "pydantic" not in text(typo).lower()
        empty = await session.call_tool("recall", {})
        assert empty.is_error and "missing argument(s) 'query'" in text(empty)
        assert await statements(session, "Mallory") == []
    assert not [e for e in ledger(store) if isinstance(e, ExplicitCommandApplied)]


async def test_stdio_refuses_mistyped_arguments_in_one_line(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with stdio_session(store, ALICE) as session:
        for tool, arguments, *parts in MISTYPED:
            assert_refused_in_one_line(await session.call_tool(tool, arguments), tool, *parts)
        both = await session.call_tool("recall", {"query": 1, "k": "2"})
        assert_refused_in_one_line(both, "recall", "'query' must be a string", "'k' must be")
        # Well-typed calls work as before: an integral float is an integer (JSON Schema),
        # null is the default of an optional argument.
        kept = await session.call_tool(
            "remember", {"statement": "Alice keeps a cat.", "subject": None, "predicate": None}
        )
        assert not kept.is_error, text(kept)
        position = kept.structured_content["position"]
        for arguments in (
            {"query": "cat", "k": 3},
            {"query": "cat", "k": 3.0},
            {"query": "cat", "about": "Alice", "attribute": None},
            {"query": "cat", "k": 2, "as_of": str(position)},
        ):
            found = await session.call_tool("recall", arguments)
            assert not found.is_error, (arguments, text(found))
            assert found.structured_content["results"][0]["statement"] == "Alice keeps a cat."
    commands = [e for e in ledger(store) if isinstance(e, ExplicitCommandApplied)]
    assert [c.intent for c in commands] == ["remember"]


def test_stdio_answers_lone_surrogates_and_lines_that_are_no_json(tmp_path: Path) -> None:
    """The SDK's stdio loop drops a line its JSON parser refuses (a lone surrogate escape)
    and so leaves the client waiting: every line gets an answer."""
    raw = RawStdio(tmp_path / "store", ALICE)
    try:
        assert raw.initialize()["id"] == 0
        raw.send(
            b'{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"recall",'
            b'"arguments":{"query":"\\ud800"}}}'
        )
        answer = raw.reply()
        assert answer["id"] == 99 and "result" in answer, answer
        assert answer["result"]["structuredContent"]["query"] == "\ufffd"  # type: ignore[index]
        raw.send(b"this is no JSON {")
        assert raw.reply() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error"},
        }
        raw.send(
            b'{"jsonrpc":"2.0","id":100,"method":"tools/call","params":{"name":"remember",'
            b'"arguments":{"statement":"Alice \\ud83d\\ude00 likes \\udc00 kites."}}}'
        )
        kept = raw.reply()
        assert kept["id"] == 100 and not kept["result"]["isError"], kept  # type: ignore[index]
        raw.send(b"")  # a blank line is no message: nothing to answer
        raw.send({"jsonrpc": "2.0", "id": 101, "method": "ping"})
        assert raw.reply()["id"] == 101
        # An unknown method is named in the error as a short, redacted prefix (the SDK's
        # own answer echoes the whole method: a secret, or megabytes).
        for method in (API_KEY, "m" * HUGE):
            raw.send({"jsonrpc": "2.0", "id": 102, "method": method})
            unknown = json.dumps(raw.reply())
            assert "-32601" in unknown and len(unknown) < 300, unknown[:300]
            assert not [f for f in SECRET_FRAGMENTS if f in unknown], unknown
    finally:
        raw.close()
    [remembered] = [e for e in ledger(tmp_path / "store") if isinstance(e, ExplicitCommandApplied)]
    assert remembered.statement == "Alice \U0001f600 likes \ufffd kites."


def test_stdio_answers_a_line_nested_too_deeply_and_keeps_serving(tmp_path: Path) -> None:
    """A line nested 200,000 levels deep made the JSON parser raise ``RecursionError``,
    which ended the stdio server (the client's next write hit a closed pipe): it is answered
    as any line that is no JSON, and the server serves on."""
    raw = RawStdio(tmp_path / "store", ALICE)
    try:
        raw.initialize()
        nested = b"[" * 200_000 + b"]" * 200_000
        raw.send(
            b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"recall",'
            b'"arguments":{"query":"tea","k":' + nested + b"}}}"
        )
        assert raw.reply() == {
            "jsonrpc": "2.0",
            "id": None,
            "error": {"code": -32700, "message": "Parse error"},
        }
        raw.send({"jsonrpc": "2.0", "id": 8, "method": "ping"})
        assert raw.reply()["id"] == 8
    finally:
        raw.close()


def test_stdio_line_repair() -> None:
    assert _stdio_line('{"a": "b"}\n') == '{"a": "b"}\n'
    assert _stdio_line('{"a": "\\ud83d\\ude00"}') == '{"a": "\\ud83d\\ude00"}'  # a pair
    assert _stdio_line('{"a": "\\\\ud800"}') == '{"a": "\\\\ud800"}'  # an escaped backslash
    assert _stdio_line('{"\\udfff": ["x\\ud800y"]}') == '{"\ufffd": ["x\ufffdy"]}'
    assert _stdio_line("not json") is None
    assert _stdio_line('{"a": ') is None


async def test_stdio_serving_falls_back_to_the_sdk_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``serve_stdio`` runs the SDK's low-level server itself, found through one private SDK
    attribute: it is found with this SDK, and without it the SDK's own loop serves."""
    from mcp.server.lowlevel.server import Server

    from memory_ledger.commands.aio import AsyncMemoryEngine
    from memory_ledger.replay.mcp import server as mcp_server

    async with AsyncMemoryEngine.open(tmp_path / "store") as memory:
        server = mcp_server.MemoryMcpServer(memory, namespace=ALICE)
        assert isinstance(mcp_server._lowlevel_server(server.mcp), Server)
        ran: list[str] = []

        async def sdk_loop() -> None:
            ran.append("sdk")

        monkeypatch.setattr(server.mcp, "run_stdio_async", sdk_loop)
        monkeypatch.setattr(mcp_server, "_lowlevel_server", lambda _mcp: None)
        await server.serve_stdio()
        assert ran == ["sdk"]


async def test_stdio_as_of_answers_as_memory_stood_then(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with stdio_session(store, ALICE) as session:
        first = await session.call_tool("remember", {"statement": "Alice plays the cello."})
        before = first.structured_content["position"]
        await session.call_tool("forget", {"memory": "cello"})
        assert await statements(session, "cello") == []
        then = await session.call_tool("recall", {"query": "cello", "as_of": str(before)})
        assert [h["statement"] for h in then.structured_content["results"]] == [
            "Alice plays the cello."
        ]
        bad = await session.call_tool("recall", {"query": "cello", "as_of": "yesterday-ish"})
        assert bad.is_error and "Traceback" not in text(bad)
        # A time without a zone is refused (as the Python API refuses a naive datetime),
        # never read as UTC: one line naming the argument and how to add an offset.
        naive = await session.call_tool("recall", {"query": "cello", "as_of": "2024-03-05T10:00"})
        said = text(naive)
        assert naive.is_error and "Traceback" not in said and "\n" not in said
        assert "as_of" in said and "no time zone" in said and "Z or +02:00" in said
        aware = await session.call_tool("recall", {"query": "cello", "as_of": "2024-03-05T10:00Z"})
        assert not aware.is_error and aware.structured_content["results"] == []


# what errors and results quote of the caller's input ------------------------------------

SECRET_FRAGMENTS = ("T3stK3y", "AAAABBBBCCCC", "sk-proj-T3")
HUGE = 2_000_000


def everything_said(result: Any) -> str:
    """The text blocks and the structured content of a tool result, as one string."""
    return text(result) + repr(result.structured_content)


async def test_a_huge_query_is_never_echoed_whole(tmp_path: Path) -> None:
    """A 2 MB recall query that matches nothing came back twice (in the text and in the
    structured ``query``): both now quote a short prefix, saying how long it was."""
    async with inprocess_client(tmp_path / "store", ALICE) as client:
        await client.call_tool("remember", {"statement": "Alice plays the cello."})
        found = await client.call_tool("recall", {"query": "q" * HUGE})
        assert not found.is_error, text(found)[:200]
        assert found.structured_content["results"] == []
        said = everything_said(found)
        assert len(said) < 1_000, said[:200]
        assert "no memory matches 'qqqq" in text(found) and "2,000,000 characters" in text(found)
        assert len(found.structured_content["query"]) <= 200
        # Every error path quotes at most a short prefix of what it was given.
        for tool, arguments in (
            ("recall", {"query": "cello", "as_of": "2024-" + "x" * HUGE}),
            ("recall", {"query": "cello", "as_of": "-" + "9" * 4000}),
            ("recall", {"query": "cello", "k": "k" * HUGE}),
            ("recall", {"query": "cello", "z" * HUGE: 1}),
            ("explain", {"memory_id": "e" * HUGE}),
            ("forget", {"memory": "\x1b" * HUGE}),
            ("pin", {"memory": "x" * HUGE}),
            ("correct", {"statement": "Alice plays the viola.", "target": "t" * HUGE}),
            ("remember", {"statement": "s" * HUGE}),
            ("t" * HUGE, {}),
        ):
            refused = await client.call_tool(tool, arguments)
            said = everything_said(refused)
            assert refused.is_error and len(said) < 600, (tool, said[:300])
            assert "\n" not in text(refused), said


@pytest.mark.parametrize("number", [1e20, -1e20, 2.0**63, 1e308])
async def test_every_argument_of_every_tool_refuses_a_huge_integral_float(
    tmp_path: Path, number: float
) -> None:
    """An integral float too large for 64 bits passed the server's type check as an integer
    and reached the SDK's validation, whose multi-line text (model names, URLs) was the
    answer: every argument of every tool is now refused in the house's one line."""
    async with inprocess_client(tmp_path / "store", ALICE) as client:
        for tool in (await client.list_tools()).tools:
            names = list(tool.input_schema.get("properties", {}))
            if not names:
                continue
            refused = await client.call_tool(tool.name, dict.fromkeys(names, number))
            assert_refused_in_one_line(
                refused, tool.name, *(f"argument {name!r} must be" for name in names)
            )


def test_stdio_refuses_non_finite_numbers_in_one_line(tmp_path: Path) -> None:
    """``Infinity`` and ``NaN`` (not JSON, but the SDK's parser takes them) and a number that
    overflows to infinity are refused as any mistyped argument."""
    raw = RawStdio(tmp_path / "store", ALICE)
    try:
        raw.initialize()
        for n, arguments in enumerate(
            (b'"k":Infinity', b'"k":NaN', b'"as_of":-Infinity', b'"k":1e400'), start=1
        ):
            raw.send(
                b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"recall",'
                b'"arguments":{"query":"tea",%s}}}' % (n, arguments)
            )
            answer = raw.reply()
            result: Any = answer["result"]
            said = "\n".join(block["text"] for block in result["content"])
            assert result["isError"] and "\n" not in said, said
            assert said.startswith("recall: argument ") and said.endswith("nothing was done")
    finally:
        raw.close()


async def test_k_above_recall_max_k_is_a_tool_error_naming_the_maximum(tmp_path: Path) -> None:
    """``k`` above the server's ``recall_max_k`` (default 50) is refused, now and ``as_of``,
    with one line naming the maximum and the setting; it was cut to 50 silently."""
    async with inprocess_client(tmp_path / "store", ALICE) as client:
        kept = await client.call_tool("remember", {"statement": "Alice plays the cello."})
        position = kept.structured_content["position"]
        for arguments in (
            {"query": "cello", "k": 51},
            {"query": "cello", "k": 1000, "about": "Alice"},
            {"query": "cello", "k": 51, "as_of": position},
        ):
            refused = await client.call_tool("recall", arguments)
            assert refused.is_error, (arguments, text(refused))
            said = text(refused)
            assert "\n" not in said and "maximum of 50" in said and "recall_max_k" in said, said
        found = await client.call_tool("recall", {"query": "cello", "k": 50})
        assert not found.is_error and len(found.structured_content["results"]) == 1


async def test_as_of_takes_an_integer_position(tmp_path: Path) -> None:
    """The README's "as_of position": an integer (and a numeric string) is a ledger position,
    alongside the time forms; a boolean is no position."""
    async with inprocess_client(tmp_path / "store", ALICE) as client:
        listed = await client.list_tools()
        schema = next(t for t in listed.tools if t.name == "recall").input_schema
        assert "integer" in json.dumps(schema["properties"]["as_of"])
        first = await client.call_tool("remember", {"statement": "Alice plays the cello."})
        before = first.structured_content["position"]
        await client.call_tool("forget", {"memory": "cello"})
        for point in (before, float(before), str(before), f" {before} "):
            then = await client.call_tool("recall", {"query": "cello", "as_of": point})
            assert not then.is_error, (point, text(then))
            assert [h["statement"] for h in then.structured_content["results"]] == [
                "Alice plays the cello."
            ]
            assert then.structured_content["position"] == before
        empty = await client.call_tool("recall", {"query": "cello", "as_of": 0})
        assert not empty.is_error and empty.structured_content["results"] == []
        for point, words in (
            (-1, "negative"),
            ("-3", "negative"),
            (10_000, "beyond the ledger head"),
        ):
            refused = await client.call_tool("recall", {"query": "cello", "as_of": point})
            assert refused.is_error and "as_of" in text(refused) and words in text(refused)
        flag = await client.call_tool("recall", {"query": "cello", "as_of": True})
        assert_refused_in_one_line(flag, "recall", "'as_of' must be", "boolean true")


async def test_errors_name_the_tool_arguments_not_python_parameters(tmp_path: Path) -> None:
    async with inprocess_client(tmp_path / "store", ALICE) as client:
        await client.call_tool("remember", {"statement": "Alice plays the cello."})
        for tool, arguments, words in (
            ("forget", {"memory": "   "}, "memory is empty"),
            ("pin", {"memory": ""}, "memory is empty"),
            ("forget", {"memory": "cello \x1b"}, "memory holds U+001B"),
            ("pin", {"memory": API_KEY}, "memory holds a secret-shaped value"),
            ("correct", {"statement": "x", "target": " "}, "target is empty"),
            ("recall", {"query": "cello", "as_of": 99}, "as_of"),
            ("recall", {"query": "cello", "k": 0}, "k must be"),
            ("recall", {"query": "cello", "k": 0, "as_of": 1}, "k must be"),
        ):
            refused = await client.call_tool(tool, arguments)
            said = text(refused)
            assert refused.is_error and words in said, (tool, said)
            assert "statement_or_id" not in said and "'at'" not in said, said
            assert not said.startswith(f"Error executing tool {tool}: at "), said


async def test_a_tool_without_arguments_says_so(tmp_path: Path) -> None:
    async with inprocess_client(tmp_path / "store", ALICE) as client:
        extra = await client.call_tool("memory_map", {"extra": 1})
        assert_refused_in_one_line(
            extra, "memory_map", "unexpected argument(s) 'extra'", "memory_map takes no arguments"
        )
        assert "takes ;" not in text(extra)
        typo = await client.call_tool("remember", {"statment": "Alice plays the cello."})
        assert_refused_in_one_line(
            typo, "remember", "remember takes statement, subject, predicate, value"
        )


async def test_no_error_or_result_echoes_a_secret(tmp_path: Path) -> None:
    """The CLI redacts a secret given as a memory id; MCP echoed 80 characters of it. No
    tool's error or result quotes a secret-shaped value a caller sent."""
    buried = "x" * 30 + " " + API_KEY  # a secret across the cut of a short prefix
    async with inprocess_client(tmp_path / "store", ALICE) as client:
        await client.call_tool("remember", {"statement": "Alice plays the cello."})
        explained = await client.call_tool("explain", {"memory_id": API_KEY})
        assert explained.is_error and "not a memory id" in text(explained), text(explained)
        for secret in (API_KEY, buried):
            for tool, arguments in (
                ("explain", {"memory_id": secret}),
                ("recall", {"query": secret}),
                ("recall", {"query": secret, "as_of": 1}),
                ("recall", {"query": "cello", "as_of": secret}),
                ("recall", {"query": "cello", "k": secret}),
                ("recall", {"query": "cello", "about": 3, "attribute": secret}),
                ("recall", {"query": "cello", secret: 1}),
                ("memory_map", {secret: 1}),
                ("forget", {"memory": secret}),
                ("pin", {"memory": secret}),
                ("correct", {"statement": secret}),
                ("correct", {"statement": "Alice plays the viola.", "target": secret}),
                ("remember", {"statement": secret}),
                ("remember", {"statement": "Alice likes tea.", "subject": secret}),
                (secret, {}),
            ):
                answer = await client.call_tool(tool, arguments)
                said = everything_said(answer)
                assert not [f for f in SECRET_FRAGMENTS if f in said], (tool, arguments, said)
            with pytest.raises(MCPError) as unknown:
                await client.read_resource("memory://" + secret)
            said = f"{unknown.value.message} {unknown.value.data!r}"
            assert "Unknown resource" in said and not [f for f in SECRET_FRAGMENTS if f in said]


# streamable HTTP --------------------------------------------------------------------------


class Tokens:
    def __init__(self, folder: Path) -> None:
        self.alice, self.bob = new_token(), new_token()
        self.file = folder / "tokens.toml"
        self.file.write_text(
            token_entry_toml("alice-laptop", self.alice, ALICE)
            + token_entry_toml("bob-phone", self.bob, BOB)
        )


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, Tokens, Path]]:
    folder = tmp_path_factory.mktemp("mcp-http")
    tokens = Tokens(folder)
    store = folder / "store"
    server = HttpServer(store, tokens.file, "--embeddings", "none")
    try:
        server.wait_ready()
        yield server, tokens, store
    finally:
        server.stop()


async def test_http_remember_recall_forget_explain_and_map(
    served: tuple[HttpServer, Tokens, Path],
) -> None:
    server, tokens, _ = served
    async with http_session(server.url, tokens.alice) as session:
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        kept = await session.call_tool(
            "remember", {"statement": "Alice keeps a cat named Miso.", "subject": "Alice"}
        )
        assert kept.structured_content["session_id"].startswith("mcp-alice-laptop-pytest-agent-")
        await session.call_tool("remember", {"statement": "Alice's sister lives in Porto."})
        assert await statements(session, "cat") == ["Alice keeps a cat named Miso."]
        for tool, arguments, *parts in MISTYPED:
            assert_refused_in_one_line(await session.call_tool(tool, arguments), tool, *parts)
        gone = await session.call_tool("forget", {"memory": "sister Porto"})
        assert not gone.is_error and await statements(session, "sister Porto") == []
        story = text(
            await session.call_tool("explain", {"memory_id": gone.structured_content["memory_id"]})
        )
        assert "MemoryForgotten" in story and "mcp-alice-laptop-pytest-agent-" in story
        mapped = await session.read_resource("memory://map")
        assert "Alice" in mapped.contents[0].text


async def test_http_instructions_carry_the_callers_memory_map(
    served: tuple[HttpServer, Tokens, Path],
) -> None:
    server, tokens, _ = served
    async with http_session(server.url, tokens.bob) as bob:
        await bob.call_tool(
            "remember", {"statement": "Bob builds kites.", "subject": "Bob", "predicate": "hobby"}
        )
    seen: list[str | None] = []
    async with http_session(server.url, tokens.bob, lambda r: seen.append(r.instructions)):
        pass
    [instructions] = seen
    assert instructions is not None and "Memory map" in instructions
    assert "Bob" in instructions and "hobby" in instructions
    # The map names the tool the client has (there is no recall_context tool).
    assert "recall_context" not in instructions and "as recall's 'about'" in instructions


@pytest.mark.parametrize("authorization", [None, "Bearer nope", "Basic YWxpY2U6eA==", "Bearer"])
def test_http_without_a_known_token_gets_401_and_nothing_else(
    served: tuple[HttpServer, Tokens, Path], authorization: str | None
) -> None:
    server, _, _ = served
    headers = {"Accept": "application/json, text/event-stream"}
    if authorization is not None:
        headers["Authorization"] = authorization
    for body in (
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "recall"}},
    ):
        response = httpx.post(server.url, json=body, headers=headers, timeout=30)
        assert response.status_code == 401
        assert response.content == b""
        assert set(response.headers) <= {"www-authenticate", "content-length", "date", "server"}


async def test_http_another_namespaces_token_sees_nothing(
    served: tuple[HttpServer, Tokens, Path],
) -> None:
    server, tokens, _ = served
    async with http_session(server.url, tokens.alice) as alice:
        kept = await alice.call_tool("remember", {"statement": "Alice's PIN hint is a dolphin."})
        secret_id = kept.structured_content["memory_id"]
    async with http_session(server.url, tokens.bob) as bob:
        assert await statements(bob, "dolphin PIN hint") == []
        for tool, args in (
            ("explain", {"memory_id": secret_id}),
            ("explain", {"memory_id": secret_id[:8]}),
            ("forget", {"memory": secret_id}),
            ("pin", {"memory": secret_id}),
            ("correct", {"statement": "Nothing.", "target": secret_id}),
        ):
            refused = await bob.call_tool(tool, args)
            assert refused.is_error, (tool, text(refused))
            assert "dolphin" not in text(refused)
        assert "dolphin" not in text(await bob.call_tool("memory_map", {}))
        sneaky = await bob.call_tool(
            "recall", {"query": "dolphin", "tenant": "acme", "principal": "alice"}
        )
        assert sneaky.is_error
    async with http_session(server.url, tokens.alice) as alice:
        assert await statements(alice, "dolphin") == ["Alice's PIN hint is a dolphin."]


def test_tokens_never_reach_the_logs_or_the_ledger(
    served: tuple[HttpServer, Tokens, Path],
) -> None:
    server, tokens, store = served
    with memory_ledger.open(store, create=False) as engine:
        assert engine.head > 0  # the other HTTP tests wrote
    data = (store / "ledger" / "data.mdb").read_bytes()
    logged = "".join(server.stderr)
    for token in (tokens.alice, tokens.bob):
        assert token.encode() not in data and token not in logged
        assert hash_token(token).encode() not in data


async def test_a_secret_client_name_never_reaches_the_ledger(
    tmp_path: Path, served: tuple[HttpServer, Tokens, Path]
) -> None:
    """A client that names itself after an API key: the secret detector finds it and the
    session ids say ``client`` instead; no part of the key is stored (stdio and HTTP)."""
    secret_client = Implementation(name=API_KEY, version="1.0")
    stores = [tmp_path / "store"]
    async with stdio_session(stores[0], ALICE, client=secret_client) as session:
        kept = await session.call_tool("remember", {"statement": "Alice owns a red kayak."})
        assert kept.structured_content["session_id"].startswith("mcp-client-")
        assert await statements(session, "kayak") == ["Alice owns a red kayak."]
    server, tokens, store = served
    stores.append(store)
    async with http_session(server.url, tokens.alice, client=secret_client) as session:
        kept = await session.call_tool("remember", {"statement": "Alice owns a blue canoe."})
        assert kept.structured_content["session_id"].startswith("mcp-alice-laptop-")
        assert API_KEY[:20] not in kept.structured_content["session_id"]
        assert await statements(session, "canoe") == ["Alice owns a blue canoe."]
    await asyncio.sleep(2 * READ_FLUSH_SECONDS)  # the recall records are written by then
    fragments = [API_KEY, "T3stK3y", "AAAABBBBCCCC", "sk-proj-T3"]
    for folder in stores:
        sessions = {e.session_id for e in ledger(folder) if hasattr(e, "session_id")}
        assert any(s.startswith("mcp-") for s in sessions)
        assert not [s for s in sessions if any(f in s for f in fragments)]
        data = (folder / "ledger" / "data.mdb").read_bytes()
        assert not [f for f in fragments if f.encode() in data]


# the token file ---------------------------------------------------------------------------


def test_token_file_rules(tmp_path: Path) -> None:
    token = new_token()
    entry = token_entry_toml("alice", token, ALICE)
    assert token not in entry and hash_token(token) in entry
    good = tmp_path / "ok.toml"
    good.write_text(entry)
    registry = TokenRegistry.from_toml(good)
    found = registry.lookup(token)
    assert found is not None and found.namespace == ALICE
    assert registry.lookup(token + "x") is None
    twice = tmp_path / "twice.toml"
    twice.write_text(entry + entry.replace('name = "alice"', 'name = "other"'))
    with pytest.raises(TokenFileError, match="listed twice"):
        TokenRegistry.from_toml(twice)
    empty = tmp_path / "empty.toml"
    empty.write_text("[memory]\nrecall_k = 3\n")
    with pytest.raises(TokenFileError, match="no \\[\\[mcp.token\\]\\]"):
        TokenRegistry.from_toml(empty)
    plain = tmp_path / "plain.toml"
    plain.write_text(entry.replace(hash_token(token), token))
    with pytest.raises(TokenFileError, match="64 lowercase hex") as caught:
        TokenRegistry.from_toml(plain)
    assert token not in str(caught.value)


def test_mcp_token_command_prints_the_token_once_and_stores_its_digest(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from memory_ledger.replay.cli.app import app

    made = CliRunner().invoke(
        app,
        ["mcp-token", "alice-laptop", "--tenant", "acme", "--principal", "alice"]
        + ["--scope-id", "assistant", "--json"],
    )
    assert made.exit_code == 0, made.output
    printed = json.loads(made.stdout)
    assert printed["token"] not in printed["entry"]
    file = tmp_path / "tokens.toml"
    file.write_text(printed["entry"])
    entry = TokenRegistry.from_toml(file).lookup(printed["token"])
    assert entry is not None and entry.name == "alice-laptop" and entry.namespace == ALICE
    refused = CliRunner().invoke(app, ["mcp", "--store", str(tmp_path / "s"), "--tenant", "a"])
    assert refused.exit_code == 2 and "give --tenant, --principal and --scope-id" in refused.output


async def test_stdio_over_a_postgresql_ledger(pg_url: str, tmp_path: Path) -> None:
    """``mcp --ledger URL`` serves the shared PostgreSQL ledger: what a client remembers
    there, another host opening the same ledger recalls; the store folder holds only this
    host's projections (no LMDB ledger)."""
    async with stdio_session(tmp_path / "host-a", ALICE, "--ledger", pg_url) as session:
        kept = await session.call_tool("remember", {"statement": "Alice keeps bees in Lyon."})
        assert not kept.is_error, text(kept)
        assert await statements(session, "bees Lyon") == ["Alice keeps bees in Lyon."]
    assert not (tmp_path / "host-a" / "ledger").exists()
    with memory_ledger.open(tmp_path / "host-b", ledger=pg_url, create=False) as other:
        assert [h.statement for h in other.recall(ALICE, "bees Lyon")] == [
            "Alice keeps bees in Lyon."
        ]


def test_cli_help_keeps_its_brackets() -> None:
    """Rich markup eats an unescaped ``[word]`` in help text: every command's help and
    option help escape theirs, and ``mcp-token --help`` shows ``[[mcp.token]]``."""
    import re

    import typer
    from typer.testing import CliRunner

    from memory_ledger.replay.cli.app import app

    def texts(command: Any, path: str) -> Iterator[tuple[str, str]]:
        yield path, command.help or ""
        for param in command.params:
            yield f"{path} {param.name}", getattr(param, "help", None) or ""
        for name, sub in getattr(command, "commands", {}).items():  # a group's commands
            yield from texts(sub, f"{path} {name}")

    eaten = [
        (where, found.group())
        for where, help_text in texts(typer.main.get_command(app), "memory-ledger")
        for found in re.finditer(r"(?<!\\)\[[^\]\n]*\]", help_text)
    ]
    assert eaten == []
    assert len(list(texts(typer.main.get_command(app), ""))) > 50  # the subcommands too
    shown = CliRunner().invoke(app, ["mcp-token", "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0 and "the [[mcp.token]] entry" in shown.output, shown.output
    listed = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert "[[mcp.token]] entry" in listed.output and "[]" not in listed.output
