"""What the embedding function of ``IndexConfig["embed"]`` is handed, and what that means
for search scores: the text at the indexed fields and nothing else, as LangGraph's stores
embed it (found by LangGraph's own ``test_embed_with_path`` suites: the store used to
append its revision digest, so equal texts scored apart and items with nothing indexed
were ranked by the digest's vector)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from memory_ledger import Namespace
from memory_ledger.replay.langgraph_store import LedgerStore

ALPHABET = "abcdefghijklmnopqrstuvwxyz"
NS = ("docs",)


class Letters:
    """Letter-count vectors (a constant first component: never the zero vector); keeps
    every list of texts it embedded."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[1.0] + [float(t.lower().count(c)) for c in ALPHABET] for t in texts]

    def embedded(self) -> list[str]:
        return [text for call in self.calls for text in call]


@pytest.fixture
def letters() -> Letters:
    return Letters()


@pytest.fixture
def store(tmp_path: Path, letters: Letters) -> Iterator[LedgerStore]:
    index = {"dims": 1 + len(ALPHABET), "embed": letters, "fields": ["text"]}
    with LedgerStore.open(tmp_path / "store", Namespace("emb", "text", "t"), index=index) as opened:
        yield opened


def test_the_function_gets_the_indexed_text_and_nothing_else(
    store: LedgerStore, letters: Letters
) -> None:
    store.put(NS, "a", {"text": "zany zebra", "other": "not indexed"})
    store.put(NS, "b", {"text": "quiet owl"}, index=["text", "other"])
    assert letters.embedded() == ["zany zebra", "quiet owl"]


def test_items_with_the_same_indexed_text_score_the_same(store: LedgerStore) -> None:
    store.put(NS, "first", {"text": "bbb", "other": 1})
    store.put(NS, "second", {"text": "bbb", "other": 2})
    store.put(NS, "third", {"text": "ccc ddd"})
    found = store.search(NS, query="bbb")
    scores = {item.key: item.score for item in found}
    assert scores["first"] == scores["second"]
    assert [item.key for item in found][:2] in (["first", "second"], ["second", "first"])


def test_an_item_with_nothing_indexed_is_not_embedded_and_not_scored(
    store: LedgerStore, letters: Letters
) -> None:
    store.put(NS, "indexed", {"text": "bbb"})
    store.put(NS, "opted-out", {"text": "bbb"}, index=False)
    store.put(NS, "no-field", {"other": "bbb"})
    assert letters.embedded() == ["bbb"]
    found = store.search(NS, query="bbb")
    assert [(item.key, item.score is None) for item in found][0] == ("indexed", False)
    assert {item.key: item.score for item in found[1:]} == {"opted-out": None, "no-field": None}
