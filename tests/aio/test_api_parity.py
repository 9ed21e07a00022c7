"""One API, sync and async (issue 34 item 8): every public method of the blocking
``MemoryEngine``, ``MemorySession`` and ``DirectCommands`` has an async twin of the same name
with the same parameters (names, kinds, defaults), as httpx's own test checks its exports;
and each twin hands every argument, unchanged, to the blocking method of that name.

What has no coroutine twin is listed below, each with the reason; the lists are checked too
(an entry that is no longer true fails), so they cannot grow stale or quietly long.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from memory_ledger.commands import MemoryEngine, MemorySession
from memory_ledger.commands.aio import AsyncDirectCommands, AsyncMemoryEngine, AsyncMemorySession
from memory_ledger.commands.aio.worker import EngineWorker
from memory_ledger.commands.engine import DirectCommands

ON_THE_WORKER = "use it inside `await mem.run(fn)`, on the engine's worker thread"
CONTEXT = "a context manager whose block must run on the thread that reads (DuckDB: one thread)"

ENGINE_WITHOUT_TWIN = {
    "ledger_guard": f"{CONTEXT}; {ON_THE_WORKER}",
    "projection_guard": f"{CONTEXT}; {ON_THE_WORKER}",
    "read_models": f"{CONTEXT}, holding the projection lock; {ON_THE_WORKER}",
    "ledger_log": f"hands out the blocking ledger log (each call is I/O); {ON_THE_WORKER}",
    "lmdb_recorder": f"hands out the blocking LMDB recorder (each call is I/O); {ON_THE_WORKER}",
    "projection_runner": f"hands out a blocking runner over the caller's store; {ON_THE_WORKER}",
    "conversation_windows": f"hands out a blocking transcript reader; {ON_THE_WORKER}",
}
"""``MemoryEngine`` members with no twin on ``AsyncMemoryEngine``, and why."""

ENGINE_PLAIN = {
    "open": (
        "returns an opener to await or to use as `async with`; the blocking open runs on the "
        "worker when it is awaited"
    ),
    "event_decoder": "builds a pure decoder: no I/O (the records come from `await read_records`)",
}
"""``MemoryEngine`` methods whose twin is a plain (not coroutine) method, and why."""

SESSION_PLAIN = {
    "config": "returns the configuration the session holds: no I/O",
    "current_turn": "returns the turn in flight the session holds: no I/O",
    "is_idle": "compares a clock and the session's queue: no I/O",
    "workspace_provider": (
        "builds a context provider: no I/O (its searches run inside `assemble_context`, on the "
        "worker)"
    ),
}
"""``MemorySession`` methods whose twin is a plain method, and why."""

SESSION_WITHOUT_TWIN = {
    "last_position": (
        "the blocking session's bookkeeping: read it on `AsyncMemorySession.session` (the "
        "positions a host awaits come back from each command)"
    ),
    "workspace": (
        "the blocking workspace retrieval object, used on the worker: `await "
        "workspace_status()` is the async read"
    ),
}
"""``MemorySession`` properties without an async twin, and why."""

SESSION_AWAITED_PROPERTIES = {
    "compactions": "a property that reads the ledger: a coroutine method, `await s.compactions()`",
}
"""``MemorySession`` properties whose twin is a coroutine method (they do I/O), and why."""


@dataclass(frozen=True)
class Pair:
    """A blocking class, its async twin, and the listed exceptions."""

    blocking: type
    twin: type
    without_twin: dict[str, str] = field(default_factory=dict)
    plain: dict[str, str] = field(default_factory=dict)
    awaited_properties: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return self.twin.__name__


PAIRS = [
    Pair(MemoryEngine, AsyncMemoryEngine, ENGINE_WITHOUT_TWIN, ENGINE_PLAIN),
    Pair(
        MemorySession,
        AsyncMemorySession,
        SESSION_WITHOUT_TWIN,
        SESSION_PLAIN,
        SESSION_AWAITED_PROPERTIES,
    ),
    Pair(DirectCommands, AsyncDirectCommands),
]


def public_members(cls: type) -> dict[str, Any]:
    """The class's public members as defined (``inspect.getattr_static``: properties and
    classmethods undecorated), inherited ones included."""
    return {n: inspect.getattr_static(cls, n) for n in dir(cls) if not n.startswith("_")}


def parameters(fn: Callable[..., Any]) -> list[tuple[str, Any, Any]]:
    """``(name, kind, default)`` of every parameter: what a caller relies on."""
    return [(p.name, p.kind, p.default) for p in inspect.signature(fn).parameters.values()]


def twinned(pair: Pair) -> list[str]:
    return sorted(n for n in public_members(pair.blocking) if n not in pair.without_twin)


@pytest.mark.parametrize("pair", PAIRS, ids=str)
def test_every_public_member_has_a_twin_with_the_same_parameters(pair: Pair) -> None:
    blocking, twin = public_members(pair.blocking), public_members(pair.twin)
    problems: list[str] = []
    for name in twinned(pair):
        mine, theirs = blocking[name], twin.get(name)
        if theirs is None:
            problems.append(f"{name}: no twin")
        elif isinstance(mine, property):
            if name in pair.awaited_properties:
                ok = inspect.iscoroutinefunction(theirs) and parameters(theirs) == parameters(
                    mine.fget  # type: ignore[arg-type]
                )
                if not ok:
                    problems.append(f"{name}: not a coroutine method of no argument")
            elif not isinstance(theirs, property):
                problems.append(f"{name}: a property, its twin is not")
        elif not callable(getattr(pair.blocking, name)):
            problems.append(f"{name}: a public data attribute; list or twin it")
        else:
            if isinstance(mine, classmethod) != isinstance(theirs, classmethod):
                problems.append(f"{name}: classmethod on one side only")
            sync_params = parameters(getattr(pair.blocking, name))
            async_params = parameters(getattr(pair.twin, name))
            if sync_params != async_params:
                problems.append(f"{name}: parameters {async_params} differ from {sync_params}")
            coroutine = inspect.iscoroutinefunction(getattr(pair.twin, name))
            if coroutine == (name in pair.plain):
                want = "a plain method" if name in pair.plain else "a coroutine"
                problems.append(f"{name}: the twin should be {want}")
    assert problems == []


@pytest.mark.parametrize("pair", PAIRS, ids=str)
def test_the_exceptions_are_few_current_and_explained(pair: Pair) -> None:
    blocking, twin = public_members(pair.blocking), public_members(pair.twin)
    assert len(pair.without_twin) + len(pair.plain) + len(pair.awaited_properties) <= 10
    for name, reason in pair.without_twin.items():
        assert name in blocking and name not in twin, name
        assert len(reason) > 20, name
    for name, reason in {**pair.plain, **pair.awaited_properties}.items():
        assert name in blocking and name in twin, name
        assert len(reason) > 20, name
    for name in pair.awaited_properties:
        assert isinstance(blocking[name], property), name


@pytest.mark.parametrize("pair", PAIRS, ids=str)
def test_every_twin_says_what_it_does(pair: Pair) -> None:
    undocumented = [
        name
        for name, member in public_members(pair.twin).items()
        if not inspect.getdoc(getattr(member, "fget", None) or getattr(pair.twin, name))
    ]
    assert undocumented == []
    assert inspect.getdoc(pair.twin) and inspect.getmodule(pair.twin).__doc__


# Forwarding ---------------------------------------------------------------------------------

RESULT = object()


class Recorder:
    """Stands in for the blocking object: every method call is recorded and returns
    :data:`RESULT`; every attribute read returns the same recording function."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []
        self.functions: dict[str, Callable[..., Any]] = {}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, args, kwargs))
            return RESULT

        return self.functions.setdefault(name, call)


def arguments_for(fn: Callable[..., Any]) -> tuple[list[Any], dict[str, Any]]:
    """One distinct marker per parameter of ``fn`` (without ``self``/``cls``), positional
    ones passed by position, keyword-only by name, ``**kwargs`` as one extra keyword."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for p in list(inspect.signature(fn).parameters.values()):
        if p.name in ("self", "cls"):
            continue
        marker = (f"<{p.name}>",)  # a tuple: a twin that reads it into a list still compares
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            args.append(marker)
        elif p.kind is p.KEYWORD_ONLY:
            kwargs[p.name] = marker
        elif p.kind is p.VAR_KEYWORD:
            kwargs["an_override"] = ("<an_override>",)
    return args, kwargs


def same(given: Any, received: Any) -> bool:
    return received is given or (isinstance(received, list) and received == list(given))


def check_forwarded(
    pair: Pair, name: str, recorder: Recorder, args: list[Any], kwargs: dict[str, Any]
) -> list[str]:
    """What went wrong in the one call the twin of ``name`` should have made."""
    calls = [c for c in recorder.calls if c[0] == name]
    if len(calls) != 1:
        return [f"{name}: {len(calls)} calls of the blocking method"]
    _, got_args, got_kwargs = calls[0]
    signature = inspect.signature(getattr(pair.blocking, name))
    owner = () if isinstance(inspect.getattr_static(pair.blocking, name), classmethod) else (None,)
    expected = signature.bind(*owner, *args, **kwargs).arguments
    try:
        received = signature.bind(*owner, *got_args, **got_kwargs).arguments
    except TypeError as e:
        return [f"{name}: the blocking method cannot take what the twin passed ({e})"]
    wrong = [
        key
        for key, value in expected.items()
        if key not in ("self",)
        and not (
            same(value, received.get(key))
            or (isinstance(value, dict) and received.get(key) == value)
        )
    ]
    return [f"{name}: {key} not passed unchanged" for key in wrong]


async def call_twin(
    pair: Pair, name: str, target: Any, args: list[Any], kwargs: dict[str, Any]
) -> Any:
    """Call the twin of ``name`` on a fresh twin object over ``target``, as a caller would."""
    worker = EngineWorker("parity")
    try:
        if pair.twin is AsyncMemoryEngine:
            obj: Any = AsyncMemoryEngine(target, worker)
        elif pair.twin is AsyncMemorySession:
            obj = AsyncMemorySession(target, worker)
        else:
            obj = AsyncDirectCommands(Recorder(), worker, target)  # type: ignore[arg-type]
        member = inspect.getattr_static(pair.blocking, name)
        if isinstance(member, property):
            value = getattr(obj, name)
            return await value() if name in pair.awaited_properties else value
        result = getattr(obj, name)(*args, **kwargs)
        return await result if inspect.isawaitable(result) else result
    finally:
        worker.shutdown()


def forwarded_result(pair: Pair, name: str, result: Any, recorder: Recorder) -> bool:
    """Whether the twin returned what the blocking member gave (a session wrapped)."""
    if isinstance(inspect.getattr_static(pair.blocking, name), property):
        return result is recorder.functions.get(name)
    if inspect.signature(getattr(pair.blocking, name)).return_annotation in (None, "None"):
        return result is None
    return result is RESULT or getattr(result, "session", None) is RESULT


@pytest.mark.parametrize("pair", PAIRS, ids=str)
def test_every_twin_forwards_its_arguments_unchanged(
    pair: Pair, monkeypatch: pytest.MonkeyPatch
) -> None:
    problems: list[str] = []

    async def main() -> None:
        for name in twinned(pair):
            if name == "open":
                continue  # below: it opens a store
            recorder = Recorder()
            is_property = isinstance(inspect.getattr_static(pair.blocking, name), property)
            args, kwargs = ([], {}) if is_property else arguments_for(getattr(pair.blocking, name))
            result = await call_twin(pair, name, recorder, args, kwargs)
            if not forwarded_result(pair, name, result, recorder):
                problems.append(f"{name}: the twin did not return the blocking result")
            if not is_property:
                problems.extend(check_forwarded(pair, name, recorder, args, kwargs))

    asyncio.run(main())
    assert problems == []


def test_async_open_forwards_every_option(monkeypatch: pytest.MonkeyPatch) -> None:
    """``AsyncMemoryEngine.open`` hands its path and every option to ``MemoryEngine.open``
    on the worker (the options are markers no provider or config check recognises)."""
    recorder, engine = Recorder(), Recorder()

    def fake_open(*args: Any, **kwargs: Any) -> Recorder:
        recorder.calls.append(("open", args, kwargs))
        return engine

    monkeypatch.setattr(MemoryEngine, "open", fake_open)
    args, kwargs = arguments_for(AsyncMemoryEngine.open)

    async def main() -> AsyncMemoryEngine:
        mem = await AsyncMemoryEngine.open(*args, **kwargs)
        await mem.aclose()
        return mem

    mem = asyncio.run(main())
    assert mem.engine is cast(Any, engine)
    assert [call[0] for call in engine.calls] == ["close"]
    monkeypatch.undo()
    assert check_forwarded(PAIRS[0], "open", recorder, args, kwargs) == []


def test_the_async_page_names_every_exception() -> None:
    """docs/async.md lists what has no coroutine twin, so a reader never has to guess."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "async.md").read_text("utf-8")
    for pair in PAIRS:
        for name in {**pair.without_twin, **pair.plain, **pair.awaited_properties}:
            assert f"`{name}`" in page or f"`AsyncMemoryEngine.{name}`" in page, name
