"""Concurrent async calls of the LangGraph store become batches: the calls of one event-loop
tick are one batch (reads before the tick's writes, the last put of an address wins, one
engine command), every answer as a serial model of those batches says, errors per call,
calls awaited in turn see each other, several loops and threads share one store, and closing
it drains what is queued."""

from __future__ import annotations

import asyncio
import itertools
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import PutOp

from benchmarks.langgraph_async import (
    Call,
    agent,
    expected,
    issue,
    large_batches,
    one_gather,
    preload,
    wrong,
)
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.errors import CommandRejectedError, EngineClosedError
from memory_ledger.replay.langgraph_store import FilterError, LedgerStore, StoreNamespaceError

TENANT = Namespace("acme", "alice", "ticks")
SECRET = "AKIA" + "IOSFODNN7EXAMPLE"
LABELS = itertools.count()
"""A new root label for each example of the property test (the engine is shared)."""


async def gathered(store: LedgerStore, calls: list[Call]) -> list[Any]:
    return await asyncio.gather(*(issue(store, call) for call in calls))


def wrong_answers(calls: list[Call], answers: list[Any], wants: list[Any]) -> list[Call]:
    return [c for c, a, w in zip(calls, answers, wants, strict=True) if wrong(c, a, w)]


def test_langgraph_large_batches_shape_is_one_batch(engine: MemoryEngine) -> None:
    """LangGraph's ``test_large_batches_async`` shape at 3,000 calls, and 240 calls on 20
    preloaded keys: every answer is the model's for ONE batch holding all the calls."""
    store = LedgerStore(engine, TENANT)
    calls = large_batches(50)
    answers = asyncio.run(gathered(store, calls))
    assert wrong_answers(calls, answers, expected(calls, [len(calls)], {})) == []
    assert store.history(("test", "foo", "bar", "baz", "0"), "key7") == []  # put, deleted

    before = preload(20)
    asyncio.run(gathered(store, before))
    start = {(c[1], c[2]): c[3] for c in before}
    calls = one_gather(20)
    answers = asyncio.run(gathered(store, calls))
    assert wrong_answers(calls, answers, expected(calls, [len(calls)], start)) == []
    sessions = {v.session_id for k in (1, 2) for v in store.history(("shared", str(k)), f"k{k}")}
    assert len(sessions) == 2  # the preload's batch and the gather's: one command each
    store.close()


def _rounds(label: str) -> st.SearchStrategy[list[list[Call]]]:
    spaces = st.sampled_from([(label, "a"), (label, "b"), (label, "a", "x")])
    keys = st.sampled_from(["k1", "k2", "k3"])
    call = st.one_of(
        st.tuples(st.just("put"), spaces, keys, st.fixed_dictionaries({"n": st.integers(0, 9)})),
        st.tuples(st.just("delete"), spaces, keys),
        st.tuples(st.just("get"), spaces, keys),
        st.tuples(st.just("search"), st.sampled_from([(label,), (label, "a")]), st.just(4)),
        st.tuples(st.just("list"), st.just((label,)), st.sampled_from([None, 2])),
    )
    return st.lists(st.lists(call, min_size=1, max_size=12), min_size=1, max_size=4)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_rounds_of_concurrent_calls_answer_as_batches(engine: MemoryEngine, data: Any) -> None:
    """Random rounds of concurrent calls (each round one ``gather``, the rounds awaited in
    turn, each example on a new event loop and under its own root label, so the shared
    engine holds nothing it reads): every answer is the serial model's for one batch per
    round."""
    label = f"ex{next(LABELS)}"
    rounds = data.draw(_rounds(label))
    store = LedgerStore(engine, TENANT)

    async def run() -> list[Any]:
        answers: list[Any] = []
        for calls in rounds:
            answers += await gathered(store, calls)
        return answers

    answers = asyncio.run(run())
    calls = [call for calls in rounds for call in calls]
    wants = expected(calls, [len(calls) for calls in rounds], {})
    assert wrong_answers(calls, answers, wants) == []
    store.close()


def test_errors_stay_per_call(engine: MemoryEngine) -> None:
    """One tick holding a secret-shaped value, a bad filter, a bad namespace label and an
    ``abatch`` with a refused put: each of those calls gets its own typed error and writes
    nothing; every other call of the tick is done, in one engine command."""
    store = LedgerStore(engine, TENANT)

    async def tick() -> list[Any]:
        return await asyncio.gather(
            store.aput(("e",), "a", {"v": 1}),
            store.aput(("e",), "b", {"aws": SECRET}),
            store.aget(("e",), "a"),
            store.asearch(("e",), filter={"v": {"$regex": "x"}}),
            store.aput(("e", "x.y"), "c", {"v": 3}),
            store.abatch([PutOp(("e",), "d", {"v": 4}), PutOp(("e",), "f", {"aws": SECRET})]),
            store.aput(("e",), "b", {"v": 2}),
            store.aput(("e",), "g", {"v": 5}),
            store.asearch(("e",)),
            return_exceptions=True,
        )

    results = asyncio.run(tick())
    assert results[0] is None and results[2] is None and results[8] == []  # before the writes
    assert isinstance(results[1], CommandRejectedError)
    assert results[1].reason_code == "secret_detected"
    assert isinstance(results[3], FilterError)
    assert isinstance(results[4], StoreNamespaceError)
    assert isinstance(results[5], CommandRejectedError)
    assert results[5].reason_code == "secret_detected"
    assert results[6] is None and results[7] is None
    values = {k: store.get(("e",), k) for k in "abcdfg"}
    assert {k: v.value for k, v in values.items() if v is not None} == {
        "a": {"v": 1},
        "b": {"v": 2},
        "g": {"v": 5},
    }
    sessions = {v.session_id for k in "abg" for v in store.history(("e",), k)}
    assert len(sessions) == 1
    store.close()


def test_calls_awaited_in_turn_see_each_other(engine: MemoryEngine) -> None:
    """Forty coroutines, each awaiting twelve calls in turn on its own namespace (their
    ticks merge with each other's): each reads its own writes."""
    store = LedgerStore(engine, TENANT)

    async def one(k: int) -> list[Call]:
        calls = agent(k)
        answers = [await issue(store, call) for call in calls]
        return wrong_answers(calls, answers, expected(calls, [1] * len(calls), {}))

    async def run() -> list[list[Call]]:
        return await asyncio.gather(*(one(k) for k in range(40)))

    assert asyncio.run(run()) == [[]] * 40
    store.close()


def test_two_event_loops_in_two_threads(engine: MemoryEngine) -> None:
    """Two threads, each with its own event loop, call one store at the same time: every
    answer is right and both loops' writes are there."""
    store = LedgerStore(engine, TENANT)
    barrier = threading.Barrier(2)
    found: dict[int, list[list[Call]]] = {}

    def thread(first: int) -> None:
        async def one(k: int) -> list[Call]:
            calls = agent(k)
            answers = [await issue(store, call) for call in calls]
            return wrong_answers(calls, answers, expected(calls, [1] * len(calls), {}))

        async def run() -> list[list[Call]]:
            barrier.wait()
            return await asyncio.gather(*(one(k) for k in range(first, first + 10)))

        found[first] = asyncio.run(run())

    threads = [threading.Thread(target=thread, args=(first,)) for first in (0, 100)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert found == {0: [[]] * 10, 100: [[]] * 10}
    for k in (*range(10), *range(100, 110)):
        other = store.get(("agent", str(k)), "other")
        assert other is not None and other.value == {"step": 3}
    store.close()


def test_close_drains_the_queue_and_refuses_later_calls(engine: MemoryEngine) -> None:
    """``close`` called on the loop while calls wait in its queue runs them (each caller gets
    its answer); a call after it raises ``EngineClosedError``; a call cancelled while
    queued is withdrawn."""
    store = LedgerStore(engine, TENANT)

    async def run() -> None:
        withdrawn = asyncio.ensure_future(store.aput(("q",), "gone", {"v": 0}))
        puts = [asyncio.ensure_future(store.aput(("q",), f"k{i}", {"v": i})) for i in range(30)]
        await asyncio.sleep(0)  # every call queued; the loop's flush not run yet
        withdrawn.cancel()
        store.close()
        assert await asyncio.gather(*puts) == [None] * 30
        with pytest.raises(EngineClosedError):
            await store.aget(("q",), "k1")

    asyncio.run(run())
    reopened = LedgerStore(engine, TENANT)
    assert [reopened.get(("q",), f"k{i}") is not None for i in range(30)] == [True] * 30
    assert reopened.get(("q",), "gone") is None
    reopened.close()


def test_close_from_another_thread_while_calls_run(engine: MemoryEngine) -> None:
    """A thread closes the store while coroutines on another thread's loop keep calling:
    every call either answers right or raises ``EngineClosedError``; none hangs."""
    store = LedgerStore(engine, TENANT)
    started = threading.Event()
    outcome: dict[str, Any] = {}

    async def one(k: int) -> list[Call]:
        bad: list[Call] = []
        for n in range(1000):
            calls = agent(k * 10_000 + n)
            answers = []
            try:
                for call in calls:
                    answers.append(await issue(store, call))
                    started.set()
            except EngineClosedError:
                done = len(answers)
                wants = expected(calls, [1] * len(calls), {})[:done]
                return bad + wrong_answers(calls[:done], answers, wants)
            bad += wrong_answers(calls, answers, expected(calls, [1] * len(calls), {}))
        return bad

    async def run() -> list[list[Call]]:
        return await asyncio.wait_for(asyncio.gather(*(one(k) for k in range(8))), 120)

    def loop_thread() -> None:
        outcome["wrong"] = asyncio.run(run())

    thread = threading.Thread(target=loop_thread)
    thread.start()
    started.wait(60)
    store.close()
    thread.join(120)
    assert not thread.is_alive()
    assert outcome["wrong"] == [[]] * 8
