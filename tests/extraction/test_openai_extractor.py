"""OpenAIChatExtractor against a local HTTP server that plays a model's replies."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from memory_ledger.commands.extraction import (
    ExtractionRequest,
    Extractor,
    OpenAIChatExtractor,
    Rejection,
    validate_item,
)
from memory_ledger.commands.extraction.base import RelatedMemory
from memory_ledger.commands.extraction.openai import ModelOutputError, reply_schema
from memory_ledger.ledger.events import ExtractedItem
from tests.conftest import make_item
from tests.scripted_server import Reply, ScriptedServer

TRANSCRIPT = (
    "user: I moved to Lisbon last month and I now prefer working from cafes.\n"
    "assistant: Noted! Lisbon has great cafes."
)
API_KEY = "test-key-" + "0123456789abcdef"
RELATED = (
    RelatedMemory("mem-1111", "Alice lives in Berlin."),
    RelatedMemory("mem-2222", "Alice prefers working from home."),
)
PREDICATES = ("lives_in", "prefers_workplace")


def request(**overrides: Any) -> ExtractionRequest:
    fields: dict[str, Any] = {
        "session_id": "s1",
        "turn_id": 3,
        "transcript": TRANSCRIPT,
        "related": RELATED,
        "known_predicates": PREDICATES,
    }
    fields.update(overrides)
    return ExtractionRequest(**fields)


def completion(content: str | None, **message: Any) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content, **message},
                    "finish_reason": "stop",
                }
            ],
        }
    ).encode()


GOOD_ITEMS = [
    make_item(
        "Alice lives in Lisbon.",
        predicate="lives_in",
        value="Lisbon",
        supersedes="mem-1111",
        evidence=["3"],
    ),
    make_item(
        "Alice prefers working from cafes.",
        source="preference",
        predicate="prefers_workplace",
        value="cafes",
        conflicts_with=["mem-2222"],
    ),
]


@pytest.fixture
def extractor(server: ScriptedServer) -> Iterator[OpenAIChatExtractor]:
    with OpenAIChatExtractor(server.base_url, "test-model", API_KEY, timeout=5) as ex:
        yield ex


def assert_clean(error: ModelOutputError) -> None:
    """Errors never carry the transcript or the API key."""
    text = str(error) + repr(error)
    assert API_KEY not in text
    for line in TRANSCRIPT.splitlines():
        assert line not in text
    assert "Lisbon" not in text


# --- good replies --------------------------------------------------------------------------


def test_good_reply_returns_the_items(
    server: ScriptedServer, extractor: OpenAIChatExtractor
) -> None:
    server.play(Reply(body=completion(json.dumps({"items": GOOD_ITEMS}))))
    items = extractor.extract(request())
    assert list(items) == GOOD_ITEMS
    relation_ids = {m.memory_id for m in RELATED}
    assert all(
        isinstance(validate_item(i, relation_ids=relation_ids), ExtractedItem) for i in items
    )


def test_request_carries_model_prompt_schema_and_key(
    server: ScriptedServer, extractor: OpenAIChatExtractor
) -> None:
    server.play(Reply(body=completion('{"items": []}')))
    assert extractor.extract(request()) == []
    (sent,) = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.headers["content-type"] == "application/json"
    body = sent.body
    assert body["model"] == "test-model"
    assert body["temperature"] == 0
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["system", "user"]
    system, user = (m["content"] for m in body["messages"])
    assert TRANSCRIPT in user
    for memory in RELATED:
        assert memory.memory_id in user and memory.statement in user
    for predicate in PREDICATES:
        assert predicate in user
    for rule in ("semantic", "procedural", "workflow", "failure", "preference", "workspace"):
        assert rule in system
    assert "0.70" in system and "0.75" in system and "at most 5 items" in system
    assert TRANSCRIPT not in system
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "memory_items"
    assert fmt["json_schema"]["schema"] == reply_schema()


def test_no_authorization_header_without_key(server: ScriptedServer) -> None:
    server.play(Reply(body=completion('{"items": []}')))
    with OpenAIChatExtractor(server.base_url + "/", "m", timeout=5, temperature=None) as ex:
        assert ex.extractor_id == "openai:m"
        ex.extract(request(related=(), known_predicates=()))
    (sent,) = server.requests
    assert "authorization" not in sent.headers
    assert "temperature" not in sent.body
    user = sent.body["messages"][1]["content"]
    assert "(none)" in user


def test_fenced_json_content(server: ScriptedServer, extractor: OpenAIChatExtractor) -> None:
    fenced = "Here you go:\n```json\n" + json.dumps({"items": GOOD_ITEMS[:1]}) + "\n```\n"
    server.play(Reply(body=completion(fenced)))
    assert list(extractor.extract(request())) == GOOD_ITEMS[:1]


def test_malformed_items_are_returned_as_is(
    server: ScriptedServer, extractor: OpenAIChatExtractor
) -> None:
    raw = [
        GOOD_ITEMS[0],
        "just a string",
        {"kind": "bogus"},
        make_item("Alice has a cat named Tom.", importance=0.2),
    ]
    server.play(Reply(body=completion(json.dumps({"items": raw}))))
    items = extractor.extract(request())
    assert list(items) == raw
    outcomes = [validate_item(i, relation_ids={"mem-1111"}) for i in items]
    assert isinstance(outcomes[0], ExtractedItem)
    assert all(isinstance(o, Rejection) for o in outcomes[1:])  # rejected one by one


def test_at_most_max_items(server: ScriptedServer) -> None:
    many = [make_item(f"Fact number {i}.") for i in range(7)]
    server.play(Reply(body=completion(json.dumps({"items": many}))))
    with OpenAIChatExtractor(server.base_url, "m", timeout=5, max_items=3) as ex:
        assert list(ex.extract(request())) == many[:3]
    assert "at most 3 items" in server.requests[0].body["messages"][0]["content"]


def test_json_schema_rejected_falls_back_to_json_object(
    server: ScriptedServer, extractor: OpenAIChatExtractor
) -> None:
    server.play(
        Reply(400, b'{"error": {"message": "response_format json_schema is not supported"}}'),
        Reply(body=completion(json.dumps({"items": GOOD_ITEMS}))),
        Reply(body=completion('{"items": []}')),
    )
    assert list(extractor.extract(request())) == GOOD_ITEMS
    assert [r.body["response_format"]["type"] for r in server.requests] == [
        "json_schema",
        "json_object",
    ]
    assert not extractor.uses_json_schema
    assert extractor.extract(request()) == []  # remembered: straight to json_object
    assert server.requests[2].body["response_format"] == {"type": "json_object"}


def test_400_twice_is_an_http_error(server: ScriptedServer, extractor: OpenAIChatExtractor) -> None:
    server.play(Reply(400, b"{}"), Reply(400, b"{}"))
    with pytest.raises(ModelOutputError) as info:
        extractor.extract(request())
    assert info.value.reason_code == "http_error" and info.value.status == 400
    assert extractor.uses_json_schema


# --- failures ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (Reply(body=completion("Sure! Alice moved to Lisbon.")), "not_json"),
        (Reply(body=b"<html>gateway</html>"), "not_json"),
        (Reply(body=completion('{"memories": []}')), "missing_items"),
        (Reply(body=completion("[1, 2]")), "missing_items"),
        (Reply(body=completion(None, refusal="I can't help with that.")), "missing_items"),
        (Reply(body=b'{"choices": []}'), "missing_items"),
        (Reply(body=b'{"error": "overloaded"}'), "missing_items"),
        (
            Reply(body=completion('{"items": {"statement": "Alice lives in Lisbon."}}')),
            "items_not_list",
        ),
        (Reply(body=completion('{"items": "none"}')), "items_not_list"),
        (Reply(500, b'{"error": "internal"}'), "http_error"),
        (Reply(503, b""), "http_error"),
        (Reply(401, b'{"error": "bad key"}'), "http_error"),
    ],
    ids=[
        "prose",
        "html-body",
        "no-items-key",
        "array",
        "refusal",
        "no-choices",
        "no-choices-key",
        "items-object",
        "items-string",
        "500",
        "503",
        "401",
    ],
)
def test_malformed_replies_raise(
    server: ScriptedServer, extractor: OpenAIChatExtractor, reply: Reply, reason: str
) -> None:
    server.play(reply)
    with pytest.raises(ModelOutputError) as info:
        extractor.extract(request())
    assert info.value.reason_code == reason
    assert isinstance(info.value, ValueError)
    if reason == "http_error":
        assert info.value.status == reply.status
        assert str(reply.status) in str(info.value)
    assert_clean(info.value)


def test_slow_server_times_out(server: ScriptedServer) -> None:
    server.play(Reply(body=completion('{"items": []}'), delay=2.0))
    with OpenAIChatExtractor(server.base_url, "m", API_KEY, timeout=0.3) as ex:
        start = time.monotonic()
        with pytest.raises(ModelOutputError) as info:
            ex.extract(request())
        elapsed = time.monotonic() - start
    assert info.value.reason_code == "timeout"
    assert elapsed < 1.5
    assert_clean(info.value)


def test_connection_refused_is_unreachable() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with OpenAIChatExtractor(f"http://127.0.0.1:{port}/v1", "m", API_KEY, timeout=2) as ex:
        with pytest.raises(ModelOutputError) as info:
            ex.extract(request())
    assert info.value.reason_code == "unreachable"
    assert_clean(info.value)


# --- construction and schema ---------------------------------------------------------------


def test_is_an_extractor_and_hides_the_key(server: ScriptedServer) -> None:
    with OpenAIChatExtractor(
        server.base_url, "gpt-x", API_KEY, extractor_id="custom", timeout=5
    ) as ex:
        assert isinstance(ex, Extractor)
        assert ex.extractor_id == "custom"
        assert API_KEY not in repr(ex)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"base_url": "ftp://host/v1"}, "base_url"),
        ({"base_url": "not a url"}, "base_url"),
        ({"base_url": "http://[::1"}, "base_url"),
        ({"model": " "}, "model"),
        ({"max_items": 0}, "max_items"),
        ({"timeout": 0}, "timeout"),
    ],
)
def test_bad_construction(kwargs: dict[str, Any], message: str) -> None:
    args: dict[str, Any] = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        OpenAIChatExtractor(**args)


def test_reply_schema_mirrors_the_item() -> None:
    schema = reply_schema()
    assert schema["type"] == "object" and schema["required"] == ["items"]
    assert schema["additionalProperties"] is False
    item = schema["$defs"]["MemoryItem"]
    assert set(item["properties"]) == set(ExtractedItem.__struct_fields__)
    assert set(item["required"]) == set(item["properties"])  # strict-mode friendly
    assert item["properties"]["kind"] == {"enum": ["procedural", "semantic"], "type": "string"}
    assert schema["properties"]["items"]["items"] == {"$ref": "#/$defs/MemoryItem"}
    json.dumps(schema)
