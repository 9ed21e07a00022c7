"""The properties beyond the API: ``isolation``, ``delete``, ``concurrency``, ``durability``
and ``read_your_writes`` (the ``contract`` is :mod:`.contract`).

Each test carries its property's marker; a test that cannot run on the store at hand (no
bytes to read, a store that does not persist) skips and says why.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langgraph.store.base import BaseStore

from memory_ledger.replay.conformance.children import kill_after_acks, race_in_processes
from memory_ledger.replay.conformance.factory import open_store
from memory_ledger.replay.conformance.places import StoreBytes, find_in_bytes
from memory_ledger.replay.conformance.plugin import Subject
from memory_ledger.replay.conformance.support import (
    KEYS,
    LABELS,
    checks,
    everything,
    kit_settings,
    offered,
    settle,
    values,
    word_token,
)


@checks("isolation")
def test_namespaces_are_isolated(
    conformance_store: BaseStore, conformance_root: str, conformance_examples: int
) -> None:
    """Two sibling namespaces, one label a string prefix of the other's (``a`` and ``ab``),
    sharing keys: from one, no get, search (by prefix, filter, page) or listing returns an
    item, key or count of the other, sync or async."""
    store, counter = conformance_store, [0]

    @kit_settings(conformance_examples)
    @given(
        label=LABELS,
        extra=LABELS,
        mine=st.dictionaries(KEYS, values(), min_size=1, max_size=4),
        theirs=st.dictionaries(KEYS, values(), min_size=1, max_size=4),
    )
    def check(
        label: str, extra: str, mine: dict[str, dict[str, Any]], theirs: dict[str, dict[str, Any]]
    ) -> None:
        counter[0] += 1
        here = (conformance_root, f"iso{counter[0]}", label)
        there = (conformance_root, f"iso{counter[0]}", label + extra)
        for key, value in theirs.items():
            store.put(there, key, {**value, "owner": "there"})
        for key, value in mine.items():
            store.put(here, key, {**value, "owner": "here"})
        settle(store, conformance_root)
        for key in theirs:
            item = store.get(here, key)
            assert item is None or (key in mine and item.value["owner"] == "here")
        for found in (
            everything(store, here),
            everything(store, here, filter={"owner": "there"}),
            offered(store.asearch(here, limit=100)) or [],
        ):
            assert {item.namespace for item in found} <= {here}
            assert all(item.value["owner"] == "here" for item in found)
        assert len(everything(store, here)) == len(mine)
        assert store.list_namespaces(prefix=here) == [here]

    check()


@checks("delete")
def test_deleted_value_is_not_found(conformance_store: BaseStore, conformance_root: str) -> None:
    """After a delete, neither get nor any search (by prefix, by filter on the value, by a
    query of its words, sync or async) returns the item."""
    store, ns, marker = conformance_store, (conformance_root, "gone"), word_token("forgetme")
    store.put(ns, "doomed", {"text": marker, "word": "doomed"})
    store.put(ns, "kept", {"text": "kept", "word": "kept"})
    store.delete(ns, "doomed")
    settle(store, conformance_root)
    assert store.get(ns, "doomed") is None
    for found in (
        everything(store, ns),
        everything(store, (conformance_root,)),
        everything(store, ns, filter={"text": marker}),
        everything(store, ns, query=marker),
        offered(store.asearch(ns, query=marker, limit=100)) or [],
    ):
        assert "doomed" not in {item.key for item in found}
        assert all(marker not in repr(item.value) for item in found)


@checks("delete")
def test_deleted_value_leaves_no_bytes(
    conformance_subject: Subject, conformance_bytes: StoreBytes, conformance_root: str
) -> None:
    """After a delete and a close, no byte of the deleted value remains in the store's
    bytes (``--store-bytes`` folder or ``--store-dsn`` dump). First checks the value is
    readable there after its put (else there is nothing to prove: the test skips)."""
    if not conformance_bytes.known:
        pytest.skip("the kit was not told where the store's bytes are (--store-bytes/--store-dsn)")
    ns, marker = (conformance_root, "shred"), word_token("forgetme")
    needle = marker.encode()
    with open_store(conformance_subject.factory) as store:
        store.put(ns, "doomed", {"text": marker})
        store.put(ns, "kept", {"text": "kept"})
        if not find_in_bytes(conformance_bytes, [needle]):
            pytest.skip(f"the value never showed in clear in {conformance_bytes.describe()}")
        store.delete(ns, "doomed")
        settle(store, conformance_root)
    hits = find_in_bytes(conformance_bytes, [needle])
    assert hits == [], f"the deleted value is still in the store's bytes: {hits[:3]}"


@checks("concurrency")
def test_one_value_per_key_under_threads(
    conformance_store: BaseStore, conformance_root: str
) -> None:
    """Eight threads put at once, ten rounds: each its own key, a key of its own for the
    round (written once: a lost put of it stays lost, whatever comes after) and one shared
    key. Then every key is there once, each own key holds its thread's last value, each
    round's key its value, the shared key one of the values put (no acknowledged put lost,
    no key twice)."""
    store, ns = conformance_store, (conformance_root, "threads")
    threads, rounds = 8, 10
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def worker(index: int) -> None:
        try:
            start.wait()
            for i in range(rounds):
                store.put(ns, f"own-{index}", {"n": i})
                store.put(ns, f"once-{index}-{i}", {"n": i})
                store.put(ns, "shared", {"n": index * 100 + i})
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)

    pool = [threading.Thread(target=worker, args=(i,)) for i in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    assert errors == []
    _check_race(store, ns, conformance_root, threads, rounds)


@checks("concurrency")
def test_one_value_per_key_under_processes(
    conformance_subject: Subject, conformance_root: str
) -> None:
    """As the threads' test, with three processes each opening the store from the factory
    (for factories that say several processes may share a store)."""
    if not conformance_subject.traits.processes:
        pytest.skip("the factory does not say several processes can share one store")
    ns, workers, rounds = (conformance_root, "processes"), 3, 10
    race_in_processes(conformance_subject.spec, ns, workers, rounds)
    with open_store(conformance_subject.factory) as store:
        _check_race(store, ns, conformance_root, workers, rounds)


@checks("durability")
def test_acknowledged_put_survives_sigkill(
    conformance_subject: Subject, conformance_root: str
) -> None:
    """A child process opens the store and puts items one by one, saying so after each put
    returns; it is killed with SIGKILL; every acknowledged item is then read back."""
    if not conformance_subject.traits.persistent:
        pytest.skip("the factory does not say its store persists (in memory: nothing survives)")
    ns = (conformance_root, "durable")
    acked = kill_after_acks(conformance_subject.spec, ns, wanted=15)
    assert acked > 0, "the child acknowledged no put"
    with open_store(conformance_subject.factory) as store:
        lost = [i for i in range(acked) if store.get(ns, f"k{i}") is None]
        assert lost == [], f"acknowledged puts lost after SIGKILL: {lost}"
        assert all(_value(store.get(ns, f"k{i}")) == {"i": i} for i in range(acked))


@checks("read_your_writes")
def test_read_your_writes(
    conformance_store: BaseStore, conformance_root: str, conformance_examples: int
) -> None:
    """Right after each put (no other call between), get returns the value and a search of
    the namespace lists it with the value; right after a delete, neither finds it."""
    store, counter = conformance_store, [0]

    @kit_settings(conformance_examples)
    @given(steps=st.lists(st.tuples(st.sampled_from("abc"), st.none() | values()), max_size=8))
    def check(steps: list[tuple[str, dict[str, Any] | None]]) -> None:
        counter[0] += 1
        ns = (conformance_root, "ryw", f"n{counter[0]}")
        for key, value in steps:
            if value is None:
                store.delete(ns, key)
                assert store.get(ns, key) is None
                assert key not in {item.key for item in store.search(ns, limit=100)}
                continue
            store.put(ns, key, value)
            assert _value(store.get(ns, key)) == value
            found = {item.key: item.value for item in store.search(ns, limit=100)}
            assert found.get(key) == value, f"search right after the put of {key!r}: {found}"

    check()


def _check_race(
    store: BaseStore, ns: tuple[str, ...], root: str, writers: int, rounds: int
) -> None:
    settle(store, root)
    found = everything(store, ns)
    keys = [item.key for item in found]
    assert len(keys) == len(set(keys)), f"a key listed twice: {sorted(keys)}"
    once = [f"once-{w}-{i}" for w in range(writers) for i in range(rounds)]
    expected = ["shared", *(f"own-{w}" for w in range(writers)), *once]
    lost = sorted(set(expected) - set(keys))
    assert not lost, f"acknowledged puts lost: {lost[:10]}"
    assert sorted(keys) == sorted(expected)
    for index in range(writers):
        assert _value(store.get(ns, f"own-{index}")) == {"n": rounds - 1}, f"own-{index}"
        for i in range(rounds):
            assert _value(store.get(ns, f"once-{index}-{i}")) == {"n": i}, f"once-{index}-{i}"
    shared = _value(store.get(ns, "shared"))["n"]
    assert shared in {w * 100 + i for w in range(writers) for i in range(rounds)}


def _value(item: Any) -> Any:
    assert item is not None, "expected an item, got None"
    return item.value
