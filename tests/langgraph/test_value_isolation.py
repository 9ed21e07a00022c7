"""No read hands out an object another read (or the store's read cache) holds: a caller who
edits the value of an item it was given changes nothing the store returns later, nor what a
filter matches, even after the edited value was refused by a put; the async calls of one
tick that read the same address get equal values, never the same ones (as PostgresStore
and SqliteStore build a new object per read)."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import GetOp, SearchOp

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.errors import CommandRejectedError
from memory_ledger.replay.langgraph_store import LedgerStore

SECRET = "sk-proj-" + "abcdefghijklmnopqrstuvwxyz0123456789ABCD"
NS = ("users", "alice")


def fresh(engine: MemoryEngine) -> LedgerStore:
    return LedgerStore(engine, Namespace("isolation", "lg", uuid.uuid4().hex))


def vandalise(value: Any) -> None:
    """Edit every dict and list of ``value`` in place, at every depth."""
    if isinstance(value, dict):
        for child in list(value.values()):
            vandalise(child)
        value["edited"] = True
        value.pop("role", None)
    elif isinstance(value, list):
        for child in value:
            vandalise(child)
        value.append("edited")


def test_an_edited_value_changes_no_later_read(engine: MemoryEngine) -> None:
    store = fresh(engine)
    store.put(NS, "prefs", {"drink": "tea", "role": "user", "tags": ["a"]})
    got = store.get(NS, "prefs")
    assert got is not None
    got.value["role"] = "admin"
    got.value["tags"].append("b")
    got.value["api_key"] = SECRET  # and a put of it, which is refused
    try:
        store.put(NS, "prefs", got.value)
    except CommandRejectedError as e:
        assert e.reason_code == "secret_detected"
    else:  # pragma: no cover - the door let a secret through
        raise AssertionError("the secret-shaped value was stored")
    want = {"drink": "tea", "role": "user", "tags": ["a"]}
    again = store.get(NS, "prefs")
    assert again is not None
    assert again.value == want
    assert [i.key for i in store.search(("users",), filter={"role": "admin"})] == []
    assert [i.key for i in store.search(("users",), filter={"role": "user"})] == ["prefs"]
    found = store.search(("users",))
    assert [i.value for i in found] == [want]
    found[0].value["drink"] = "coffee"  # a search's item is the caller's too
    assert [i.key for i in store.search(("users",), filter={"drink": "coffee"})] == []
    assert [i.value for i in store.search(("users",), query="tea")] == [want]


def test_reads_of_one_batch_and_of_one_tick_share_no_value(engine: MemoryEngine) -> None:
    store = fresh(engine)
    store.put(NS, "prefs", {"drink": "tea", "nested": {"n": [1]}})
    first, second, page = store.batch(
        [GetOp(NS, "prefs"), GetOp(NS, "prefs"), SearchOp(("users",))]
    )
    assert first is not None and second is not None
    assert first.value == second.value == page[0].value
    assert first.value is not second.value and first.value is not page[0].value
    assert first.value["nested"] is not second.value["nested"]

    async def gathered() -> list[Any]:
        return await asyncio.gather(
            store.aget(NS, "prefs"),
            store.aget(NS, "prefs"),
            store.asearch(("users",)),
            store.asearch(("users",)),
        )

    one, two, page_one, page_two = asyncio.run(gathered())
    assert one.value == two.value == page_one[0].value == page_two[0].value
    one.value["nested"]["n"].append(2)
    page_one[0].value["drink"] = "coffee"
    assert two.value == {"drink": "tea", "nested": {"n": [1]}}
    assert page_two[0].value == {"drink": "tea", "nested": {"n": [1]}}
    assert store.get(NS, "prefs").value == {"drink": "tea", "nested": {"n": [1]}}  # type: ignore[union-attr]


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.dictionaries(st.text(max_size=4), _JSON, max_size=4))
def test_any_value_read_then_edited_reads_as_put(
    engine: MemoryEngine, value: dict[str, Any]
) -> None:
    store = fresh(engine)
    try:
        store.put(NS, "k", value)
    except CommandRejectedError:
        return  # a value the door refuses (a secret-shaped or hidden character): not stored
    for _ in range(2):
        got = store.get(NS, "k")
        assert got is not None and got.value == value
        vandalise(got.value)
        for item in store.search(("users",)):
            assert item.value == value
            vandalise(item.value)
