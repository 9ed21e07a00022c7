"""The revision digest that ends a put's statement: ``lgrev:`` and 16 hex digits, so it
holds no run of 20 token characters (a run sends the statement through every detector of
the secret door); an item recorded with the earlier digest (``lgrev`` and the digits, no
colon) reads, searches and updates as any other."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.engine import Remember
from memory_ledger.replay.langgraph_store import LedgerStore
from memory_ledger.replay.langgraph_store.records import (
    ADDRESS_TAG,
    PREDICATE,
    _json,
    address_of,
    encode_record,
    has_indexed_text,
    indexed_text,
    subject_of,
)

TENANT = Namespace("acme", "alice", "format")
RUN = re.compile(r"[A-Za-z0-9_\-+/=]{20}")  # the secret scan's long token run


def test_a_statement_holds_no_long_token_run_of_its_own() -> None:
    record = encode_record(("docs",), "k", {"text": "tea with milk", "n": 1}, None, None)
    assert re.search(r" lgrev:[0-9a-f]{16}\Z", record.statement)
    assert RUN.search(record.statement) is None
    assert indexed_text(record.statement) == '{"n": 1, "text": "tea with milk"}'
    assert indexed_text("plain words lgrev0123456789abcdef") == "plain words"  # earlier form
    assert indexed_text("lgrev:0123456789abcdef") == ""
    for statement in (
        "lgrev:0123456789abcdef",
        "lgrev0123456789abcdef",
        "lgrev0123456789abcdef lgrev:0123456789abcdef",
        "lgrev words lgrev:0123456789abcdef",
        "words lgrev:0123456789abcdef",
        "lgrev:0123456789abcdeX",
    ):
        assert has_indexed_text(statement) == bool(indexed_text(statement)), statement


def test_an_item_recorded_with_the_earlier_digest_reads_and_updates(engine: MemoryEngine) -> None:
    store = LedgerStore(engine, TENANT)
    value = {"text": "zebra crossing at noon"}
    record = encode_record(("docs",), "old", value, None, None)
    earlier = record.statement.replace(" lgrev:", " lgrev")
    assert earlier != record.statement
    engine.apply_batch(
        TENANT,
        [
            Remember(
                statement=earlier,
                subject=record.subject,
                predicate=PREDICATE,
                value=record.value,
                tags=record.tags,
                document=True,
            )
        ],
        session_prefix="langgraph-",
    )
    got = store.get(("docs",), "old")
    assert got is not None and got.value == value
    found = store.search(("docs",), query="zebra crossing")
    assert [(i.key, i.score is not None) for i in found] == [("old", True)]
    store.put(("docs",), "old", value)  # the same value, now recorded in today's form
    again = store.get(("docs",), "old")
    assert again is not None and again.value == value
    assert again.created_at == got.created_at
    assert [v.value for v in store.history(("docs",), "old")] == [value, value]
    assert [i.key for i in store.search(("docs",), query="zebra crossing")] == ["old"]


_LABEL = st.text(
    alphabet=st.one_of(
        st.characters(blacklist_categories=("Cs",)), st.sampled_from('\x85\u202e\u200b\x7f"\\')
    ),
    min_size=1,
    max_size=12,
)


@given(st.lists(_LABEL.filter(lambda s: "." not in s), min_size=1, max_size=3), _LABEL)
@settings(max_examples=300)
def test_a_records_subject_and_address_are_those_of_the_address_alone(
    namespace: list[str], key: str
) -> None:
    """``encode_record`` formats the address's JSON once for its subject and its address
    tag: each is what :func:`subject_of` and the tag's own JSON give."""
    record = encode_record(tuple(namespace), key, {"text": "x"}, None, None)
    assert record.subject == subject_of(tuple(namespace), key)
    assert record.tags[0] == ADDRESS_TAG + _json([list(namespace), key], "key")
    assert address_of(record.tags) == (tuple(namespace), key)
