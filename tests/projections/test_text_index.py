"""Tests for projections.text_index: tokenizer rules, BM25 arithmetic, ordering, mutation."""

from __future__ import annotations

import math
import random
import re
import threading
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_ledger.projections import text_index
from memory_ledger.projections.text_index import (
    CJK_RANGES,
    DEFAULT_B,
    DEFAULT_K1,
    BM25Index,
    IndexedDoc,
    ScoredDoc,
    tokenize,
)

# --------------------------------------------------------------------------- tokenizer


def test_nfkc_full_width_letters() -> None:
    assert tokenize("ＬＧＢＴＱ") == ["lgbtq"]
    assert tokenize("ＬＧＢＴＱ support") == tokenize("lgbtq SUPPORT")


def test_cjk_bigrams() -> None:
    assert tokenize("支持小组") == ["支持", "持小", "小组"]


def test_single_cjk_character_is_unigram() -> None:
    assert tokenize("中") == ["中"]
    assert tokenize("中 文") == ["中", "文"]


def test_mixed_latin_and_cjk() -> None:
    assert tokenize("Caroline's LGBTQ 支持小组 meetup") == [
        "caroline",
        "s",
        "lgbtq",
        "支持",
        "持小",
        "小组",
        "meetup",
    ]


def test_digits_adjacent_to_cjk_are_separate_tokens() -> None:
    assert tokenize("2023年に") == ["2023", "年に"]
    assert tokenize("abc支持def") == ["abc", "支持", "def"]


def test_kana_and_hangul_are_bigrammed() -> None:
    assert tokenize("한국어") == ["한국", "국어"]
    # The katakana middle dot is punctuation (not \w) and separates runs.
    assert tokenize("東京タワー・ゲーム") == ["東京", "京タ", "タワ", "ワー", "ゲー", "ーム"]
    # Half-width katakana is NFKC-normalized to full-width first.
    assert tokenize("ｶﾀｶﾅ") == tokenize("カタカナ") == ["カタ", "タカ", "カナ"]


@pytest.mark.parametrize("text", ["Caroline's", "Caroline’s", "CAROLINE'S"])
def test_apostrophe_splits_possessive(text: str) -> None:
    assert tokenize(text) == ["caroline", "s"]


def test_punctuation_whitespace_and_underscore() -> None:
    assert tokenize("  well-being, (yes)!  foo_bar\t42 ") == [
        "well",
        "being",
        "yes",
        "foo_bar",
        "42",
    ]
    assert tokenize("") == []
    assert tokenize(" ,.;!? ") == []


def test_lowercase_policy_is_str_lower_not_casefold() -> None:
    assert tokenize("Straße") == ["straße"]
    assert tokenize("ÉCOLE École") == ["école", "école"]


def test_no_stemming_or_stopwords() -> None:
    assert tokenize("The runners are running") == ["the", "runners", "are", "running"]


def test_cjk_ranges_are_well_formed() -> None:
    assert all(lo <= hi for lo, hi in CJK_RANGES)
    assert list(CJK_RANGES) == sorted(CJK_RANGES)
    assert all(a[1] < b[0] for a, b in zip(CJK_RANGES, CJK_RANGES[1:], strict=False))


def _is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return any(lo <= cp <= hi for lo, hi in CJK_RANGES)


_WORD = re.compile(r"\w+")


@given(st.text())
def test_tokens_are_nonempty_lowercase_word_runs(text: str) -> None:
    tokens = tokenize(text)
    assert tokens == tokenize(text)
    for token in tokens:
        assert _WORD.fullmatch(token)
        if any(_is_cjk(ch) for ch in token):
            assert all(_is_cjk(ch) for ch in token)
            assert 1 <= len(token) <= 2
        else:
            assert token == token.lower()


# --------------------------------------------------------------------------- BM25 scoring


def _bm25_term(tf: int, df: int, n: int, dl: int, avgdl: float, k1: float, b: float) -> float:
    idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl))


def test_hand_computed_scores() -> None:
    docs = [
        IndexedDoc("d1", 0, "apple banana apple"),  # dl=3
        IndexedDoc("d2", 1, "banana cherry"),  # dl=2
        IndexedDoc("d3", 2, "cherry date elderberry fig"),  # dl=4
    ]
    index = BM25Index.build(docs)
    n, avgdl, k1, b = 3, 3.0, 1.2, 0.75
    assert index.avgdl == avgdl
    # "apple": df=1; "cherry": df=2.
    expected = {
        "d1": _bm25_term(2, 1, n, 3, avgdl, k1, b),
        "d2": _bm25_term(1, 2, n, 2, avgdl, k1, b),
        "d3": _bm25_term(1, 2, n, 4, avgdl, k1, b),
    }
    # Spelled out once, independent of the helper: apple in d1.
    idf_apple = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    assert expected["d1"] == pytest.approx(idf_apple * 2 * 2.2 / (2 + 1.2 * (0.25 + 0.75)))
    hits = index.search("Apple CHERRY", k=10)
    assert [h.doc_id for h in hits] == sorted(expected, key=lambda d: -expected[d])
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.doc_id], rel=1e-12)
    # Shorter doc (d2) beats longer doc (d3) for the same tf.
    assert expected["d2"] > expected["d3"]


def test_multi_term_score_is_sum_of_term_scores() -> None:
    docs = [
        IndexedDoc("a", 0, "red green blue"),
        IndexedDoc("b", 1, "red red yellow"),
        IndexedDoc("c", 2, "green"),
        IndexedDoc("d", 3, "purple"),
    ]
    index = BM25Index.build(docs)
    n, avgdl = 4, 8 / 4
    hits = {h.doc_id: h.score for h in index.search("red green", k=10)}
    assert set(hits) == {"a", "b", "c"}
    assert hits["a"] == pytest.approx(
        _bm25_term(1, 2, n, 3, avgdl, DEFAULT_K1, DEFAULT_B)
        + _bm25_term(1, 2, n, 3, avgdl, DEFAULT_K1, DEFAULT_B)
    )
    assert hits["b"] == pytest.approx(_bm25_term(2, 2, n, 3, avgdl, DEFAULT_K1, DEFAULT_B))
    assert hits["c"] == pytest.approx(_bm25_term(1, 2, n, 1, avgdl, DEFAULT_K1, DEFAULT_B))


def test_custom_parameters() -> None:
    docs = [IndexedDoc("short", 0, "cat"), IndexedDoc("long", 1, "cat dog emu fox gnu")]
    # b = 0 disables length normalization: equal tf -> equal score -> position order.
    flat = BM25Index.build(docs, k1=2.0, b=0.0)
    hits = flat.search("cat", k=5)
    assert [h.doc_id for h in hits] == ["short", "long"]
    assert hits[0].score == hits[1].score
    idf = math.log(1 + (2 - 2 + 0.5) / (2 + 0.5))
    assert hits[0].score == pytest.approx(idf * 1 * 3.0 / (1 + 2.0))
    assert (flat.k1, flat.b) == (2.0, 0.0)
    # Default b favours the shorter document.
    assert [h.doc_id for h in BM25Index.build(docs).search("cat", k=5)] == ["short", "long"]
    full = BM25Index.build(docs)
    assert full.search("cat", 5)[0].score > full.search("cat", 5)[1].score


@pytest.mark.parametrize(("k1", "b"), [(-0.1, 0.75), (math.inf, 0.75), (1.2, -0.01), (1.2, 1.5)])
def test_invalid_parameters(k1: float, b: float) -> None:
    with pytest.raises(ValueError):
        BM25Index(k1=k1, b=b)


def test_repeated_query_terms_count_per_occurrence() -> None:
    index = BM25Index.build([IndexedDoc("a", 0, "paris trip"), IndexedDoc("b", 1, "london trip")])
    once = index.search("paris", 5)
    twice = index.search("paris PARIS", 5)
    assert [h.doc_id for h in once] == [h.doc_id for h in twice] == ["a"]
    assert twice[0].score == pytest.approx(2 * once[0].score)


def test_term_in_every_document_still_scores_positive() -> None:
    index = BM25Index.build([IndexedDoc(f"d{i}", i, "common word") for i in range(5)])
    hits = index.search("common", 10)
    assert len(hits) == 5
    assert all(h.score > 0 for h in hits)


def test_possessive_and_cjk_queries_match() -> None:
    index = BM25Index.build(
        [
            IndexedDoc("m1", 0, "Caroline's LGBTQ support group met on Tuesday"),
            IndexedDoc("m2", 1, "她参加了支持小组"),
            IndexedDoc("m3", 2, "Melanie painted a sunrise"),
        ]
    )
    assert [h.doc_id for h in index.search("Caroline", 5)] == ["m1"]
    assert [h.doc_id for h in index.search("ｌｇｂｔｑ", 5)] == ["m1"]
    assert [h.doc_id for h in index.search("支持", 5)] == ["m2"]
    assert [h.doc_id for h in index.search("小组的活动", 5)] == ["m2"]


# --------------------------------------------------------------------------- ordering / edges


def test_identical_documents_tie_in_position_order() -> None:
    docs = [
        IndexedDoc("z", 2, "same text here"),
        IndexedDoc("y", 0, "same text here"),
        IndexedDoc("x", 1, "same text here"),
    ]
    hits = BM25Index.build(docs).search("text", k=10)
    assert [h.doc_id for h in hits] == ["y", "x", "z"]
    assert len({h.score for h in hits}) == 1


def test_equal_score_and_position_tie_breaks_on_doc_id() -> None:
    docs = [IndexedDoc(name, 7, "same text") for name in ("c", "a", "b")]
    assert [h.doc_id for h in BM25Index.build(docs).search("same", 10)] == ["a", "b", "c"]
    assert [h.doc_id for h in BM25Index.build(docs).search("same", 2)] == ["a", "b"]


def test_k_truncation_and_edge_cases() -> None:
    docs = [IndexedDoc(f"d{i}", i, "alpha " * (i + 1)) for i in range(6)]
    index = BM25Index.build(docs)
    assert len(index.search("alpha", 3)) == 3
    assert index.search("alpha", 0) == []
    assert index.search("alpha", -1) == []
    assert index.search("", 5) == []
    assert index.search("   ?! ", 5) == []
    assert index.search("omega", 5) == []
    assert BM25Index().search("alpha", 5) == []
    assert all(isinstance(h, ScoredDoc) for h in index.search("alpha", 10))


def test_empty_text_documents_are_indexed_but_never_match() -> None:
    index = BM25Index.build([IndexedDoc("e", 0, ""), IndexedDoc("f", 1, "word")])
    assert len(index) == 2
    assert index.avgdl == 0.5
    assert [h.doc_id for h in index.search("word", 5)] == ["f"]


# --------------------------------------------------------------------------- mutation


def test_add_remove_bookkeeping() -> None:
    index = BM25Index()
    doc = IndexedDoc("a", 0, "hello world")
    index.add(doc)
    assert "a" in index and len(index) == 1 and index.get("a") == doc
    assert index.document_frequency("hello") == 1
    with pytest.raises(ValueError):
        index.add(IndexedDoc("a", 1, "other"))
    with pytest.raises(ValueError):
        BM25Index.build([doc, doc])
    assert index.remove("a") == doc
    assert "a" not in index and len(index) == 0 and index.get("a") is None
    assert index.document_frequency("hello") == 0
    assert index.search("hello", 5) == []
    with pytest.raises(KeyError):
        index.remove("a")


def test_readding_a_removed_id_matches_fresh_build() -> None:
    index = BM25Index.build([IndexedDoc("a", 0, "x y"), IndexedDoc("b", 1, "y z")])
    index.remove("a")
    index.add(IndexedDoc("a", 5, "z z z"))
    fresh = BM25Index.build([IndexedDoc("b", 1, "y z"), IndexedDoc("a", 5, "z z z")])
    assert index.search("z y", 10) == fresh.search("z y", 10)
    assert index.avgdl == fresh.avgdl


# --------------------------------------------------------------------------- properties

VOCAB = [
    "alpha",
    "Beta",
    "GAMMA",
    "delta",
    "caroline's",
    "Caroline",
    "ＬＧＢＴＱ",
    "lgbtq",
    "支持",
    "支持小组",
    "小组",
    "東京",
    "한국어",
    "café",
    "x",
    "42",
    "-",
    "!",
]

texts = st.lists(st.sampled_from(VOCAB), max_size=8).map(" ".join)
queries = st.lists(st.sampled_from(VOCAB), max_size=4).map(" ".join)
corpora = st.lists(st.tuples(texts, st.integers(0, 5)), max_size=25).map(
    lambda rows: [IndexedDoc(f"d{i:03d}", pos, text) for i, (text, pos) in enumerate(rows)]
)


def _key(hit: ScoredDoc) -> tuple[float, int, str]:
    return (-hit.score, hit.position, hit.doc_id)


def _reference_scores(docs: list[IndexedDoc], query: str) -> dict[str, float]:
    """Brute-force BM25 straight from the formula, for comparison."""
    k1, b = DEFAULT_K1, DEFAULT_B
    toks = {d.doc_id: Counter(tokenize(d.text)) for d in docs}
    n = len(docs)
    avgdl = sum(sum(c.values()) for c in toks.values()) / n if n else 0.0
    scores: dict[str, float] = {}
    for doc_id, counts in toks.items():
        dl = sum(counts.values())
        total = 0.0
        for term, qtf in Counter(tokenize(query)).items():
            tf = counts.get(term, 0)
            if tf:
                df = sum(1 for c in toks.values() if term in c)
                total += qtf * _bm25_term(tf, df, n, dl, avgdl, k1, b)
        if total > 0:
            scores[doc_id] = total
    return scores


@given(corpora, queries, st.integers(1, 30))
def test_results_sorted_by_documented_key(docs: list[IndexedDoc], query: str, k: int) -> None:
    hits = BM25Index.build(docs).search(query, k)
    assert len(hits) <= k
    assert hits == sorted(hits, key=_key)
    assert all(h.score > 0 for h in hits)
    assert len({h.doc_id for h in hits}) == len(hits)


@given(corpora, queries, st.integers(1, 30))
def test_every_hit_shares_a_token_with_the_query(
    docs: list[IndexedDoc], query: str, k: int
) -> None:
    by_id = {d.doc_id: d for d in docs}
    q = set(tokenize(query))
    for hit in BM25Index.build(docs).search(query, k):
        assert q & set(tokenize(by_id[hit.doc_id].text))
        assert hit.position == by_id[hit.doc_id].position


@given(corpora, queries)
def test_matches_brute_force_reference(docs: list[IndexedDoc], query: str) -> None:
    hits = BM25Index.build(docs).search(query, k=len(docs) + 1)
    expected = _reference_scores(docs, query)
    assert {h.doc_id for h in hits} == set(expected)
    for hit in hits:
        assert hit.score == pytest.approx(expected[hit.doc_id], rel=1e-9)


@given(st.data(), corpora, queries, st.integers(1, 30))
def test_independent_of_insertion_order(
    data: st.DataObject, docs: list[IndexedDoc], query: str, k: int
) -> None:
    shuffled = data.draw(st.permutations(docs))
    assert BM25Index.build(docs).search(query, k) == BM25Index.build(shuffled).search(query, k)


@given(st.data(), corpora, queries, st.integers(1, 30))
def test_independent_of_query_term_order(
    data: st.DataObject, docs: list[IndexedDoc], query: str, k: int
) -> None:
    words = query.split(" ")
    permuted = " ".join(data.draw(st.permutations(words)))
    index = BM25Index.build(docs)
    assert index.search(query, k) == index.search(permuted, k)


@given(corpora, queries, st.integers(1, 15), st.integers(0, 15))
def test_top_k_is_prefix_of_top_k_plus_n(
    docs: list[IndexedDoc], query: str, k: int, extra: int
) -> None:
    index = BM25Index.build(docs)
    small, large = index.search(query, k), index.search(query, k + extra)
    assert large[: len(small)] == small
    assert len(small) == min(k, len(large))


@settings(max_examples=150)
@given(st.data(), corpora, corpora, queries, st.integers(1, 30))
def test_incremental_add_remove_equals_fresh_build(
    data: st.DataObject,
    initial: list[IndexedDoc],
    extra: list[IndexedDoc],
    query: str,
    k: int,
) -> None:
    added = [IndexedDoc("new-" + d.doc_id, d.position, d.text) for d in extra]
    index = BM25Index.build(initial)
    live = {d.doc_id: d for d in initial}
    pending = list(added)
    # Interleave removals of live docs with additions of new ones.
    while pending or live:
        add_next: bool = bool(pending) and data.draw(st.booleans())
        remove_next: bool = not add_next and bool(live) and data.draw(st.booleans())
        if add_next:
            doc = pending.pop(0)
            index.add(doc)
            live[doc.doc_id] = doc
        elif remove_next:
            victim = data.draw(st.sampled_from(sorted(live)))
            assert index.remove(victim) == live.pop(victim)
        elif not pending:
            break
    fresh = BM25Index.build(sorted(live.values(), key=lambda d: d.doc_id))
    assert len(index) == len(fresh) == len(live)
    assert index.avgdl == fresh.avgdl
    assert index.search(query, k) == fresh.search(query, k)
    for term in set(tokenize(query)):
        assert index.document_frequency(term) == fresh.document_frequency(term)


# --------------------------------------------------------------------------- top k
# search(q, k) cuts at the k-th best score (ties at the cut broken by the full key) only when
# more than k documents match, so search(q, len(index) + 1)[:k] is the uncut answer; the two
# must be identical. (The scorer of commit 01a31e8 pruned with MaxScore bounds here.)

SKEWED = ["the"] * 12 + ["a"] * 8 + ["is"] * 5 + ["red", "blue", "green", "cat", "dog"] * 2
SKEWED += ["emu", "fox", "gnu", "yak", "owl", "rare1", "rare2"]

skewed_corpora = st.lists(
    st.tuples(st.lists(st.sampled_from(SKEWED), min_size=1, max_size=12), st.integers(0, 9)),
    min_size=1,
    max_size=60,
).map(
    lambda rows: [
        IndexedDoc(f"s{i:03d}", pos, " ".join(words)) for i, (words, pos) in enumerate(rows)
    ]
)
skewed_queries = st.lists(st.sampled_from(sorted(set(SKEWED))), min_size=1, max_size=5).map(
    " ".join
)


@settings(max_examples=300)
@given(skewed_corpora, skewed_queries, st.integers(1, 8))
def test_pruned_search_equals_unpruned(docs: list[IndexedDoc], query: str, k: int) -> None:
    index = BM25Index.build(docs)
    assert index.search(query, k) == index.search(query, len(index) + 1)[:k]


def _zipf_corpus(rng: random.Random, count: int, prefix: str) -> list[IndexedDoc]:
    vocab = [f"w{i}" for i in range(400)]
    cum: list[float] = []
    total = 0.0
    for i in range(len(vocab)):
        total += 1.0 / (i + 1)
        cum.append(total)
    return [
        IndexedDoc(
            f"{prefix}{i:05d}",
            rng.randrange(50),
            " ".join(rng.choices(vocab, cum_weights=cum, k=rng.randint(3, 18))),
        )
        for i in range(count)
    ]


def _zipf_queries(rng: random.Random) -> list[str]:
    queries = ["w0 w1 w2 w3", "w0 w0 w5 w399", "w1 w17 w80 w200", "w2 w3"]
    queries += [" ".join(f"w{rng.randrange(60)}" for _ in range(4)) for _ in range(25)]
    return queries


def test_pruning_is_exact_on_skewed_corpus_with_mutations() -> None:
    rng = random.Random(1234)
    docs = _zipf_corpus(rng, 2000, "a")
    index = BM25Index.build(docs)
    queries = _zipf_queries(rng)
    for query in queries:  # also populates the per-term search caches
        full = index.search(query, len(index) + 1)
        for k in (1, 3, 10, 50):
            assert index.search(query, k) == full[:k]
    # Mutate: drop a quarter of the docs (the shortest ones), check, then add fresh ones;
    # the search caches of their terms must stay sound throughout.
    removed = sorted(docs, key=lambda d: (len(d.text), d.doc_id))[:500]
    for doc in removed:
        index.remove(doc.doc_id)
    gone = {d.doc_id for d in removed}
    remaining = [d for d in docs if d.doc_id not in gone]
    _assert_same_as_fresh(index, remaining, queries)
    # Very short / high-tf docs raise the cached per-term bounds.
    added = _zipf_corpus(rng, 300, "b") + [
        IndexedDoc("c0", 0, "w0"),
        IndexedDoc("c1", 0, "w1 w1"),
        IndexedDoc("c2", 0, " ".join(["w3"] * 9)),
        IndexedDoc("c3", 0, "w17"),
    ]
    for doc in added:
        index.add(doc)
    _assert_same_as_fresh(index, remaining + added, queries)


def _assert_same_as_fresh(index: BM25Index, docs: list[IndexedDoc], queries: list[str]) -> None:
    fresh = BM25Index.build(docs)
    assert len(index) == len(fresh)
    for query in queries:
        full = fresh.search(query, len(fresh) + 1)
        for k in (1, 3, 10, 50):
            assert index.search(query, k) == fresh.search(query, k) == full[:k]


# --------------------------------------------------------------------------- invisible characters


@pytest.mark.parametrize("hidden", ["\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"])
def test_invisible_characters_do_not_split_a_token(hidden: str) -> None:
    """Zero-width characters and soft hyphens are dropped before tokenizing, for documents
    and queries alike: "ma\u200btcha" is the token "matcha" (as normalize_statement reads
    it), not "ma" + "tcha"."""
    assert tokenize(f"Alice likes ma{hidden}tcha.") == ["alice", "likes", "matcha"]
    index = BM25Index.build([IndexedDoc("d", 0, f"Alice likes ma{hidden}tcha.")])
    assert [hit.doc_id for hit in index.search("matcha", 5)] == ["d"]
    clean = BM25Index.build([IndexedDoc("d", 0, "Alice likes matcha.")])
    assert [hit.doc_id for hit in clean.search(f"mat{hidden}cha", 5)] == ["d"]


@pytest.mark.parametrize("hidden", ["\u200b", "\u00ad"])
def test_recall_finds_a_memory_remembered_with_an_invisible_character(
    tmp_path: Path, hidden: str
) -> None:
    """A memory remembered as "Alice likes ma<hidden>tcha." (one memory with the clean
    statement) is recalled by "matcha", before and after the clean statement reinforces it."""
    from memory_ledger.commands.engine import MemoryEngine
    from memory_ledger.ledger.ids import Namespace

    ns = Namespace("acme", "alice", "assistant")
    with MemoryEngine.open(tmp_path / "store") as engine:
        first = engine.remember(ns, f"Alice likes ma{hidden}tcha.")
        assert [h.memory_id for h in engine.recall(ns, "matcha").results] == [str(first.memory_id)]
        again = engine.remember(ns, "Alice likes matcha.")
        assert again.memory_id == first.memory_id
        assert [h.memory_id for h in engine.recall(ns, "matcha").results] == [str(first.memory_id)]


@settings(max_examples=150)
@given(st.data(), corpora, corpora, queries, st.integers(1, 30), st.booleans())
def test_a_copy_and_its_original_move_apart_each_as_a_fresh_build(
    data: st.DataObject,
    initial: list[IndexedDoc],
    extra: list[IndexedDoc],
    query: str,
    k: int,
    restored: bool,
) -> None:
    """``BM25Index.copy`` (of a built index or of one restored from its state, searched
    first or not): removals and additions on the copy and on the original, interleaved,
    leave each ranking as a fresh build of its own documents, and neither sees the other's."""
    built = BM25Index.build(initial)
    original = BM25Index.from_state(built.state()) if restored else built
    if data.draw(st.booleans()):
        original.search(query, k)  # search caches filled
    copy = original.copy()
    sides = {
        "original": (original, {d.doc_id: d for d in initial}),
        "copy": (copy, {d.doc_id: d for d in initial}),
    }
    for side, extra_id in (("copy", "c-"), ("original", "o-")):
        index, docs = sides[side]
        for doc in extra:
            if docs and data.draw(st.booleans()):
                gone = data.draw(st.sampled_from(sorted(docs)))
                index.remove(gone)
                del docs[gone]
            added = IndexedDoc(extra_id + doc.doc_id, doc.position, doc.text)
            index.add(added)
            docs[added.doc_id] = added
    for index, docs in sides.values():
        fresh = BM25Index.build(sorted(docs.values(), key=lambda d: d.doc_id))
        assert index.search(query, k) == fresh.search(query, k)
        assert len(index) == len(fresh) and index.avgdl == fresh.avgdl


# --------------------------------------------------------------------------- vectorised search
# search() scores a query's postings with numpy once they reach text_index.VECTORISE_FROM in
# all, on Python floats below. Both must give what a plain term-at-a-time evaluation of every
# live document gives: the same hits, the same order and the same float scores, bit for bit
# (the same IEEE operations in the same term order), through adds, removes (slots reused), a
# restore from the state and a copy.


def _exhaustive(docs: dict[str, IndexedDoc], query: str, k: int) -> list[ScoredDoc]:
    """Every live document scored term-at-a-time in the index's fixed term order (weight
    descending, then term), sorted by the documented key, cut at ``k``."""
    counts = {d.doc_id: Counter(tokenize(d.text)) for d in docs.values()}
    n = len(counts)
    if k <= 0 or not n:
        return []
    total = sum(sum(c.values()) for c in counts.values())
    avgdl = total / n if total else 1.0
    k1, b = DEFAULT_K1, DEFAULT_B
    terms = []
    for term, qtf in Counter(tokenize(query)).items():
        df = sum(1 for c in counts.values() if term in c)
        if df:
            terms.append((qtf * math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * (k1 + 1.0), term))
    terms.sort(key=lambda entry: (-entry[0], entry[1]))
    scores: dict[str, float] = {}
    for weight, term in terms:
        for doc_id, c in counts.items():
            tf = c.get(term, 0)
            if tf:
                norm = k1 * (1.0 - b + b * sum(c.values()) / avgdl)
                scores[doc_id] = scores.get(doc_id, 0.0) + weight * tf / (tf + norm)
    hits = [ScoredDoc(d, docs[d].position, s) for d, s in scores.items() if s > 0]
    return sorted(hits, key=_key)[:k]


FEW = ["w0", "w1", "w2", "w3", "w4", "w5"]
few_texts = st.lists(st.sampled_from(FEW), max_size=6).map(" ".join)
mutations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), few_texts, st.integers(0, 4), st.booleans()),
        st.tuples(st.just("remove"), st.integers(0, 10_000), st.just(0), st.booleans()),
        st.tuples(st.just("restore"), st.just(""), st.just(0), st.booleans()),
        st.tuples(st.just("copy"), st.just(""), st.just(0), st.booleans()),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(mutations, st.lists(st.sampled_from(FEW), min_size=1, max_size=4), st.integers(1, 12))
def test_vectorised_and_small_search_equal_an_exhaustive_evaluation(
    steps: list[tuple[str, str | int, int, bool]], words: list[str], k: int
) -> None:
    query = " ".join(words)
    index = BM25Index()
    live: dict[str, IndexedDoc] = {}
    _assert_both_paths(index, live, query, k)
    for number, (action, value, position, searched) in enumerate(steps):
        if action == "add":
            doc = IndexedDoc(f"d{number:03d}", position, str(value))
            index.add(doc)
            live[doc.doc_id] = doc
        elif action == "remove" and live:
            victim = sorted(live)[int(value) % len(live)]
            index.remove(victim)
            del live[victim]
        elif action == "restore":
            index = BM25Index.from_state(index.state())
        elif action == "copy":
            index = index.copy()
        if (
            searched or number == len(steps) - 1
        ):  # search mid-way too: caches built, then mutated under them
            _assert_both_paths(index, live, query, k)


def _assert_both_paths(index: BM25Index, live: dict[str, IndexedDoc], query: str, k: int) -> None:
    expected = _exhaustive(live, query, k)
    for threshold in (0, 10**9):  # always numpy, never numpy
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(text_index, "VECTORISE_FROM", threshold)
            assert index.search(query, k) == expected
    reference = _reference_scores(list(live.values()), query)
    for hit in expected:
        assert hit.score == pytest.approx(reference[hit.doc_id], rel=1e-9)


def test_vectorised_search_equals_exhaustive_on_a_larger_skewed_corpus() -> None:
    """Thousands of documents, lists of hundreds of postings (the numpy path at its default
    threshold), a quarter removed and slots reused, restored and copied."""
    rng = random.Random(35)
    docs = _zipf_corpus(rng, 3000, "a")
    index = BM25Index.build(docs)
    queries = _zipf_queries(rng)
    live = {d.doc_id: d for d in docs}
    for query in queries[:8]:
        assert index.search(query, 10) == _exhaustive(live, query, 10)
    for doc in rng.sample(docs, 750):
        index.remove(doc.doc_id)
        del live[doc.doc_id]
    restored = BM25Index.from_state(index.state())
    for doc in _zipf_corpus(rng, 400, "b"):
        index.add(doc)
        restored.add(doc)
        live[doc.doc_id] = doc
    copied = restored.copy()
    for query in queries[8:16]:
        expected = _exhaustive(live, query, 25)
        assert index.search(query, 25) == restored.search(query, 25) == expected
        assert copied.search(query, 25) == expected


def test_concurrent_searches_answer_as_serial_ones() -> None:
    """Searches running at once on one index (each takes its own accumulator; the first to
    need a term's cache filters out the slots removed since it was made, the others wait)
    give the answers of a fresh build of the same documents."""
    rng = random.Random(7)
    docs = _zipf_corpus(rng, 4000, "c")
    index = BM25Index.build(docs)
    queries = _zipf_queries(rng)
    for query in queries:
        index.search(query, 20)  # every query term cached
    gone = set(rng.sample([d.doc_id for d in docs], 1000))
    for doc_id in sorted(gone):
        index.remove(doc_id)  # noted against the caches, filtered by the racing searches
    fresh = BM25Index.build(d for d in docs if d.doc_id not in gone)
    serial = {query: fresh.search(query, 20) for query in queries}
    start = threading.Barrier(4)
    failures: list[str] = []

    def worker() -> None:
        start.wait()
        for _ in range(20):
            for query in queries:
                try:
                    if index.search(query, 20) != serial[query]:
                        failures.append(query)
                except Exception as error:  # noqa: BLE001 - reported by the assertion below
                    failures.append(f"{query}: {error!r}")

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures


@given(
    st.lists(st.text("abz09_", min_size=1, max_size=8), max_size=8).map(" ".join)
    | st.text("abz09_ .A-\t", max_size=30)
)
def test_analyzed_text_tokenizes_as_every_ascii_text(text: str) -> None:
    """Text that is already lowercase word runs joined by single spaces (an analyzed
    document) gives the tokens any ASCII text gives: ``\\w+`` runs of its lower case."""
    assert tokenize(text) == re.findall(r"\w+", text.lower())
