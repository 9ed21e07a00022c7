"""The async API: the blocking API's operations as coroutines, with its invariants.

Scenarios run through both APIs and must record the same events; concurrent coroutines on
one engine keep exactly-once reconciliation and namespace isolation; a cancelled coroutine
leaves a whole command or none of it in the ledger; HTTP extraction and embeddings run on
the event loop's ``httpx.AsyncClient``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import numpy as np
import pytest

import memory_ledger
from memory_ledger import replay
from memory_ledger.commands import MemoryEngine, MemorySession, RecordedExtractor
from memory_ledger.commands.embeddings import OpenAIEmbeddingProvider
from memory_ledger.commands.engine import Remember
from memory_ledger.commands.errors import StoreUnavailableError, UnknownMemoryError
from memory_ledger.commands.extraction import OpenAIChatExtractor
from memory_ledger.commands.recall import RecallPolicy, RecallScope
from memory_ledger.ledger.events import (
    DirectCommandApplied,
    ExplicitCommandApplied,
    LedgerEvent,
    SessionReconciled,
)
from memory_ledger.ledger.faults import FAULTS
from tests.conftest import make_item

pytestmark = pytest.mark.anyio

NS = memory_ledger.Namespace("acme", "alice", "assistant")
OTHER = memory_ledger.Namespace("acme", "bob", "assistant")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Blocking:
    """The blocking API behind the awaitable surface of the async one (each call runs right
    here, on the loop's thread), so one scenario drives both."""

    def __init__(self, target: Any) -> None:
        self._target = target

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._target, name)
        if not callable(attr):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            result = attr(*args, **kwargs)
            return Blocking(result) if isinstance(result, MemorySession) else result

        return call


async def open_api(api: str, store: Path) -> Any:
    if api == "blocking":
        return Blocking(MemoryEngine.open(store))
    return await memory_ledger.AsyncMemoryEngine.open(store)


def ledger_of(store: Path) -> list[tuple[int, LedgerEvent]]:
    with MemoryEngine.open(store, create=False) as engine:
        return list(replay.filter_events(engine))


def type_counts(store: Path) -> Counter[str]:
    return Counter(type(event).__name__ for _, event in ledger_of(store))


# Scenarios (each takes an engine of either API and returns what it observed) -------------


async def turn_lifecycle(mem: Any) -> dict[str, Any]:
    seed_extractor = RecordedExtractor()
    seed = await mem.session(NS, "seed", extractor=seed_extractor)
    seed_extractor.provide(
        1, [make_item("Alice's flight to Tokyo leaves Friday."), make_item("Alice likes sushi.")]
    )
    await seed.observe_final_transcript(1, "user: I fly to Tokyo on Friday. I love sushi.")
    await seed.finish()
    extractor = RecordedExtractor()
    session = await mem.session(NS, "chat-1", extractor=extractor)
    snapshot = await session.prepare(1, "user: when does my Tokyo flight leave?")
    generation = await session.begin_turn(1)
    fast = await session.recall("Tokyo flight", turn_id=1)
    fused = await session.recall("sushi", turn_id=1)
    admitted = await session.admit(1, [fast.results[0]])
    await session.record_use(1, admitted.admitted[0][0])
    extractor.provide(1, [make_item("Alice packs light for trips.")])
    outcome = await session.observe_final_transcript(
        1, "user: when does my Tokyo flight leave?\nassistant: Friday. Pack light!"
    )
    command = await session.apply_explicit_command("correct", "Alice now prefers ramen.", 1)
    work = await session.on_turn_complete(1)
    report = await session.finish()
    again = await session.finish()
    await session.close()
    after = await mem.recall(NS, "what food does Alice like", 5)
    return {
        "published": snapshot.published,
        "snapshot": [item.statement for item in snapshot.items],
        "generation": generation,
        "paths": (fast.path, fused.path),
        "fast": fast.results[0].statement,
        "candidates": outcome.candidates,
        "command": (command.intent, command.target is not None),
        "work": [(w.kind, w.status) for w in work],
        "activated": len(report.activated),
        "superseded": len(report.superseded),
        "again": again.already_reconciled,
        "after": [hit.statement for hit in after],
    }


async def direct_commands(mem: Any) -> dict[str, Any]:
    first = await mem.remember(
        NS, "Alice lives in Lisbon.", subject="Alice", predicate="lives in", value="Lisbon"
    )
    await mem.remember(NS, "Alice keeps a cat named Miso.", tags=("pets",))
    await mem.remember(OTHER, "Bob keeps a dog named Rex.")
    fixed = await mem.correct(NS, "Alice lives in Porto now.")
    pinned = await mem.pin(NS, "cat Miso")
    gone = await mem.forget(NS, "Alice lives in Porto now.")
    try:
        await mem.forget(NS, "dog Rex")  # another namespace's memory: unknown here
    except UnknownMemoryError as e:
        foreign = e.reason_code
    memory_map = await mem.memory_map(NS)
    return {
        "superseded": fixed.report.superseded == (first.memory_id,),
        "pinned": pinned.intent,
        "gone": gone.target == fixed.memory_id,
        "foreign": foreign,
        "recall": [hit.statement for hit in await mem.recall(NS, "where does Alice live cat")],
        "other": [hit.statement for hit in await mem.recall(OTHER, "cat dog")],
        "map_mentions_alice": "Alice" in memory_map,
    }


async def hinted_recall(mem: Any) -> dict[str, Any]:
    extractor = RecordedExtractor()
    session = await mem.session(NS, "hints", extractor=extractor)
    extractor.provide(
        1,
        [
            make_item("Bob's favourite colour is green.", subject="Bob", predicate="colour"),
            make_item("Alice's favourite colour is blue.", subject="Alice", predicate="colour"),
        ],
    )
    await session.observe_final_transcript(1, "user: colours")
    await session.finish()
    reader = await mem.session(NS, "reader")
    plain = await reader.recall_scoped("favourite colour", None, RecallScope())
    hinted = await reader.recall_scoped(
        "favourite colour", None, RecallScope(), about="Alice", attribute="colour"
    )
    flushed = await reader.flush_reads()
    await reader.close()
    return {
        "same_set": {h.statement for h in plain} == {h.statement for h in hinted},
        "hinted_first": hinted[0].statement,
        "flushed": flushed,
    }


async def reads_and_bulk_commands(mem: Any) -> dict[str, Any]:
    """The members the async engine lacked (issue 34): apply_batch's session_prefix, recall's
    policy, the retrievable memories, their details, counts and vocabulary, forget_all."""
    batch = await mem.apply_batch(
        NS,
        [
            Remember(statement="Alice lives in Lisbon.", subject="Alice", predicate="lives in"),
            "Alice only drinks espresso.",
            "Alice's cat is named Miso.",
        ],
        session_prefix="tool-",
    )
    await mem.remember(OTHER, "Bob keeps a dog named Rex.")
    narrow = await mem.recall(NS, "Alice", policy=RecallPolicy(limit=1))
    memories = await mem.retrievable_memories(NS)
    ids = {doc.memory_id for doc in memories}
    details = await mem.memory_details(NS, ids | {"not-an-id"})
    counts = (await mem.count_active_memories(NS), await mem.count_active_memories())
    subjects = await mem.vocabulary(NS, "subject")
    forgotten = await mem.forget_all(NS)
    return {
        "batch_session": batch.session_id.startswith("tool-"),
        "narrow": len(narrow.results),
        "memories": sorted(doc.statement for doc in memories),
        "details": sorted(details) == sorted(ids),
        "counts": counts,
        "subjects": subjects,
        "forgotten": forgotten,
        "after": (await mem.count_active_memories(NS), await mem.count_active_memories()),
        "other_kept": [h.statement for h in await mem.recall(OTHER, "dog")],
    }


SCENARIOS: dict[str, Callable[[Any], Awaitable[dict[str, Any]]]] = {
    "turn_lifecycle": turn_lifecycle,
    "direct_commands": direct_commands,
    "hinted_recall": hinted_recall,
    "reads_and_bulk_commands": reads_and_bulk_commands,
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
async def test_scenario_gives_the_same_outcome_and_events_through_both_apis(
    name: str, tmp_path: Path
) -> None:
    observed: dict[str, dict[str, Any]] = {}
    for api in ("blocking", "async"):
        store = tmp_path / api
        mem = await open_api(api, store)
        try:
            observed[api] = await SCENARIOS[name](mem)
        finally:
            await mem.close()
    assert observed["async"] == observed["blocking"]
    assert type_counts(tmp_path / "async") == type_counts(tmp_path / "blocking")


async def test_turn_lifecycle_outcome(tmp_path: Path) -> None:
    async with memory_ledger.AsyncMemoryEngine.open(tmp_path / "store") as mem:
        seen = await turn_lifecycle(mem)
    assert seen["paths"][0] == "snapshot"
    assert seen["fast"] == "Alice's flight to Tokyo leaves Friday."
    assert seen["again"] is True and seen["activated"] >= 2
    assert "Alice now prefers ramen." in seen["after"]


async def test_reads_and_bulk_commands_outcome(tmp_path: Path) -> None:
    async with memory_ledger.AsyncMemoryEngine.open(tmp_path / "store") as mem:
        seen = await reads_and_bulk_commands(mem)
    assert seen["batch_session"] is True and seen["narrow"] == 1
    assert len(seen["memories"]) == 3 and seen["details"] is True
    assert seen["counts"] == (3, 4) and ("Alice", 1) in seen["subjects"]
    assert seen["forgotten"] == 3 and seen["after"] == (0, 1)
    assert seen["other_kept"] == ["Bob keeps a dog named Rex."]


async def test_hints_reorder_through_the_async_session(tmp_path: Path) -> None:
    async with memory_ledger.AsyncMemoryEngine.open(tmp_path / "store") as mem:
        seen = await hinted_recall(mem)
    assert seen == {
        "same_set": True,
        "hinted_first": "Alice's favourite colour is blue.",
        "flushed": 2,
    }


async def test_concurrent_coroutines_keep_the_invariants(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with memory_ledger.AsyncMemoryEngine.open(store) as mem:
        extractor = RecordedExtractor()
        shared = await mem.session(NS, "shared", extractor=extractor)
        extractor.provide(1, [make_item("Alice runs every morning.")])
        await shared.observe_final_transcript(1, "user: I run every morning.")
        # A second object for the same session id (another coroutine's handle).
        twin = await mem.session(NS, "shared")

        async def remember(ns: memory_ledger.Namespace, n: int) -> None:
            await mem.remember(ns, f"{ns.principal} fact number {n} about kites.")

        async def recall_only_own(ns: memory_ledger.Namespace) -> list[str]:
            hits = await mem.recall(ns, "fact about kites", 50)
            return [h.statement for h in hits]

        async with anyio.create_task_group() as group:
            for n in range(12):
                group.start_soon(remember, NS, n)
                group.start_soon(remember, OTHER, n)
            reports = []

            async def finish(handle: Any) -> None:
                reports.append(await handle.finish())

            group.start_soon(finish, shared)
            group.start_soon(finish, twin)
            seen: list[list[str]] = []

            async def read(ns: memory_ledger.Namespace) -> None:
                seen.append(await recall_only_own(ns))

            for _ in range(4):
                group.start_soon(read, NS)
        # Exactly once: one report wrote, the other found it recorded.
        assert sorted(r.already_reconciled for r in reports) == [False, True]
        assert reports[0].activated == reports[1].activated
        for statements in seen:  # isolation under concurrency
            assert all(s.startswith("alice ") or s.startswith("Alice") for s in statements)
        assert len(await recall_only_own(NS)) == 12
        assert len(await recall_only_own(OTHER)) == 12
        assert (await mem.run(replay.verify_store, mem.engine)).ok
        assert (await mem.run(replay.check_projections, mem.engine)).ok
    events = [e for _, e in ledger_of(store)]
    reconciled = Counter(e.session_id for e in events if isinstance(e, SessionReconciled))
    assert reconciled["shared"] == 1
    # a direct command's session is reconciled by its one record's report
    direct = Counter(
        e.session_id for e in events if isinstance(e, DirectCommandApplied) and e.report is not None
    )
    assert len(direct) == 24 and set(direct.values()) == {1}
    assert not any(reconciled[s] for s in direct)


# Cancellation -----------------------------------------------------------------------------


class Gate:
    """A fault hook that holds the first command reaching ``point`` until released."""

    def __init__(self, point: str) -> None:
        self.point = point
        self.entered = threading.Event()
        self.release = threading.Event()
        self._used = False

    def __call__(self) -> None:
        if self._used:
            return
        self._used = True
        self.entered.set()
        self.release.wait(60)


@pytest.fixture
def gate() -> Iterator[Gate]:
    hook = Gate("session.finish_planned")
    FAULTS[hook.point] = hook
    try:
        yield hook
    finally:
        hook.release.set()
        FAULTS.pop(hook.point, None)


def statements_in(store: Path) -> list[str]:
    return [
        e.statement
        for _, e in ledger_of(store)
        if isinstance(e, ExplicitCommandApplied) and e.statement is not None
    ]


async def test_cancelled_mid_command_completes_the_whole_command(
    tmp_path: Path, gate: Gate
) -> None:
    store = tmp_path / "store"
    async with memory_ledger.AsyncMemoryEngine.open(store) as mem:
        task = asyncio.ensure_future(mem.remember(NS, "Alice collects stamps."))
        await asyncio.to_thread(gate.entered.wait, 60)  # its command event is written,
        task.cancel()  # its reconciliation planned and not appended
        for _ in range(5):
            await asyncio.sleep(0)
        assert not task.done()  # the cancelled coroutine waits for the thread
        gate.release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        # After the cancel the result is discoverable: the memory is there, reconciled.
        hits = await mem.recall(NS, "stamps")
        assert [h.statement for h in hits] == ["Alice collects stamps."]
    events = [e for _, e in ledger_of(store)]
    session = next(e.session_id for e in events if isinstance(e, ExplicitCommandApplied))
    kinds = [type(e).__name__ for e in events if getattr(e, "session_id", None) == session]
    assert kinds == ["DirectCommandApplied", "MemoryActivated"]  # the whole command
    assert next(e for e in events if isinstance(e, DirectCommandApplied)).report is not None


async def test_cancelled_while_queued_never_starts(tmp_path: Path, gate: Gate) -> None:
    store = tmp_path / "store"
    async with memory_ledger.AsyncMemoryEngine.open(store) as mem:
        first = asyncio.ensure_future(mem.remember(NS, "Alice collects stamps."))
        await asyncio.to_thread(gate.entered.wait, 60)  # the worker is busy with it
        queued = asyncio.ensure_future(mem.remember(NS, "Alice collects coins."))
        await asyncio.sleep(0)  # submitted behind the first
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        gate.release.set()
        await first
        assert [h.statement for h in await mem.recall(NS, "collects coins stamps")] == [
            "Alice collects stamps."
        ]
    assert statements_in(store) == ["Alice collects stamps."]


async def test_an_anyio_cancel_scope_waits_for_the_running_command(
    tmp_path: Path, gate: Gate
) -> None:
    store = tmp_path / "store"
    async with memory_ledger.AsyncMemoryEngine.open(store) as mem:
        finished: list[bool] = []

        async def scoped(scope: anyio.CancelScope) -> None:
            with scope:
                await mem.remember(NS, "Alice collects stamps.")
                finished.append(True)  # never reached: the scope was cancelled

        scope = anyio.CancelScope()
        async with anyio.create_task_group() as group:
            group.start_soon(scoped, scope)
            await asyncio.to_thread(gate.entered.wait, 60)
            scope.cancel()
            gate.release.set()
        assert scope.cancel_called and finished == []
        assert len(await mem.recall(NS, "stamps")) == 1
    kinds = type_counts(store)
    assert kinds["DirectCommandApplied"] == 1 and kinds["MemoryActivated"] == 1


async def test_a_closed_engine_says_so(tmp_path: Path) -> None:
    mem = await memory_ledger.AsyncMemoryEngine.open(tmp_path / "store")
    await mem.aclose()
    await mem.aclose()  # idempotent
    with pytest.raises(StoreUnavailableError, match="closed"):
        await mem.recall(NS, "anything")


# HTTP on the event loop -------------------------------------------------------------------


def refuse(request: httpx.Request) -> httpx.Response:
    raise AssertionError("the blocking HTTP client must not be used under the async API")


def vector(text: str, dimension: int = 16) -> list[float]:
    values = np.zeros(dimension)
    for word in text.lower().split():
        values[int(hashlib.sha256(word.encode()).hexdigest(), 16) % dimension] += 1.0
    values[0] += 0.01
    return [float(v) for v in values / np.linalg.norm(values)]


async def test_background_extraction_and_vectors_use_the_async_client(tmp_path: Path) -> None:
    chat_calls: list[str] = []
    embed_calls: list[int] = []

    async def chat(request: httpx.Request) -> httpx.Response:
        chat_calls.append(threading.current_thread().name)
        content = json.dumps({"items": [make_item("Alice sails on weekends.")]})
        return httpx.Response(200, json={"choices": [{"message": {"content": content}}]})

    async def embed(request: httpx.Request) -> httpx.Response:
        texts = json.loads(request.content)["input"]
        embed_calls.append(len(texts))
        data = [{"index": i, "embedding": vector(t)} for i, t in enumerate(texts)]
        return httpx.Response(200, json={"data": data})

    extractor = OpenAIChatExtractor(
        "http://127.0.0.1:9/v1",
        "m",
        transport=httpx.MockTransport(refuse),
        async_transport=httpx.MockTransport(chat),
    )
    provider = OpenAIEmbeddingProvider(
        "http://127.0.0.1:9/v1",
        "e",
        16,
        transport=httpx.MockTransport(refuse),
        async_transport=httpx.MockTransport(embed),
    )
    store = tmp_path / "store"
    async with memory_ledger.AsyncMemoryEngine.open(store, embeddings=provider) as mem:
        session = await mem.session(NS, "bg", extractor=extractor, extraction_mode="background")
        outcome = await session.observe_final_transcript(1, "user: I sail every weekend.")
        assert outcome.extraction_pending
        assert await session.wait_for_extractions(30) == []
        report = await session.finish()
        assert len(report.activated) == 1
        assert await mem.wait_for_vectors(30, NS)
        result = await mem.recall(NS, "sails weekends")
        assert result[0].statement == "Alice sails on weekends."
        assert result.semantic is not None and result.semantic.state == "ready"
        await session.close()
    await extractor.aclose()
    await provider.aclose()
    # The HTTP exchanges ran on the event loop's thread (the loop bridge), not a worker.
    assert chat_calls == [threading.current_thread().name]
    assert embed_calls and sum(embed_calls) >= 2  # the memory's vector and the query's
