"""LangGraph stores under many concurrent async calls, every answer checked: LedgerStore,
InMemoryStore and (when PostgreSQL is up) AsyncPostgresStore in the same run.

``python -m benchmarks langgraph_async [--quick] [--repeat 3] [--pg URL]``

Three shapes, each started with ``asyncio.gather`` and timed from the first call to the last
answer (a fresh store each repetition; the median wall time is reported):

- ``large_batches``: the shape of LangGraph's own ``test_large_batches_async``
  (``libs/checkpoint-postgres/tests/test_async_store.py``): for ``m`` in 0..9 and ``i`` in
  0..N-1 (N 1,000: 60,000 calls; ``--quick``: 50, 3,000 calls) a put of ``key{i}`` in
  namespace ``("test", "foo", "bar", "baz", str(m % 2))``, a get of it, a
  ``list_namespaces(max_depth=m + 1)``, a search of ``("test",)``, the put again and a
  delete, all at once;
- ``one_gather``: 200 keys (``--quick``: 20) put beforehand, then 12 calls per key (gets,
  puts, a delete, searches and listings of the shared prefix), 2,400 calls at once;
- ``agents``: 200 coroutines (``--quick``: 20), each awaiting 12 calls one after another
  on its own namespace (get, put, get, search, list, put, get, delete, get, put, search,
  get): 2,400 calls, each coroutine reading its own writes.

Every answer is checked against a model of the store run serially, under each store's
documented semantics for calls made together: InMemoryStore runs each call when it is made
(one call at a time, in the order the coroutines start); LedgerStore and AsyncPostgresStore
(LangGraph's ``AsyncBatchedBaseStore``) merge the calls of one event-loop tick into one
batch whose reads see the store before the batch's writes and whose last put of an address
wins, so a ``gather`` of them all is one batch. A search without a query has no defined
order: its answer is checked as a set (the right items, as many as the limit allows).
InMemoryStore lists every namespace a get, put or delete ever named (its dict of namespaces
keeps one emptied by deletes, and a get adds one): its model does too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

from langgraph.store.base import BaseStore, Item
from langgraph.store.memory import InMemoryStore

from benchmarks import langgraph_bench
from benchmarks.results import save

PG_URL = os.environ.get("MEMORY_LEDGER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")

Address = tuple[tuple[str, ...], str]
Call = tuple[Any, ...]
"""``("put", ns, key, value)``, ``("delete", ns, key)``, ``("get", ns, key)``,
``("search", prefix, limit)`` or ``("list", prefix, max_depth)`` (``prefix`` None: all)."""


# The shapes -----------------------------------------------------------------------------


def large_batches(n: int) -> list[Call]:
    """LangGraph's ``test_large_batches_async`` shape: 6 calls for each of 10 x ``n``."""
    calls: list[Call] = []
    for m in range(10):
        for i in range(n):
            ns = ("test", "foo", "bar", "baz", str(m % 2))
            value = {"foo": f"bar{i}"}
            calls += [
                ("put", ns, f"key{i}", value),
                ("get", ns, f"key{i}"),
                ("list", None, m + 1),
                ("search", ("test",), 10),
                ("put", ns, f"key{i}", value),
                ("delete", ns, f"key{i}"),
            ]
    return calls


def preload(keys: int) -> list[Call]:
    """The puts made (and awaited) before ``one_gather``: ``keys`` keys in 4 namespaces."""
    return [("put", ("shared", str(k % 4)), f"k{k}", {"v": k}) for k in range(keys)]


def one_gather(keys: int) -> list[Call]:
    """12 calls for each preloaded key, all at once."""
    calls: list[Call] = []
    for k in range(keys):
        ns, key = ("shared", str(k % 4)), f"k{k}"
        calls += [
            ("get", ns, key),
            ("put", ns, key, {"v": k, "round": 1}),
            ("get", ns, key),
            ("search", ("shared", str(k % 4)), 100),
            ("list", None, 2),
            ("put", ns, key, {"v": k, "round": 2}),
            ("get", ns, key),
            ("delete", ns, key) if k % 3 == 0 else ("put", ns, key, {"v": k, "round": 3}),
            ("get", ns, key),
            ("search", ("shared",), 10),
            ("list", None, 1),
            ("put", ns, f"new{k}", {"v": -k}),
        ]
    return calls


def agent(k: int) -> list[Call]:
    """The 12 calls one agent awaits in turn on its own namespace."""
    ns, key = ("agent", str(k)), "memo"
    return [
        ("get", ns, key),
        ("put", ns, key, {"step": 1}),
        ("get", ns, key),
        ("search", ns, 10),
        ("list", ns, None),
        ("put", ns, key, {"step": 2}),
        ("get", ns, key),
        ("delete", ns, key),
        ("get", ns, key),
        ("put", ns, "other", {"step": 3}),
        ("search", ns, 10),
        ("get", ns, "other"),
    ]


# The serial model -----------------------------------------------------------------------


def expected(
    calls: list[Call], ticks: list[int], start: dict[Address, Any], *, sticky: bool = False
) -> list[Any]:
    """The model's answer to each call when ``calls`` run as consecutive batches of the sizes
    ``ticks``: a batch's reads see the state before its writes; its writes apply in order
    (so the last put of an address wins). A search answers the items under its prefix (a
    set: checked by :func:`wrong`); a listing, its namespaces cut to ``max_depth``.
    ``sticky``: a listing shows every namespace a get, put or delete ever named, as
    InMemoryStore's does (its dict of namespaces keeps an emptied one, and a get adds one).
    """
    state = dict(start)
    named = {address[0] for address in start}
    answers: list[Any] = []
    done = 0
    for size in ticks:
        batch = calls[done : done + size]
        done += size
        for call in batch:
            answers.append(_read(state, named if sticky else {a[0] for a in state}, call))
        for call in batch:
            if call[0] == "put":
                state[(call[1], call[2])] = call[3]
            elif call[0] == "delete":
                state.pop((call[1], call[2]), None)
            if call[0] in ("put", "delete", "get"):
                named.add(call[1])
    return answers


def _read(state: dict[Address, Any], spaces: set[tuple[str, ...]], call: Call) -> Any:
    kind = call[0]
    if kind == "get":
        return state.get((call[1], call[2]))
    if kind == "search":
        prefix = call[1]
        return {a: v for a, v in state.items() if a[0][: len(prefix)] == prefix}
    if kind == "list":
        prefix, depth = call[1] or (), call[2]
        cut = {ns if depth is None else ns[:depth] for ns in spaces}
        return sorted(ns for ns in cut if ns[: len(prefix)] == prefix)
    return None


def wrong(call: Call, answer: Any, want: Any) -> bool:
    """Whether ``answer`` breaks the model's ``want`` for ``call``."""
    kind = call[0]
    if kind == "get":
        if want is None:
            return answer is not None
        return not (
            isinstance(answer, Item)
            and answer.value == want
            and answer.key == call[2]
            and tuple(answer.namespace) == call[1]
        )
    if kind == "search":
        limit = call[2]
        got = [((tuple(item.namespace), item.key), item.value) for item in answer]
        if len(got) != min(limit, len(want)) or len({a for a, _ in got}) != len(got):
            return True
        return any(want.get(address, object()) != value for address, value in got)
    if kind == "list":
        return sorted(tuple(ns) for ns in answer) != want[:100]
    return answer is not None


def issue(store: BaseStore, call: Call) -> Coroutine[Any, Any, Any]:
    """The coroutine that makes ``call`` on ``store``."""
    kind = call[0]
    if kind == "put":
        return store.aput(call[1], call[2], call[3])
    if kind == "delete":
        return store.adelete(call[1], call[2])
    if kind == "get":
        return store.aget(call[1], call[2])
    if kind == "search":
        return store.asearch(call[1], limit=call[2])
    return store.alist_namespaces(prefix=call[1], max_depth=call[2])


# The stores -----------------------------------------------------------------------------


@asynccontextmanager
async def ledger_store() -> AsyncIterator[BaseStore]:
    """A LedgerStore in a temporary folder (``benchmarks.langgraph_bench``'s)."""
    with langgraph_bench.ledger_store() as store:
        yield store


@asynccontextmanager
async def memory_store() -> AsyncIterator[BaseStore]:
    yield InMemoryStore()


def postgres_opener(url: str) -> Callable[[], Any] | str:
    """An opener of a fresh AsyncPostgresStore (its own schema, dropped after), or why
    there is none (no driver or package, no server)."""
    try:
        import psycopg
        from langgraph.store.postgres.aio import AsyncPostgresStore
    except ImportError:
        return "langgraph-checkpoint-postgres is not installed"
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=3):
            pass
    except psycopg.OperationalError:
        return f"no PostgreSQL server at {url}"

    @asynccontextmanager
    async def opened() -> AsyncIterator[BaseStore]:
        schema = "lgasync_" + uuid.uuid4().hex[:8]
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
        sep = "&" if "?" in url else "?"
        try:
            conn_string = f"{url}{sep}options=-csearch_path%3D{schema}"
            async with AsyncPostgresStore.from_conn_string(conn_string) as store:
                await store.setup()
                yield store
        finally:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")

    return opened


# Running --------------------------------------------------------------------------------


async def run_gather(
    opener: Callable[[], Any], calls: list[Call], before: list[Call], batched: bool
) -> tuple[float, int]:
    """Wall seconds of ``calls`` all at once (after ``before``, awaited), wrong answers."""
    async with opener() as store:
        for call in before:
            await issue(store, call)
        started = time.perf_counter()
        answers = await asyncio.gather(*(issue(store, call) for call in calls))
        wall = time.perf_counter() - started
    start = {(c[1], c[2]): c[3] for c in before}
    ticks = [len(calls)] if batched else [1] * len(calls)
    wants = expected(calls, ticks, start, sticky=not batched)
    return wall, sum(wrong(c, a, w) for c, a, w in zip(calls, answers, wants, strict=True))


async def run_agents(opener: Callable[[], Any], agents: int, sticky: bool) -> tuple[float, int]:
    """Wall seconds of ``agents`` coroutines awaiting their calls in turn, wrong answers."""
    async with opener() as store:

        async def one(k: int) -> int:
            calls = agent(k)
            answers = [await issue(store, call) for call in calls]
            wants = expected(calls, [1] * len(calls), {}, sticky=sticky)
            return sum(wrong(c, a, w) for c, a, w in zip(calls, answers, wants, strict=True))

        started = time.perf_counter()
        wrongs = await asyncio.gather(*(one(k) for k in range(agents)))
        return time.perf_counter() - started, sum(wrongs)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks langgraph_async")
    parser.add_argument("--quick", action="store_true", help="3,000 + 240 + 240 calls, once")
    parser.add_argument("--repeat", type=int, default=None, help="runs per shape (default 3)")
    parser.add_argument("--pg", default=PG_URL, help="PostgreSQL URL for AsyncPostgresStore")
    args = parser.parse_args(argv)
    n, keys = (50, 20) if args.quick else (1000, 200)
    repeat = args.repeat or (1 if args.quick else 3)
    stores: list[tuple[str, Callable[[], Any], bool]] = [
        ("LedgerStore", ledger_store, True),
        ("InMemoryStore", memory_store, False),
    ]
    pg = postgres_opener(args.pg)
    if isinstance(pg, str):
        print(f"AsyncPostgresStore skipped: {pg}")
    else:
        stores.append(("AsyncPostgresStore", pg, True))
    shapes: list[tuple[str, int, Callable[[Callable[[], Any], bool], Any]]] = [
        ("large_batches", 60 * n, lambda o, b: run_gather(o, large_batches(n), [], b)),
        ("one_gather", 12 * keys, lambda o, b: run_gather(o, one_gather(keys), preload(keys), b)),
        ("agents", 12 * keys, lambda o, b: run_agents(o, keys, not b)),
    ]
    figures: dict[str, Any] = {"load_average_before": os.getloadavg(), "repeat": repeat}
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores); median of {repeat}")
    print(f"{'shape':14} {'calls':>6} {'store':19} {'wall s':>8} {'calls/s':>9} {'wrong':>6}")
    for shape, count, run in shapes:
        for name, opener, batched in stores:
            walls: list[float] = []
            wrongs = 0
            for _ in range(repeat):
                wall, bad = asyncio.run(run(opener, batched))
                walls.append(wall)
                wrongs += bad
            wall = statistics.median(walls)
            figures[f"{shape}_{name}"] = {
                "calls": count,
                "wall_s": wall,
                "walls_s": walls,
                "calls_per_s": count / wall,
                "wrong_answers": wrongs,
            }
            print(
                f"{shape:14} {count:>6} {name:19} {wall:>8.2f} {count / wall:>9.0f} {wrongs:>6}",
                flush=True,
            )
    figures["load_average_after"] = os.getloadavg()
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    print(f"figures written to {save('langgraph_async', figures)}")
    wrong_total = sum(v["wrong_answers"] for v in figures.values() if isinstance(v, dict))
    return 1 if wrong_total else 0


if __name__ == "__main__":
    raise SystemExit(main(__import__("sys").argv[1:]))
