"""Racing tick batches of the LangGraph store: the plan of a round, the ticks as issued, the
serial model that must explain every answer, and the ledger check (shared by
``tests/langgraph/test_tick_races.py`` and its child process, ``tick_race_child``).

A round: each racer (a thread with its own event loop and store, or a process with its own
engine and store) makes ONE ``asyncio.gather`` of ``aget`` of every key and a random mix of
``aput`` and ``adelete`` of the keys (an address may be written twice: the last write of the
tick wins). The calls of one gather are one tick, so one merged batch: its reads answer from
the store before its writes, and its writes are ONE engine command. The racers start the
gather at the same moment (a barrier), so the batches' decisions overlap.

What must hold after each round (:func:`explained`, :func:`ledger_values`):

- some interleaving of the racers' operations that keeps each racer's order (its gets, in
  call order, then its batch of writes as one step) gives every answer and the state after
  the round;
- in the LEDGER (each memory folded from its own events, never a read model) every address
  holds at most one current value, and exactly the one the store answers.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from dataclasses import dataclass
from typing import Any

from memory_ledger.commands.canonical.memory_state import fold_memory_history
from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger.ids import Namespace, subject_predicate_key
from memory_ledger.ledger.tags import memory_tag
from memory_ledger.replay.langgraph_store import LedgerStore
from memory_ledger.replay.langgraph_store.records import PREDICATE, subject_of

TENANT = Namespace("acme", "alice", "tick-races")
PREFIX = ("race",)
KEYS = ("k0", "k1", "k2")

Value = dict[str, Any] | None
State = dict[str, Value]


@dataclass(frozen=True)
class Tick:
    """One racer's gather in one round: its writes in call order (``None`` deletes)."""

    racer: int
    round: int
    writes: tuple[tuple[str, Value], ...]


def plan(seed: int, racer: int, round_: int) -> Tick:
    """The writes of ``racer``'s tick in ``round_`` (seeded: the parent and a child process
    plan the same)."""
    rng = random.Random(f"{seed}-{racer}-{round_}")
    writes: list[tuple[str, Value]] = []
    for step in range(rng.randint(1, 4)):
        key = rng.choice(KEYS)
        value = None if rng.random() < 0.3 else {"racer": racer, "round": round_, "step": step}
        writes.append((key, value))
    return Tick(racer=racer, round=round_, writes=tuple(writes))


async def run_tick(store: LedgerStore, tick: Tick) -> list[Value]:
    """Issue ``tick`` as ONE gather: a get of every key first, then its writes; return the
    answers of the gets, in ``KEYS`` order."""
    calls: list[Any] = [store.aget(PREFIX, key) for key in KEYS]
    for key, value in tick.writes:
        if value is None:
            calls.append(store.adelete(PREFIX, key))
        else:
            calls.append(store.aput(PREFIX, key, value))
    answers = await asyncio.gather(*calls)
    return [None if item is None else dict(item.value) for item in answers[: len(KEYS)]]


def apply(state: State, tick: Tick) -> State:
    """``state`` after ``tick``'s writes (the last write of an address wins)."""
    after = dict(state)
    for key, value in tick.writes:
        after[key] = value
    return after


def explained(before: State, ticks: list[Tick], answers: list[list[Value]], after: State) -> bool:
    """Whether some interleaving of the racers' steps (each racer: its gets in ``KEYS``
    order, then its writes as one step) answers every get as ``answers`` says and ends in
    ``after``."""
    steps = [[("get", i, key) for key in KEYS] + [("write", i, "")] for i in range(len(ticks))]
    length = sum(len(s) for s in steps)
    for owners in _interleavings([len(s) for s in steps], length):
        state = dict(before)
        cursor = [0] * len(steps)
        fits = True
        for owner in owners:
            kind, i, key = steps[owner][cursor[owner]]
            cursor[owner] += 1
            if kind == "write":
                state = apply(state, ticks[i])
            elif answers[i][KEYS.index(key)] != state.get(key):
                fits = False
                break
        if fits and state == after:
            return True
    return False


def _interleavings(sizes: list[int], length: int) -> Any:
    """Every sequence of owners that takes ``sizes[i]`` steps from owner ``i``."""
    for places in itertools.combinations(range(length), sizes[0]):
        order = [1] * length
        for place in places:
            order[place] = 0
        if len(sizes) == 2:
            yield order
        else:  # pragma: no cover - two racers here
            raise NotImplementedError


def ledger_values(engine: MemoryEngine) -> dict[str, list[Value]]:
    """Every address's current values, from the LEDGER: the memories ever activated under
    its (subject, predicate) key, each folded from its own events, kept when current."""
    digests = engine.keyring.digests
    found: dict[str, list[Value]] = {}
    for key in KEYS:
        match = subject_predicate_key(subject_of(PREFIX, key), PREDICATE)
        assert match is not None
        tagged = engine.read_tagged(digests.key_tag(TENANT, match))
        values: list[Value] = []
        for memory in dict.fromkeys(event.originator_id for _, event in tagged):
            state = fold_memory_history(engine.read_tagged(memory_tag(memory)))
            if state is not None and state.retrievable and state.key == match:
                assert state.item is not None and state.item.value is not None
                values.append(json.loads(state.item.value))  # the value, as put
        found[key] = values
    return found
