"""Tests for commands.context.assembler: budgets, required items, dedupe, ordering, providers,
tokens."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Sequence

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_ledger import projections
from memory_ledger.commands.context import ContextAssembler, ContextItem, ContextQuery
from memory_ledger.commands.context.assembler import (
    BALANCED,
    AssembledContext,
    AssemblyPolicy,
    ContextProvider,
    ContextProviderError,
    FailureMode,
    StaticContextProvider,
    assemble_items,
    estimate_tokens,
    render_context,
)
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.ledger.ids import normalize_statement

Q = ContextQuery(session_id="s1", turn_id=1, query="what do I like?")

# Generous: only reached if something is broken; never asserted on.
WAIT_S = 30.0


def item(
    item_id: str,
    source: str = "memory",
    text: str | None = None,
    relevance: float = 0.5,
    *,
    required: bool = False,
    kind: str = "memory",
) -> ContextItem:
    return ContextItem(
        item_id=item_id,
        source=source,
        kind=kind,
        text=text if text is not None else f"fact {item_id}",
        relevance=relevance,
        required=required,
    )


class FailingProvider:
    def __init__(self, name: str, failure_mode: FailureMode = "fail_open") -> None:
        self._name = name
        self._failure_mode: FailureMode = failure_mode

    @property
    def name(self) -> str:
        return self._name

    @property
    def failure_mode(self) -> FailureMode:
        return self._failure_mode

    def query(self, q: ContextQuery) -> Sequence[ContextItem]:
        raise RuntimeError("index offline")


class BlockingProvider:
    """Waits on ``release`` (bounded) before answering: simulates a hung provider."""

    def __init__(self, name: str, release: threading.Event, failure_mode: FailureMode) -> None:
        self._name = name
        self._release = release
        self._failure_mode: FailureMode = failure_mode

    @property
    def name(self) -> str:
        return self._name

    @property
    def failure_mode(self) -> FailureMode:
        return self._failure_mode

    def query(self, q: ContextQuery) -> Sequence[ContextItem]:
        self._release.wait(WAIT_S)
        return [item("late", self._name)]


class BarrierProvider:
    """Passes only if another provider reaches the same barrier at the same time."""

    def __init__(self, name: str, barrier: threading.Barrier) -> None:
        self._name = name
        self._barrier = barrier

    @property
    def name(self) -> str:
        return self._name

    @property
    def failure_mode(self) -> FailureMode:
        return "fail_closed"

    def query(self, q: ContextQuery) -> Sequence[ContextItem]:
        self._barrier.wait(WAIT_S)
        return [item(f"{self._name}-1", self._name, f"from {self._name}")]


class RecordingProvider:
    """No ``failure_mode`` attribute at all: must default to fail-open."""

    def __init__(self) -> None:
        self.queries: list[ContextQuery] = []

    @property
    def name(self) -> str:
        return "recording"

    def query(self, q: ContextQuery) -> Sequence[ContextItem]:
        self.queries.append(q)
        raise ValueError("boom")


def ids(result: AssembledContext) -> list[str]:
    return [i.item_id for i in result.items]


# --------------------------------------------------------------------------- shapes


def test_balanced_policy_is_a3s_numbers() -> None:
    assert BALANCED == AssemblyPolicy(12, 4000, 6, 2500)


def test_estimate_tokens_is_reused_from_memory_map() -> None:
    assert estimate_tokens is projections.memory_map.estimate_tokens


def test_item_defaults_and_frozen() -> None:
    it = ContextItem("a", "memory", "memory", "text", 0.3)
    assert it.required is False
    assert it.memory_id is None and it.revision is None
    assert it.metadata == {}
    with pytest.raises(AttributeError):
        it.text = "other"  # type: ignore[misc]


@pytest.mark.parametrize("relevance", [-0.1, 1.5, float("nan"), float("inf")])
def test_item_relevance_out_of_range_rejected(relevance: float) -> None:
    with pytest.raises(ValueError, match="relevance"):
        item("a", relevance=relevance)


def test_policy_rejects_negative_limits() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        AssemblyPolicy(1, -1, 1, 1)


def test_assembler_rejects_duplicate_provider_names() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        ContextAssembler([StaticContextProvider("a"), StaticContextProvider("a")])


def test_static_provider_is_a_context_provider_and_stamps_source() -> None:
    provider = StaticContextProvider("agents_md", [item("x", source="elsewhere")])
    assert isinstance(provider, ContextProvider)
    assert provider.failure_mode == "fail_open"
    assert [i.source for i in provider.query(Q)] == ["agents_md"]


def test_memory_item_keeps_admission_fields() -> None:
    mem = ContextItem("m1", "memory", "memory", "likes tea", 0.9, memory_id="mid", revision=3)
    result = ContextAssembler([StaticContextProvider("memory", [mem])]).assemble(Q)
    assert result.items[0].memory_id == "mid" and result.items[0].revision == 3


# --------------------------------------------------------------------------- tokens


def test_cjk_token_estimate() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("我喜欢喝茶") == 5  # Han
    assert estimate_tokens("ひらがなカタカナ") == 8  # Kana
    assert estimate_tokens("안녕하세요") == 5  # Hangul
    assert estimate_tokens("tea 茶") == 2  # 1 CJK + ceil(4 / 4)


def test_cjk_items_budgeted_by_character() -> None:
    policy = AssemblyPolicy(10, 10, 10, 10)
    a = item("a", text="我" * 8, relevance=0.9)  # 8 tokens
    b = item("b", text="你" * 3, relevance=0.8)  # 3 tokens: does not fit
    c = item("c", text="ab", relevance=0.1)  # 1 token: fits
    result = assemble_items([a, b, c], policy)
    assert ids(result) == ["a", "c"]
    assert result.estimated_tokens == 9


# --------------------------------------------------------------------------- budgets


def test_balanced_global_item_limit_and_no_crowding() -> None:
    big = [item(f"m{n:02}", "memory", relevance=0.99 - n * 0.01) for n in range(20)]
    small = [item(f"r{n}", "resources", relevance=0.1, kind="resource") for n in range(3)]
    docs = [item(f"d{n}", "docs", relevance=0.05, kind="resource") for n in range(10)]
    assembler = ContextAssembler(
        [
            StaticContextProvider("memory", big),
            StaticContextProvider("resources", small),
            StaticContextProvider("docs", docs),
        ]
    )
    result = assembler.assemble(Q)
    per_source = Counter(i.source for i in result.items)
    # 6 per source from memory despite its much higher relevance; others still get in.
    assert per_source == {"memory": 6, "resources": 3, "docs": 3}
    assert len(result.items) == 12
    reasons = {d.item_id: d.reason for d in result.dropped}
    assert reasons["m06"] == "source_limit"
    assert reasons["d3"] == "over_budget"
    assert len(result.items) + len(result.dropped) == 33


def test_balanced_token_limits_skip_big_items_and_continue() -> None:
    huge = "x" * 4 * 2400  # 2400 tokens
    items_ = [
        item("a", "memory", huge, 0.9),
        item("b", "memory", "y" * 4 * 200, 0.8),  # 200 tokens: 2600 > 2500 per source
        item("c", "memory", "z" * 4 * 50, 0.7),  # 50 tokens: fits (2450)
        item("d", "files", "w" * 4 * 1500, 0.6),  # 1500: 2450 + 1500 = 3950 fits global
        item("e", "files", "v" * 4 * 100, 0.5),  # 100: 4050 > 4000 global
        item("f", "files", "u" * 4 * 50, 0.4),  # 50: 4000 fits exactly
    ]
    result = assemble_items(items_, BALANCED)
    assert ids(result) == ["a", "c", "d", "f"]
    assert result.estimated_tokens == 4000
    assert {d.item_id: d.reason for d in result.dropped} == {
        "b": "source_limit",
        "e": "over_budget",
    }


def test_required_items_always_kept_beyond_budgets() -> None:
    policy = AssemblyPolicy(2, 10, 1, 5)
    agents = [
        item(f"agents{n}", "agents_md", "rule " * 20 + str(n), 0.1, required=True) for n in range(3)
    ]
    memories = [item(f"m{n}", "memory", f"t{n}", 1.0) for n in range(3)]
    result = assemble_items([*memories, *agents], policy)
    # All three required (over every limit) kept, first; they use up the budget for the rest.
    assert ids(result) == ["agents0", "agents1", "agents2"]
    assert {d.reason for d in result.dropped} == {"over_budget"}


def test_required_items_count_against_budget() -> None:
    policy = AssemblyPolicy(3, 100, 3, 100)
    result = assemble_items(
        [
            item("req", "agents_md", "be brief", 0.0, required=True),
            item("a", "memory", "a1", 0.9),
            item("b", "memory", "b1", 0.8),
            item("c", "memory", "c1", 0.7),
        ],
        policy,
    )
    assert ids(result) == ["req", "a", "b"]
    assert [(d.item_id, d.reason) for d in result.dropped] == [("c", "over_budget")]


# --------------------------------------------------------------------------- dedupe


def test_dedupe_keeps_highest_relevance() -> None:
    result = assemble_items(
        [
            item("a", "memory", "User likes green tea.", 0.4),
            item("b", "notes", "  user LIKES   green tea", 0.8),
            item("c", "files", "ｕｓｅｒ likes green tea!", 0.6),
        ]
    )
    assert ids(result) == ["b"]
    assert sorted((d.item_id, d.reason) for d in result.dropped) == [
        ("a", "duplicate"),
        ("c", "duplicate"),
    ]


def test_dedupe_required_beats_relevance() -> None:
    result = assemble_items(
        [
            item("hi", "memory", "Run the tests", 1.0),
            item("req", "agents_md", "run the tests.", 0.0, required=True),
        ]
    )
    assert ids(result) == ["req"]
    assert result.items[0].required


def test_dedupe_tie_prefers_earlier_source_then_item_id() -> None:
    result = assemble_items(
        [
            item("z", "first", "same", 0.5),
            item("a", "second", "same", 0.5),
            item("b", "first", "same", 0.5),
        ]
    )
    assert [(i.source, i.item_id) for i in result.items] == [("first", "b")]


# --------------------------------------------------------------------------- ordering/render


def test_rank_order_and_tie_break() -> None:
    items_ = [
        item("b", "zeta", relevance=0.5),
        item("a", "zeta", relevance=0.5),
        item("c", "alpha", relevance=0.5),
        item("d", "alpha", relevance=0.9),
        item("r", "zeta", relevance=0.1, required=True),
    ]
    result = assemble_items(items_)
    assert [(i.source, i.item_id) for i in result.items] == [
        ("zeta", "r"),
        ("alpha", "d"),
        ("alpha", "c"),
        ("zeta", "a"),
        ("zeta", "b"),
    ]


def test_deterministic_across_runs_and_input_permutation() -> None:
    items_ = [item(f"i{n}", f"s{n % 3}", f"text {n % 7}", (n * 37 % 11) / 10) for n in range(30)]
    first = assemble_items(items_, AssemblyPolicy(5, 20, 2, 8))
    by_source = sorted(items_, key=lambda i: (i.source, -int(i.item_id[1:])))
    # Same source order (first appearance s0, s1, s2), items reversed within sources.
    second = assemble_items(by_source, AssemblyPolicy(5, 20, 2, 8))
    assert first == second
    assert first == assemble_items(items_, AssemblyPolicy(5, 20, 2, 8))


def test_render_groups_by_source_in_provider_order() -> None:
    assembler = ContextAssembler(
        [
            StaticContextProvider("agents_md", [item("r", text="Be concise.", required=True)]),
            StaticContextProvider(
                "memory", [item("m1", text="Likes tea", relevance=0.9), item("m2", text="A\nB")]
            ),
            StaticContextProvider("empty", []),
        ]
    )
    result = assembler.assemble(Q)
    assert result.rendered == ("## agents_md\n- Be concise.\n\n## memory\n- Likes tea\n- A\n  B\n")
    assert result.skipped == ()
    assert render_context([]) == ""


# --------------------------------------------------------------------------- providers


def test_fail_open_provider_raising_is_skipped_and_reported() -> None:
    recording = RecordingProvider()
    assembler = ContextAssembler(
        [
            FailingProvider("vector"),
            StaticContextProvider("memory", [item("m1")]),
            recording,  # type: ignore[list-item]  # no failure_mode: defaults to fail_open
        ]
    )
    result = assembler.assemble(Q)
    assert ids(result) == ["m1"]
    assert [(s.provider, s.error_type, s.message) for s in result.skipped] == [
        ("vector", "RuntimeError", "index offline"),
        ("recording", "ValueError", "boom"),
    ]
    assert recording.queries == [Q]


def test_fail_open_provider_timing_out_is_skipped_and_reported() -> None:
    release = threading.Event()
    try:
        assembler = ContextAssembler(
            [
                BlockingProvider("slow", release, "fail_open"),
                StaticContextProvider("memory", [item("m1")]),
            ],
            timeout_s=0.2,
        )
        result = assembler.assemble(Q)
    finally:
        release.set()
    assert ids(result) == ["m1"]
    assert len(result.skipped) == 1
    assert result.skipped[0].provider == "slow"
    assert result.skipped[0].error_type == "TimeoutError"


def test_fail_closed_provider_raising_fails_the_turn() -> None:
    assembler = ContextAssembler(
        [
            StaticContextProvider("memory", [item("m1")]),
            FailingProvider("policy", "fail_closed"),
        ]
    )
    with pytest.raises(ContextProviderError) as info:
        assembler.assemble(Q)
    assert isinstance(info.value, MemoryLedgerError)
    assert info.value.provider == "policy"
    assert info.value.error_type == "RuntimeError"
    assert "policy" in str(info.value)
    assert isinstance(info.value.__cause__, RuntimeError)


def test_fail_closed_provider_timing_out_fails_the_turn() -> None:
    release = threading.Event()
    try:
        assembler = ContextAssembler(
            [BlockingProvider("guard", release, "fail_closed")], timeout_s=0.2
        )
        with pytest.raises(ContextProviderError) as info:
            assembler.assemble(Q)
    finally:
        release.set()
    assert info.value.provider == "guard"
    assert info.value.error_type == "TimeoutError"


def test_bad_provider_result_is_a_provider_failure() -> None:
    class Bad:
        name = "bad"
        failure_mode: FailureMode = "fail_open"

        def query(self, q: ContextQuery) -> Sequence[ContextItem]:
            return ["not an item"]  # type: ignore[list-item]

    result = ContextAssembler([Bad()]).assemble(Q)
    assert result.items == ()
    assert result.skipped[0].error_type == "TypeError"


def test_providers_run_concurrently() -> None:
    barrier = threading.Barrier(2)
    assembler = ContextAssembler(
        [BarrierProvider("left", barrier), BarrierProvider("right", barrier)],
        timeout_s=WAIT_S * 2,
    )
    # Sequential calls would break the barrier (BrokenBarrierError -> fail-closed error).
    result = assembler.assemble(Q)
    assert ids(result) == ["left-1", "right-1"]
    assert not barrier.broken


def test_no_providers_yields_empty_context() -> None:
    result = ContextAssembler([]).assemble(Q)
    assert result == AssembledContext((), (), (), 0, "")


def test_assembled_context_serializes() -> None:
    result = ContextAssembler([StaticContextProvider("memory", [item("m1")])]).assemble(Q)
    decoded = msgspec.json.decode(msgspec.json.encode(result), type=AssembledContext)
    assert decoded == result


# --------------------------------------------------------------------------- property

SOURCES = ["agents_md", "memory", "files"]

item_strategy = st.builds(
    lambda source, text, relevance, required: (source, text, relevance, required),
    st.sampled_from(SOURCES),
    st.text(alphabet="ab 我.", max_size=12),
    st.floats(min_value=0.0, max_value=1.0, allow_nan=False),
    st.booleans(),
)

policy_strategy = st.builds(
    AssemblyPolicy,
    st.integers(0, 8),
    st.integers(0, 20),
    st.integers(0, 4),
    st.integers(0, 12),
)


@settings(max_examples=300, deadline=None)
@given(raw=st.lists(item_strategy, max_size=25), policy=policy_strategy, data=st.data())
def test_selection_respects_limits_and_partitions_input(
    raw: list[tuple[str, str, float, bool]], policy: AssemblyPolicy, data: st.DataObject
) -> None:
    items_ = [
        item(f"i{n}", source, text, relevance, required=required)
        for n, (source, text, relevance, required) in enumerate(raw)
    ]
    result = assemble_items(items_, policy)

    # selected ∪ dropped = all input items, disjoint.
    everything = Counter((i.source, i.item_id) for i in items_)
    chosen = Counter((i.source, i.item_id) for i in result.items)
    dropped = Counter((d.source, d.item_id) for d in result.dropped)
    assert chosen + dropped == everything
    assert not (set(chosen) & set(dropped))

    # No two selected items share normalized text.
    keys = [normalize_statement(i.text) for i in result.items]
    assert len(keys) == len(set(keys))

    # Every required item is selected unless a required duplicate of it was.
    selected_required = {normalize_statement(i.text) for i in result.items if i.required}
    for it in items_:
        if it.required:
            assert normalize_statement(it.text) in selected_required

    # Limits are exceeded only through required items.
    def check(scope: list[ContextItem], max_items: int, max_tokens: int) -> None:
        tokens = sum(estimate_tokens(i.text) for i in scope)
        if len(scope) > max_items or tokens > max_tokens:
            assert all(i.required for i in scope)

    check(list(result.items), policy.max_items, policy.max_tokens)
    for source in SOURCES:
        scope = [i for i in result.items if i.source == source]
        check(scope, policy.max_items_per_source, policy.max_tokens_per_source)
    assert result.estimated_tokens == sum(estimate_tokens(i.text) for i in result.items)

    # A budget drop really did not fit (the selection only grows, so it still does not).
    total_tokens = result.estimated_tokens
    by_id = {(i.source, i.item_id): i for i in items_}
    for d in result.dropped:
        it = by_id[(d.source, d.item_id)]
        t = estimate_tokens(it.text)
        same = [i for i in result.items if i.source == it.source]
        same_tokens = sum(estimate_tokens(i.text) for i in same)
        if d.reason == "over_budget":
            assert len(result.items) + 1 > policy.max_items or total_tokens + t > policy.max_tokens
        elif d.reason == "source_limit":
            assert (
                len(same) + 1 > policy.max_items_per_source
                or same_tokens + t > policy.max_tokens_per_source
            )

    # Selected items are in rank order: required first, then relevance descending.
    ranks = [(not i.required, -i.relevance, i.source, i.item_id) for i in result.items]
    assert ranks == sorted(ranks)

    # Deterministic: permuting items within each source gives the same result.
    shuffled: list[ContextItem] = []
    for source in dict.fromkeys(i.source for i in items_):
        group = [i for i in items_ if i.source == source]
        shuffled.extend(data.draw(st.permutations(group)))
    assert assemble_items(shuffled, policy) == result


@settings(max_examples=25, deadline=None)
@given(raw=st.lists(item_strategy, max_size=15))
def test_assembler_matches_pure_selection(raw: list[tuple[str, str, float, bool]]) -> None:
    items_ = [
        item(f"i{n}", source, text, relevance, required=required)
        for n, (source, text, relevance, required) in enumerate(raw)
    ]
    providers = [
        StaticContextProvider(source, [i for i in items_ if i.source == source])
        for source in SOURCES
    ]
    in_provider_order = [i for p in providers for i in p.query(Q)]
    policy = AssemblyPolicy(4, 10, 2, 6)
    result = ContextAssembler(providers, policy).assemble(Q)
    assert result == assemble_items(in_provider_order, policy)
