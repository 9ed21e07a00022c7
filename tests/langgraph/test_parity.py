"""Parity with LangGraph's own ``InMemoryStore``: the same operations give the same items,
namespaces and errors.

Differences on purpose (each test says where it compares less than everything):

- timestamps: ours are the ledger's recorded times (``created_at`` kept across updates, as
  PostgresStore does; InMemoryStore resets it on every put), so items compare by
  namespace, key and value;
- search order without a query: LangGraph defines none (InMemoryStore gives insertion
  order, PostgresStore ``updated_at`` descending, ours the newest memory first), so results
  compare as sets; with a query, ranking is the engine's hybrid recall (scores differ);
- list_namespaces lists the namespaces that hold items (as PostgresStore); InMemoryStore
  also keeps listing a namespace whose items were deleted, or that was only read (its
  ``defaultdict``), so its empty namespaces are dropped before comparing (:func:`listed`);
- an ordering filter (``$gt`` ...) on a missing field does not match here, where
  InMemoryStore raises ``TypeError``; the random sequences give every item the field.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchOp,
)
from langgraph.store.memory import InMemoryStore

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.errors import CommandRejectedError
from memory_ledger.replay.langgraph_store import FilterError, LedgerStore, StoreNamespaceError


@pytest.fixture(scope="module")
def shared_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryEngine]:
    with MemoryEngine.open(tmp_path_factory.mktemp("parity") / "store") as opened:
        yield opened


def fresh(engine: MemoryEngine) -> LedgerStore:
    """A store over a namespace nobody used (tenants are isolated: a fresh tenant is an
    empty store)."""
    return LedgerStore(engine, Namespace("parity", "lg", uuid.uuid4().hex))


def view(item: Item | None) -> tuple[Any, ...] | None:
    return None if item is None else (item.namespace, item.key, item.value)


def views(items: list[Any]) -> set[tuple[Any, ...]]:
    return {(i.namespace, i.key, repr(i.value)) for i in items}


def listed(store: InMemoryStore, **call: Any) -> list[tuple[str, ...]]:
    """InMemoryStore's namespaces without the empty ones (see the module doc)."""
    for empty in [ns for ns, items in store._data.items() if not items]:
        del store._data[empty]
    return store.list_namespaces(**call)


def both(engine: MemoryEngine) -> tuple[InMemoryStore, LedgerStore]:
    return InMemoryStore(), fresh(engine)


def test_put_get_update_delete(shared_engine: MemoryEngine) -> None:
    theirs, ours = both(shared_engine)
    for store in (theirs, ours):
        store.put(("users", "alice"), "prefs", {"food": "tea", "n": 1, "nested": {"a": [1, 2]}})
        store.put(("users", "alice"), "Prefs", {"food": "coffee"})  # keys are case-sensitive
        store.put(("users", "alice"), "prefs", {"food": "green tea", "n": 2})
    for key in ("prefs", "Prefs", "missing"):
        assert view(ours.get(("users", "alice"), key)) == view(theirs.get(("users", "alice"), key))
    for store in (theirs, ours):
        store.delete(("users", "alice"), "prefs")
        store.delete(("users", "alice"), "never-there")
    assert ours.get(("users", "alice"), "prefs") is None
    assert theirs.get(("users", "alice"), "prefs") is None
    assert view(ours.get(("users", "alice"), "Prefs")) == view(
        theirs.get(("users", "alice"), "Prefs")
    )


def test_a_value_comes_back_exactly(shared_engine: MemoryEngine) -> None:
    ours = fresh(shared_engine)
    value = {"z": 1, "a": [1.5, None, True, "ü 汉字"], "m": {"k": {"deep": -3}}, "e": {}}
    ours.put(("docs",), "d", value)
    got = ours.get(("docs",), "d")
    assert got is not None and got.value == value and list(got.value) == list(value)


def test_times_are_recorded_times(shared_engine: MemoryEngine) -> None:
    ours = fresh(shared_engine)
    ours.put(("docs",), "d", {"v": 1})
    first = ours.get(("docs",), "d")
    ours.put(("docs",), "d", {"v": 2})
    second = ours.get(("docs",), "d")
    assert first is not None and second is not None
    assert second.created_at == first.created_at  # kept across updates (as PostgresStore)
    assert second.updated_at > first.updated_at
    versions = ours.history(("docs",), "d")
    assert [v.recorded_at for v in versions] == [first.created_at, second.updated_at]


def test_search_filters(shared_engine: MemoryEngine) -> None:
    theirs, ours = both(shared_engine)
    for store in (theirs, ours):
        for i in range(6):
            ns = ("docs", "a") if i % 2 else ("docs", "b")
            store.put(ns, f"k{i}", {"n": i, "kind": "odd" if i % 2 else "even", "m": {"x": i}})
        store.put(("other",), "x", {"n": 3, "kind": "odd"})
    filters: list[dict[str, Any]] = [
        {"kind": "odd"},
        {"n": {"$gt": 2}},
        {"n": {"$gte": 2, "$lt": 5}},
        {"n": {"$lte": 1}},
        {"n": {"$ne": 3}},
        {"n": {"$eq": 4}},
        {"m": {"x": 5}},
    ]
    for wanted in filters:
        for prefix in (("docs",), ("docs", "a"), ()):
            mine = ours.search(prefix, filter=wanted, limit=100)
            expected = theirs.search(prefix, filter=wanted, limit=100)
            assert views(mine) == views(expected), (prefix, wanted)
    with pytest.raises(FilterError):
        ours.search(("docs",), filter={"n": {"$regex": "x"}})
    with pytest.raises(ValueError):
        theirs.search(("docs",), filter={"n": {"$regex": "x"}})


def test_a_dotted_filter_key_names_a_nested_field(shared_engine: MemoryEngine) -> None:
    """As LangGraph's SqliteStore reads a filter key as a JSON path (its suite's
    ``test_filter_keys_with_hyphens_and_digits``); InMemoryStore and PostgresStore read
    top-level keys only, which a literal top-level key with dots still is here."""
    ours = fresh(shared_engine)
    ours.put(("docs",), "hyphen", {"access-level": "public", "user": {"access-level": "in"}})
    ours.put(("docs",), "digit", {"123abc": "ok", "user": {"123abc": "ok2", "n": 3}})
    ours.put(("docs",), "literal", {"a.b": 1, "a": {"b": 2}})
    cases: list[tuple[dict[str, Any], set[str]]] = [
        ({"access-level": "public"}, {"hyphen"}),
        ({"user.access-level": "in"}, {"hyphen"}),
        ({"user.123abc": "ok2"}, {"digit"}),
        ({"user.n": {"$gt": 2}}, {"digit"}),
        ({"user.n": {"$gt": 3}}, set()),
        ({"a.b": 1}, {"literal"}),  # the literal top-level key wins over the path
        ({"a.b": 2}, set()),
        ({"user.access-level.deeper": "in"}, set()),
    ]
    for wanted, keys in cases:
        assert {item.key for item in ours.search(("docs",), filter=wanted)} == keys, wanted


def test_search_pages_and_query(shared_engine: MemoryEngine) -> None:
    theirs, ours = both(shared_engine)
    for store in (theirs, ours):
        for i in range(7):
            store.put(("docs",), f"k{i}", {"text": f"note {i} about {'tea' if i < 3 else 'rain'}"})
    pages = [ours.search(("docs",), limit=3, offset=o) for o in (0, 3, 6)]
    assert [len(p) for p in pages] == [3, 3, 1]
    assert views([i for p in pages for i in p]) == views(theirs.search(("docs",), limit=10))
    hits = ours.search(("docs",), query="tea", limit=10)
    # Ranking differs on purpose (BM25 here, no ranking without embeddings there): the
    # matches come first with a score, then every other item without one, as InMemoryStore
    # fills a page with unscored items.
    assert {i.key for i in hits[:3]} == {"k0", "k1", "k2"}
    assert all(i.score is not None and i.score > 0 for i in hits[:3])
    assert all(i.score is None for i in hits[3:])
    assert views(hits) == views(theirs.search(("docs",), query="tea", limit=10))


def test_index_fields_choose_what_is_searched(shared_engine: MemoryEngine) -> None:
    ours = LedgerStore(
        shared_engine,
        Namespace("parity", "fields", uuid.uuid4().hex),
        index={"fields": ["title", "parts[*].body"], "dims": 4},
    )
    ours.put(("d",), "a", {"title": "apples", "parts": [{"body": "orchard"}, {"body": "cider"}]})
    ours.put(("d",), "b", {"title": "pears", "note": "orchard"}, index=["note"])
    ours.put(("d",), "c", {"title": "cider"}, index=False)
    assert [i.key for i in ours.search(("d",), query="cider") if i.score] == ["a"]
    assert {i.key for i in ours.search(("d",), query="orchard") if i.score} == {"a", "b"}
    assert [i.key for i in ours.search(("d",), query="apples") if i.score] == ["a"]


def test_list_namespaces(shared_engine: MemoryEngine) -> None:
    theirs, ours = both(shared_engine)
    spaces = [("a",), ("a", "b"), ("a", "b", "c"), ("a", "c"), ("x", "b"), ("x", "y", "c")]
    for store in (theirs, ours):
        for ns in spaces:
            store.put(ns, "k", {"v": 1})
        store.delete(("a", "c"), "k")
    calls: list[dict[str, Any]] = [
        {},
        {"prefix": ("a",)},
        {"prefix": ("*", "b")},
        {"suffix": ("c",)},
        {"suffix": ("*", "c")},
        {"prefix": ("a",), "suffix": ("c",)},
        {"max_depth": 1},
        {"max_depth": 2, "prefix": ("a",)},
        {"limit": 2, "offset": 1},
    ]
    for call in calls:
        assert ours.list_namespaces(**call) == listed(theirs, **call), call


@pytest.mark.parametrize(
    "namespace",
    [(), ("",), ("a.b",), ("langgraph",), ("ok", "a\x00b")],
)
def test_namespace_errors_are_langgraphs(
    shared_engine: MemoryEngine, namespace: tuple[str, ...]
) -> None:
    theirs, ours = both(shared_engine)
    for store in (theirs, ours):
        with pytest.raises(InvalidNamespaceError):
            store.put(namespace, "k", {"v": 1})


@pytest.mark.parametrize("namespace", [("",), ("a.b",), ("ok", "a\x00b"), ("x", 5)])
def test_batch_refuses_the_labels_langgraph_refuses_there(
    shared_engine: MemoryEngine, namespace: tuple[str, ...]
) -> None:
    """Ops handed to batch directly are checked as LangGraph checks them there
    (``validate_op_namespace``: labels only): both LangGraph's error and the engine's typed
    error, for every kind of op."""
    ours = fresh(shared_engine)
    ops: list[Op] = [
        PutOp(namespace, "k", {"v": 1}),
        GetOp(namespace, "k"),
        SearchOp(namespace),
        ListNamespacesOp(match_conditions=(MatchCondition("prefix", namespace),)),
    ]
    for op in ops:
        with pytest.raises(StoreNamespaceError) as raised:
            ours.batch([op])
        assert isinstance(raised.value, InvalidNamespaceError)
        assert raised.value.reason_code == "invalid_langgraph_namespace"
    assert ours.search(()) == []


@pytest.mark.parametrize("namespace", [(), ("langgraph",), ("langgraph", "x")])
def test_batch_stores_what_only_put_refuses(
    shared_engine: MemoryEngine, namespace: tuple[str, ...]
) -> None:
    """LangGraph reserves the root label ``langgraph`` (and refuses an empty namespace) in
    ``put()`` only (``_validate_namespace``); handed to ``batch``, InMemoryStore,
    PostgresStore and SqliteStore store such an op. So does this store (it refused them)."""
    theirs, ours = both(shared_engine)
    ops: list[Op] = [PutOp(namespace, "k", {"v": 1}), PutOp(namespace, "j", {"v": 2})]
    assert ours.batch(ops) == theirs.batch(ops) == [None, None]
    for key in ("k", "j"):
        assert view(ours.get(namespace, key)) == view(theirs.get(namespace, key))
        got = ours.batch([GetOp(namespace, key)])[0]
        assert view(cast(Item, got)) == view(cast(Item, theirs.batch([GetOp(namespace, key)])[0]))
    assert ours.list_namespaces() == listed(theirs) == [namespace]
    assert views(ours.search(namespace)) == views(theirs.search(namespace))
    ours.batch([PutOp(namespace, "k", None)])
    assert ours.get(namespace, "k") is None and view(ours.get(namespace, "j")) is not None


def test_batch_reads_before_writes_and_last_put_wins(shared_engine: MemoryEngine) -> None:
    theirs, ours = both(shared_engine)
    for store in (theirs, ours):
        store.put(("b",), "k", {"v": 0})
    ops: list[Op] = [
        PutOp(("b",), "k", {"v": 1}),
        GetOp(("b",), "k"),
        PutOp(("b",), "k", {"v": 2}),
        PutOp(("b",), "j", {"v": 3}),
        PutOp(("b",), "j", None),
        SearchOp(("b",)),
    ]
    mine, expected = ours.batch(ops), theirs.batch(ops)
    assert view(cast(Item, mine[1])) == view(cast(Item, expected[1])) == (("b",), "k", {"v": 0})
    assert views(cast(list[Item], mine[5])) == views(cast(list[Item], expected[5]))
    for key in ("k", "j"):
        assert view(ours.get(("b",), key)) == view(theirs.get(("b",), key))
    assert [v.value for v in ours.history(("b",), "k")] == [{"v": 0}, {"v": 2}]  # one put
    assert ours.history(("b",), "j") == []  # put then deleted in one batch: nothing sent


def test_values_the_engine_refuses(shared_engine: MemoryEngine) -> None:
    ours = fresh(shared_engine)
    secret = "AKIA" + "IOSFODNN7EXAMPLE"
    with pytest.raises(CommandRejectedError) as raised:
        ours.put(("d",), "k", {"aws": secret}, index=False)
    assert raised.value.reason_code == "secret_detected"
    with pytest.raises(CommandRejectedError) as raised:
        ours.put(("d",), "k", {"bad": object()})
    assert raised.value.reason_code == "value_not_json"
    with pytest.raises(CommandRejectedError) as raised:
        ours.put(("d",), "k", {"long": "x" * 70_000}, index=False)
    assert raised.value.reason_code == "value_too_large"
    assert ours.get(("d",), "k") is None
    assert ours.search(()) == []


def test_tenant_comes_from_the_constructor(shared_engine: MemoryEngine) -> None:
    one, two = fresh(shared_engine), fresh(shared_engine)
    one.put(("users", "alice"), "k", {"v": 1})
    assert two.get(("users", "alice"), "k") is None
    assert two.search(()) == [] and two.list_namespaces() == []
    # A namespace tuple that spells out another tenant is only a LangGraph namespace.
    tenant = one.namespace
    two.put((tenant.tenant, tenant.principal, tenant.scope_id), "k", {"v": 2})
    assert view(one.get(("users", "alice"), "k")) == (("users", "alice"), "k", {"v": 1})
    assert one.list_namespaces() == [("users", "alice")]


# Random sequences ----------------------------------------------------------------------

SPACES = [("a",), ("a", "b"), ("c",), ("c", "a", "b")]
KEYS = ["k", "K", "k2"]
op = st.one_of(
    st.tuples(
        st.just("put"),
        st.sampled_from(SPACES),
        st.sampled_from(KEYS),
        st.integers(0, 5),
        st.sampled_from(["tea", "rain", "tea rain"]),
    ),
    st.tuples(st.just("delete"), st.sampled_from(SPACES), st.sampled_from(KEYS)),
    st.tuples(st.just("get"), st.sampled_from(SPACES), st.sampled_from(KEYS)),
    st.tuples(st.just("search"), st.sampled_from([(), ("a",), ("c",)]), st.integers(0, 5)),
    st.tuples(
        st.just("list"), st.sampled_from([None, ("a",), ("*", "a")]), st.sampled_from([None, 1])
    ),
    st.tuples(
        st.just("batch"),
        st.lists(st.tuples(st.sampled_from(KEYS), st.none() | st.integers(0, 5)), max_size=4),
    ),
    st.tuples(st.just("bad"), st.sampled_from([("a.b",), ("langgraph", "x"), ("",)])),
)


def run(store: Any, step: tuple[Any, ...]) -> Any:
    kind = step[0]
    try:
        if kind == "put":
            store.put(step[1], step[2], {"n": step[3], "text": step[4]})
            return None
        if kind == "delete":
            store.delete(step[1], step[2])
            return None
        if kind == "get":
            return view(store.get(step[1], step[2]))
        if kind == "search":
            return views(store.search(step[1], filter={"n": {"$gte": step[2]}}, limit=100))
        if kind == "list":
            if isinstance(store, InMemoryStore):
                return listed(store, prefix=step[1], max_depth=step[2])
            return store.list_namespaces(prefix=step[1], max_depth=step[2])
        if kind == "batch":
            ops = [
                PutOp(("a",), key, None if n is None else {"n": n, "text": "batch"})
                for key, n in step[1]
            ]
            return store.batch([*ops, GetOp(("a",), "k")])[-1:]
        store.put(step[1], "k", {"n": 0})
    except InvalidNamespaceError:
        return "InvalidNamespaceError"
    return None


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(st.lists(op, min_size=1, max_size=12))
def test_random_sequences_match_in_memory_store(
    shared_engine: MemoryEngine, steps: list[tuple[Any, ...]]
) -> None:
    theirs, ours = both(shared_engine)
    for step in steps:
        expected = run(theirs, step)
        mine = run(ours, step)
        if step[0] == "batch":
            expected, mine = [view(i) for i in expected], [view(i) for i in mine]
        assert mine == expected, step
    assert ours.list_namespaces() == listed(theirs)
    assert views(ours.search((), limit=1000)) == views(theirs.search((), limit=1000))


def test_an_old_store_folder_reopens_with_its_items(tmp_path: Path) -> None:
    tenant = Namespace("t", "p", "s")
    with LedgerStore.open(tmp_path / "s", tenant) as store:
        store.put(("a",), "k", {"v": 1})
    with LedgerStore.open(tmp_path / "s", tenant) as store:
        assert view(store.get(("a",), "k")) == (("a",), "k", {"v": 1})


def test_a_namespace_given_as_a_list_is_read_as_its_tuple(shared_engine: MemoryEngine) -> None:
    """PostgresStore and SqliteStore read ``search(["docs"])`` as ``search(("docs",))``
    (LangGraph's own SqliteStore suite does it); here it found nothing and ``get`` raised a
    raw ``TypeError``. A string is still refused, never read as its letters."""
    from memory_ledger.ledger.errors import InvalidArgumentTypeError

    ours = fresh(shared_engine)
    ours.put(["docs", "a"], "k", {"v": 1})  # type: ignore[arg-type]
    assert [i.key for i in ours.search(["docs"])] == ["k"]  # type: ignore[arg-type]
    got = ours.get(["docs", "a"], "k")  # type: ignore[arg-type]
    assert got is not None and got.namespace == ("docs", "a")
    assert ours.list_namespaces() == [("docs", "a")]
    with pytest.raises(InvalidArgumentTypeError):
        ours.put("docs", "k", {"v": 1})  # type: ignore[arg-type]
    # A get of a string namespace is refused by type as a put is (it answered None);
    # ``BaseStore.get`` makes any key a string (LangGraph's own rule), but a GetOp handed
    # to ``batch`` with a key that is not one is refused too.
    with pytest.raises(InvalidArgumentTypeError):
        ours.get("docs", "k")  # type: ignore[arg-type]
    for namespace, key in [("docs", "k"), (("docs", "a"), None), (("docs", "a"), 7)]:
        with pytest.raises(InvalidArgumentTypeError):
            ours.batch([GetOp(namespace, key)])  # type: ignore[arg-type]
