"""What only a ledger can offer (history, as-of reads, explain), TTL expiry as a recorded
event, migration from and to another LangGraph store, the CLI, and hybrid search with a
LangGraph embedding function."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from langgraph.store.base import IndexConfig
from langgraph.store.memory import InMemoryStore
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.replay.cli.app import app
from memory_ledger.replay.langgraph_store import LedgerStore, export_store, import_store

TENANT = Namespace("acme", "alice", "lg")


def test_history_as_of_and_explain(engine: MemoryEngine) -> None:
    store = LedgerStore(engine, TENANT)
    store.put(("prefs",), "drink", {"drink": "tea"})
    after_first = engine.head
    store.put(("prefs",), "drink", {"drink": "coffee"})
    store.put(("prefs",), "drink", {"drink": "coffee"})  # the same value again
    store.delete(("prefs",), "drink")
    store.put(("prefs",), "drink", {"drink": "water"})
    history = store.history(("prefs",), "drink")
    assert [(v.action, v.value) for v in history] == [
        ("put", {"drink": "tea"}),
        ("put", {"drink": "coffee"}),
        ("put_again", {"drink": "coffee"}),
        ("deleted", None),
        ("put", {"drink": "water"}),
    ]
    assert [v.position for v in history] == sorted(v.position for v in history)
    past = store.get_as_of(("prefs",), "drink", after_first)
    assert past is not None and past.value == {"drink": "tea"}
    assert store.get_as_of(("prefs",), "drink", 1) is None
    when = history[1].recorded_at + timedelta(microseconds=1)
    by_time = store.get_as_of(("prefs",), "drink", when)
    assert by_time is not None and by_time.value == {"drink": "coffee"}
    lineage = store.explain(("prefs",), "drink")
    assert lineage is not None and json.loads(str(lineage.value)) == {"drink": "water"}
    assert store.explain(("prefs",), "missing") is None
    # Another tenant's store cannot see, explain or read the item as of any point.
    other = LedgerStore(engine, Namespace("acme", "bob", "lg"))
    assert other.get(("prefs",), "drink") is None
    assert other.explain(("prefs",), "drink") is None
    assert other.get_as_of(("prefs",), "drink", after_first) is None


def test_ttl_expiry_is_a_recorded_event(engine: MemoryEngine) -> None:
    store = LedgerStore(engine, TENANT, ttl={"default_ttl": 0.0005})  # 30 ms
    store.put(("tmp",), "a", {"v": 1})
    store.put(("tmp",), "keep", {"v": 2}, ttl=None)
    time.sleep(0.1)
    assert store.get(("tmp",), "a") is None  # expired: no longer read
    assert [i.key for i in store.search(("tmp",))] == ["keep"]
    assert store.sweep_ttl() == 1
    assert store.sweep_ttl() == 0
    versions = store.history(("tmp",), "a")
    assert [v.action for v in versions] == ["put", "expired"]
    assert versions[-1].session_id.startswith("langgraph-ttl-")
    put = versions[0].session_id  # the store names itself as the caller of its puts
    assert put.startswith("langgraph-") and not put.startswith("langgraph-ttl-")
    store.put(("tmp",), "a", {"v": 3}, ttl=60)
    got = store.get(("tmp",), "a")
    assert got is not None and got.value == {"v": 3}


def test_the_sweeper_thread_expires_items(engine: MemoryEngine) -> None:
    store = LedgerStore(engine, TENANT)
    store.put(("tmp",), "a", {"v": 1}, ttl=0.0005)
    store.start_ttl_sweeper(sweep_interval_minutes=0.001)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if [v.action for v in store.history(("tmp",), "a")][-1] == "expired":
            break
        time.sleep(0.05)
    store.stop_ttl_sweeper()
    assert [v.action for v in store.history(("tmp",), "a")] == ["put", "expired"]


def test_import_keeps_original_times_and_export_round_trips(engine: MemoryEngine) -> None:
    source = InMemoryStore()
    source.put(("users", "alice"), "a", {"text": "likes tea"})
    source.put(("users", "bob"), "b", {"text": "likes rain", "n": [1, 2]})
    source.put(("users",), "c", {"text": "top"})
    store = LedgerStore(engine, Namespace("acme", "import", uuid.uuid4().hex))
    report = import_store(source, store)
    assert (report.namespaces, report.items) == (3, 3)
    for ns, key in ((("users", "alice"), "a"), (("users", "bob"), "b"), (("users",), "c")):
        theirs, ours = source.get(ns, key), store.get(ns, key)
        assert theirs is not None and ours is not None and ours.value == theirs.value
        assert store.history(ns, key)[0].occurred_at == theirs.updated_at
    target = InMemoryStore()
    assert export_store(store, target).items == 3
    assert sorted(target.list_namespaces()) == sorted(source.list_namespaces())
    for space in source.list_namespaces():
        assert {(i.key, repr(i.value)) for i in target.search(space)} == {
            (i.key, repr(i.value)) for i in source.search(space)
        }


SOURCE_MODULE = """
from langgraph.store.base import IndexConfig
from langgraph.store.memory import InMemoryStore

source = InMemoryStore()
source.put(("docs",), "one", {"text": "first"})
source.put(("docs", "deep"), "two", {"text": "second"})
target = InMemoryStore()
"""


def test_cli_import_and_export(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lg_cli_stores.py").write_text(SOURCE_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    folder = str(tmp_path / "store")
    ns = ["--tenant", "acme", "--principal", "alice", "--scope-id", "cli"]
    runner = CliRunner()
    done = runner.invoke(
        app, ["langgraph", "import", "lg_cli_stores:source", *ns, "--store", folder, "--json"]
    )
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["items"] == 2
    done = runner.invoke(
        app, ["langgraph", "export", "lg_cli_stores:target", *ns, "--store", folder]
    )
    assert done.exit_code == 0, done.output
    assert "exported 2 items in 2 namespaces" in done.stdout
    import lg_cli_stores  # type: ignore[import-not-found]

    assert lg_cli_stores.target.get(("docs", "deep"), "two").value == {"text": "second"}
    done = runner.invoke(app, ["langgraph", "import", "nowhere", *ns, "--store", folder])
    assert done.exit_code == 2 and "module:name" in done.stderr


class WordEmbeddings:
    """A deterministic embedding of a few words (a bag of known words, no model)."""

    words = ("tea", "coffee", "drink", "rain", "weather", "storm")

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        out = []
        for text in texts:
            lowered = text.lower()
            vector = [float(lowered.count(w)) for w in self.words]
            if "tea" in lowered or "coffee" in lowered:
                vector[2] += 1.0  # both are drinks
            if "rain" in lowered or "storm" in lowered:
                vector[4] += 1.0
            out.append([*vector, 0.01])
        return out


def test_hybrid_search_with_a_langgraph_embedding_function(tmp_path: Path) -> None:
    index: IndexConfig = {"dims": 7, "embed": WordEmbeddings(), "fields": ["text"]}
    with LedgerStore.open(tmp_path / "s", TENANT, index=index, index_in_background=False) as store:
        store.put(("m",), "a", {"text": "Alice orders coffee every morning"})
        store.put(("m",), "b", {"text": "A storm is coming tonight"})
        store.engine.index_vectors()
        hits = store.search(("m",), query="drink", limit=2)
        # No word of the query is in either item: the semantic channel ranks coffee first.
        assert hits[0].key == "a" and hits[0].score is not None
        status = store.engine.recall(TENANT, "weather").semantic
        assert status is not None and "WordEmbeddings" in str(status.model)


def test_updated_at_is_ledger_time_not_clock(engine: MemoryEngine) -> None:
    store = LedgerStore(engine, TENANT)
    before = datetime.now(UTC)
    store.put(("t",), "k", {"v": 1})
    item = store.get(("t",), "k")
    assert item is not None and before <= item.created_at <= datetime.now(UTC)
    assert item.created_at == store.history(("t",), "k")[0].recorded_at


# Found by a newcomer's review: arguments that broke the store instead of being refused.


def test_a_ttl_that_cannot_be_an_expiry_is_refused_and_never_breaks_reads(tmp_path: Path) -> None:
    """A put with an infinite, NaN, huge, negative or textual TTL was recorded, and then
    every search, list_namespaces and sweep raised OverflowError (one bad put took every
    read of the store down). Now each is refused before anything is written."""
    from memory_ledger.ledger.errors import InvalidArgumentError

    with LedgerStore.open(tmp_path / "store", TENANT) as store:
        store.put(("u",), "fine", {"a": 1}, ttl=5)
        head = store.engine.head
        for ttl in (1e300, float("inf"), float("nan"), -5, "5", True):
            with pytest.raises(InvalidArgumentError) as refused:
                store.put(("u",), "bad", {"a": 1}, ttl=ttl)  # type: ignore[arg-type]
            assert refused.value.parameter == "ttl"
        assert store.engine.head == head
        assert [item.key for item in store.search(("u",))] == ["fine"]
        assert store.list_namespaces() == [("u",)]
        assert store.sweep_ttl() == 0


def test_a_ttl_recorded_before_the_check_is_read_as_no_ttl() -> None:
    from memory_ledger.replay.langgraph_store.records import TTL_TAG, ttl_of

    assert ttl_of([f"{TTL_TAG}1e+300"]) is None
    assert ttl_of([f"{TTL_TAG}inf"]) is None
    assert ttl_of([f"{TTL_TAG}5.0"]) == 5.0


def test_odd_arguments_are_typed_errors_not_raw_exceptions(tmp_path: Path) -> None:
    """Lone surrogates in a label, key or value, a list as a value, an index that is no
    list, and search/list_namespaces limits, offsets, queries and filters of the wrong type
    or sign raised UnicodeEncodeError, TypeError, ValueError or OverflowError."""
    from memory_ledger import MemoryLedgerError

    with LedgerStore.open(tmp_path / "store", TENANT) as store:
        store.put(("u",), "k", {"a": 1})
        head = store.engine.head
        calls: list[Callable[[], object]] = [
            lambda: store.put(("u\ud800",), "k", {"a": 1}),
            lambda: store.put(("u",), "k\ud800", {"a": 1}),
            lambda: store.put(("u",), "k", {"a": "\ud800"}),
            lambda: store.put(("u",), "k", {"\udcff": 1}),
            lambda: store.put(("u",), "k", [1, 2]),  # type: ignore[arg-type]
            lambda: store.put(("u",), "k", "text"),  # type: ignore[arg-type]
            lambda: store.put(("u",), "k", {"a": 1}, index=5),  # type: ignore[arg-type]
            lambda: store.get(("u",), "k\ud800"),
            lambda: store.search(("u",), limit=-1),
            lambda: store.search(("u",), offset=-1),
            lambda: store.search(("u",), limit="5"),  # type: ignore[arg-type]
            lambda: store.search(("u",), query=5),  # type: ignore[arg-type]
            lambda: store.search(("u",), filter=[1]),  # type: ignore[arg-type]
            lambda: store.list_namespaces(limit=-1),
            lambda: store.list_namespaces(max_depth=-1),
        ]
        for index, call in enumerate(calls):
            with pytest.raises(MemoryLedgerError):
                call()
            assert store.engine.head == head, index
        assert store.get(("u",), "k").value == {"a": 1}  # type: ignore[union-attr]


def test_langgraphs_own_namespace_and_key_errors_are_typed_errors_too(
    engine: MemoryEngine,
) -> None:
    """A put refused by LangGraph's own rules raises the engine's typed error (also
    LangGraph's InvalidNamespaceError); a key or namespace that is not text is refused, never
    converted (LangGraph would file ``5`` as ``"5"`` and ``"users"`` as its letters)."""
    import asyncio

    from langgraph.store.base import InvalidNamespaceError

    import memory_ledger

    store = LedgerStore(engine, TENANT)
    head = engine.head
    for namespace in [("",), ("a.b",), ("u\x00",), (1,)]:
        with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
            store.put(namespace, "k", {"v": 1})  # type: ignore[arg-type]
        assert isinstance(refused.value, InvalidNamespaceError)
    for space, key in [("users", "k"), (("u",), None), (("u",), 5)]:
        with pytest.raises(memory_ledger.MemoryLedgerError) as wrong:
            store.put(space, key, {"v": 1})  # type: ignore[arg-type]
        assert wrong.value.reason_code == "invalid_argument_type"
    with pytest.raises(memory_ledger.MemoryLedgerError):
        asyncio.run(store.aput(("a.b",), "k", {"v": 1}))
    assert engine.head == head


GITHUB_TOKEN = "ghp_16C7e42F292c6912E7710c838347Ae178B4a"
"""A github-token-shaped label, operator or field path a refusal must not repeat."""


def test_refusals_never_echo_the_refused_label_operator_or_field(engine: MemoryEngine) -> None:
    """A label with ``.`` or NUL, a root label ``langgraph``, an unknown filter operator and
    a bad index field path are refused with a message naming what is wrong, never the value
    (LangGraph's messages repeat the whole namespace: a secret in a label reached host logs),
    through every method, sync and async, as the engine's typed error and LangGraph's own
    ``InvalidNamespaceError`` (sync ``get``/``search``/``delete``/``list_namespaces`` raised
    LangGraph's bare error before, from ``BaseStore``'s own check)."""
    import asyncio

    from langgraph.store.base import InvalidNamespaceError, ListNamespacesOp, MatchCondition

    import memory_ledger
    from memory_ledger.replay.langgraph_store import FilterError, StoreNamespaceError

    store = LedgerStore(engine, TENANT)
    head = engine.head
    dotted = ("users", GITHUB_TOKEN + ".x")
    calls: list[tuple[str, Callable[[], object], type[Exception], str]] = [
        ("put", lambda: store.put(dotted, "k", {"a": 1}), StoreNamespaceError, "label 2 of 2"),
        (
            "nul",
            lambda: store.put(("u", GITHUB_TOKEN + "\x00"), "k", {}),
            StoreNamespaceError,
            "NUL",
        ),
        (
            "root",
            lambda: store.put(("langgraph", GITHUB_TOKEN), "k", {}),
            StoreNamespaceError,
            "langgraph",
        ),
        ("get", lambda: store.get(dotted, "k"), StoreNamespaceError, "period"),
        ("search", lambda: store.search(dotted), StoreNamespaceError, "period"),
        ("delete", lambda: store.delete(dotted, "k"), StoreNamespaceError, "period"),
        ("list", lambda: store.list_namespaces(suffix=dotted), StoreNamespaceError, "period"),
        (
            "batch",
            lambda: store.batch([ListNamespacesOp((MatchCondition("prefix", dotted),))]),
            StoreNamespaceError,
            "period",
        ),
        ("aget", lambda: asyncio.run(store.aget(dotted, "k")), StoreNamespaceError, "period"),
        (
            "aput",
            lambda: asyncio.run(store.aput(("langgraph", GITHUB_TOKEN), "k", {})),
            StoreNamespaceError,
            "langgraph",
        ),
        (
            "filter",
            lambda: store.search(("users",), filter={"a": {"$" + GITHUB_TOKEN: 1}}),
            FilterError,
            "unsupported filter operator",
        ),
        (
            "afilter",
            lambda: asyncio.run(store.asearch(("u",), filter={"a": {"$" + GITHUB_TOKEN: 1}})),
            FilterError,
            "use one of $eq",
        ),
        (
            "index",
            lambda: store.put(("u",), "k", {"a": 1}, index=[GITHUB_TOKEN, 5]),  # type: ignore[list-item]
            memory_ledger.MemoryLedgerError,
            "a list with an item of type int",
        ),
    ]
    for name, call, kind, says in calls:
        with pytest.raises(kind) as refused:
            call()
        said = str(refused.value)
        assert GITHUB_TOKEN not in said and "ghp_" not in said, (name, said)
        assert says in said, (name, said)
        assert isinstance(refused.value, memory_ledger.MemoryLedgerError), name
        if kind is StoreNamespaceError:
            assert isinstance(refused.value, InvalidNamespaceError), name
            assert refused.value.reason_code == "invalid_langgraph_namespace"
    assert engine.head == head


SECRET_VALUE = {"text": "my key is sk-proj-Q7h2Lm9Xc4Vb8Nz1Kp5Rt3Wy6Ud0Fg2Hj"}


def test_an_import_refuses_a_secret_item_alone(engine: MemoryEngine) -> None:
    source = InMemoryStore()
    source.put(("users", "alice"), "a", {"text": "tea"})
    source.put(("users", "alice"), "leak", SECRET_VALUE)
    source.put(("users", "bob"), "b", {"text": "coffee"})
    store = LedgerStore(engine, Namespace("acme", "import", uuid.uuid4().hex))
    report = import_store(source, store, batch=2)
    assert report.items == 2 and len(report.refused) == 1
    refused = report.refused[0]
    assert (refused.namespace, refused.key, refused.reason_code) == (
        ("users", "alice"),
        "leak",
        "secret_detected",
    )
    assert "sk-proj" not in repr(report)
    assert store.get(("users", "alice"), "leak") is None
    got = store.get(("users", "bob"), "b")
    assert got is not None and got.value == {"text": "coffee"}


LEAKY_MODULE = f"""
from langgraph.store.memory import InMemoryStore

source = InMemoryStore()
source.put(("docs",), "one", {{"text": "first"}})
source.put(("docs",), "leak", {SECRET_VALUE!r})
"""


def test_cli_import_names_a_refused_item_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "lg_leaky_store.py").write_text(LEAKY_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    ns = ["--tenant", "acme", "--principal", "alice", "--scope-id", "cli"]
    args = ["langgraph", "import", "lg_leaky_store:source", *ns, "--store", str(tmp_path / "s")]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 1, done.output
    assert "imported 1 items" in done.stdout and "docs 'leak' (secret_detected)" in done.stdout
    assert "sk-proj" not in done.output
    missing = CliRunner().invoke(app, [*args[:2], "nomodule:store", *args[3:]])
    assert missing.exit_code == 2 and "InvalidArgumentError" in missing.stderr
    assert "ValueError" not in missing.stderr
