"""The ``contract`` property: the ``BaseStore`` API as LangGraph documents it (the
``langgraph.store.base`` docstrings: put/get/search/delete/list_namespaces, filters with
``$eq $ne $gt $gte $lt $lte``, ``limit``/``offset``, TTL, batch results in op order,
namespace rules), sync and async.

Search order is not part of the contract (LangGraph defines none without a query), so
search results compare as sets; what the contract says of a query's ranking is nothing,
so queries are not checked here. Every test settles (see :func:`.support.settle`) before
it searches: freshness is ``read_your_writes``' property, not this one's.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    SearchOp,
)

from memory_ledger.replay.conformance.support import (
    KEYS,
    asettle,
    checks,
    everything,
    kit_settings,
    run,
    settle,
    values,
)

pytestmark = checks("contract")

OPERATORS = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def test_put_get_update_delete(
    conformance_store: BaseStore, conformance_root: str, conformance_examples: int
) -> None:
    """A put is read back as put (namespace, key, value); a second put replaces it; a delete
    removes it; a get of a missing key is ``None`` and a delete of one is no error."""
    store, counter = conformance_store, [0]

    @kit_settings(conformance_examples)
    @given(key=KEYS, first=values(), second=values())
    def check(key: str, first: dict[str, Any], second: dict[str, Any]) -> None:
        counter[0] += 1
        ns = (conformance_root, "kv", f"n{counter[0]}")
        assert store.get(ns, key) is None
        store.put(ns, key, first)
        item = store.get(ns, key)
        assert isinstance(item, Item)
        assert (item.namespace, item.key, item.value) == (ns, key, first)
        store.put(ns, key, second)
        assert _value(store.get(ns, key)) == second
        store.delete(ns, key)
        assert store.get(ns, key) is None
        store.delete(ns, key)  # deleting what is not there is not an error

    check()


def test_search_filters(
    conformance_store: BaseStore, conformance_root: str, conformance_examples: int
) -> None:
    """A filter keeps exactly the items whose field compares true: plain equality and each
    documented operator."""
    store, counter = conformance_store, [0]

    @kit_settings(conformance_examples)
    @given(
        ns_items=st.lists(st.integers(-5, 5), min_size=1, max_size=8),
        operator=st.sampled_from(sorted(OPERATORS)),
        threshold=st.integers(-5, 5),
    )
    def check(ns_items: list[int], operator: str, threshold: int) -> None:
        counter[0] += 1
        ns = (conformance_root, "filter", f"n{counter[0]}")
        for index, n in enumerate(ns_items):
            store.put(ns, f"k{index}", {"n": n, "word": "even" if n % 2 == 0 else "odd"})
        settle(store, conformance_root)
        found = {i.key for i in everything(store, ns, filter={"n": {operator: threshold}})}
        want = {f"k{i}" for i, n in enumerate(ns_items) if OPERATORS[operator](n, threshold)}
        assert found == want
        found = {i.key for i in everything(store, ns, filter={"word": "even"})}
        assert found == {f"k{i}" for i, n in enumerate(ns_items) if n % 2 == 0}

    check()


def test_search_pages(
    conformance_store: BaseStore, conformance_root: str, conformance_examples: int
) -> None:
    """``limit`` and ``offset`` page through the results: pages hold at most ``limit`` items,
    repeat none, and together are every item."""
    store, counter = conformance_store, [0]

    @kit_settings(conformance_examples)
    @given(count=st.integers(0, 12), size=st.integers(1, 5))
    def check(count: int, size: int) -> None:
        counter[0] += 1
        ns = (conformance_root, "pages", f"n{counter[0]}")
        for index in range(count):
            store.put(ns, f"k{index}", {"n": index})
        settle(store, conformance_root)
        keys: list[str] = []
        for offset in range(0, count + size, size):
            page = store.search(ns, limit=size, offset=offset)
            assert len(page) <= size
            keys += [item.key for item in page]
        assert sorted(keys) == sorted(f"k{i}" for i in range(count))

    check()


def test_search_by_namespace_prefix(conformance_store: BaseStore, conformance_root: str) -> None:
    """Search takes a namespace *prefix*: a namespace finds its own items and those of the
    namespaces below it, and no others."""
    store, root = conformance_store, conformance_root
    spots = [(root, "tree", "a"), (root, "tree", "a", "deep"), (root, "tree", "b"), (root, "x")]
    for ns in spots:
        store.put(ns, "k", {"word": ns[-1]})
    settle(store, root)
    assert _spots(store, (root, "tree", "a")) == {(root, "tree", "a"), (root, "tree", "a", "deep")}
    assert _spots(store, (root, "tree")) == set(spots[:3])
    assert _spots(store, (root,)) == set(spots)


def test_list_namespaces(conformance_store: BaseStore, conformance_root: str) -> None:
    """``list_namespaces`` with ``prefix`` (``*`` matches any label), ``suffix``,
    ``max_depth`` (namespaces cut to that depth, once each), ``limit`` and ``offset``."""
    store, root = conformance_store, conformance_root
    spots = [
        (root, "ln", "a", "x"),
        (root, "ln", "a", "y"),
        (root, "ln", "b", "x"),
        (root, "ln", "b", "x", "deep"),
    ]
    for ns in spots:
        store.put(ns, "k", {"n": 1})
    assert set(store.list_namespaces(prefix=(root, "ln"))) == set(spots)
    assert set(store.list_namespaces(prefix=(root, "ln", "*", "x"))) == {spots[0], *spots[2:]}
    assert set(store.list_namespaces(prefix=(root, "ln"), suffix=("x",))) == {spots[0], spots[2]}
    cut = store.list_namespaces(prefix=(root, "ln"), max_depth=3)
    assert sorted(cut) == sorted({(root, "ln", "a"), (root, "ln", "b")})
    pages = [store.list_namespaces(prefix=(root, "ln"), limit=1, offset=i) for i in range(5)]
    assert [len(page) for page in pages] == [1, 1, 1, 1, 0]
    assert {page[0] for page in pages[:4]} == set(spots)


def test_namespace_rules(conformance_store: BaseStore, conformance_root: str) -> None:
    """A put to an empty namespace, one rooted at ``langgraph``, or one with an empty label
    or a label holding a period raises ``InvalidNamespaceError`` and writes nothing."""
    store, root = conformance_store, conformance_root
    for bad in [(), ("langgraph", root), (root, ""), (root, "a.b")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "k", {"n": 1})
    with pytest.raises(InvalidNamespaceError):
        run(store.aput((), "k", {"n": 1}))
    settle(store, root)
    assert everything(store, (root,)) == []


def test_batch_results_follow_the_ops(conformance_store: BaseStore, conformance_root: str) -> None:
    """``batch`` answers each op in its place (``None`` for a put, the item or ``None`` for a
    get, a list for a search or a listing), and of two puts of one key the last one wins."""
    store, root = conformance_store, conformance_root
    ns = (root, "batch")
    store.put(ns, "a", {"n": 1})
    store.put(ns, "b", {"n": 2})
    settle(store, root)
    ops: list[Op] = [
        GetOp(ns, "b"),
        PutOp(ns, "c", {"n": 3}),
        GetOp(ns, "missing"),
        SearchOp(ns, filter={"n": 1}),
        PutOp(ns, "c", {"n": 4}),
        ListNamespacesOp(),
        GetOp(ns, "a"),
    ]
    for results in (store.batch(ops), run(store.abatch(ops))):
        assert len(results) == len(ops)
        assert _value(results[0]) == {"n": 2}
        assert results[1] is None and results[4] is None
        assert results[2] is None
        assert isinstance(results[3], list)
        assert [i.key for i in results[3] if isinstance(i, Item)] == ["a"]
        assert isinstance(results[5], list)
        assert _value(results[6]) == {"n": 1}
    assert _value(store.get(ns, "c")) == {"n": 4}


def test_ttl(conformance_store: BaseStore, conformance_root: str) -> None:
    """A store that says ``supports_ttl`` takes ``ttl`` (minutes) on a put, and the item is
    there before it expires, by get (with and without ``refresh_ttl``) and search; one that
    does not raises ``NotImplementedError``. (Expiry itself needs minutes to pass: the kit
    does not wait for it.)"""
    store, ns = conformance_store, (conformance_root, "ttl")
    if not store.supports_ttl:
        with pytest.raises(NotImplementedError):
            store.put(ns, "k", {"n": 1}, ttl=5)
        return
    store.put(ns, "k", {"n": 1}, ttl=5)
    store.put(ns, "forever", {"n": 2}, ttl=None)
    assert _value(store.get(ns, "k", refresh_ttl=True)) == {"n": 1}
    assert _value(store.get(ns, "k", refresh_ttl=False)) == {"n": 1}
    settle(store, conformance_root)
    assert {i.key for i in everything(store, ns)} == {"k", "forever"}


def test_async_twins(conformance_store: BaseStore, conformance_root: str) -> None:
    """``aput aget asearch adelete alist_namespaces`` do what their sync twins do."""
    store, root = conformance_store, conformance_root
    ns = (root, "async", "a")

    async def story() -> None:
        await store.aput(ns, "k", {"n": 1})
        await store.aput(ns, "j", {"n": 2})
        item = await store.aget(ns, "k")
        assert item is not None and (item.namespace, item.key, item.value) == (ns, "k", {"n": 1})
        await asettle(store, root)
        found = await store.asearch(ns, filter={"n": {"$gt": 1}})
        assert [i.key for i in found] == ["j"]
        assert ns in await store.alist_namespaces(prefix=(root, "async"))
        await store.adelete(ns, "k")
        assert await store.aget(ns, "k") is None

    run(story())


def _value(item: Any) -> Any:
    assert isinstance(item, Item), f"expected an item, got {item!r}"
    return item.value


def _spots(store: BaseStore, prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
    return {item.namespace for item in everything(store, prefix)}
