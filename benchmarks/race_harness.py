"""A race harness for every deciding command (issue 25 item 3).

Each round plans a random mix of deciding commands on a few keys of one namespace (keyed
``remember``; ``correct`` by target id and by words; ``forget`` and ``pin`` by id;
unkeyed ``remember`` of a statement that may exist already; rarely ``forget_all``), releases
them together from a barrier (threads of one engine, processes on one store, or hosts on
one PostgreSQL ledger), records each call's start, end and answer, and then checks, against
the LEDGER (never a read model):

- at most one retrievable value per (subject, predicate) key and per supersession chain;
- every acknowledged command's effect is present (its session reconciled in the ledger, and
  a forget/pin/correct wrote to the memory it answered it applied to);
- the answers and the state after the round are those of SOME serial order of the same
  calls that respects real time (a call that ended before another began comes first): a
  Wing & Gong linearizability search over :class:`Model`, the sequential specification.

Used by ``tests/canonical/test_race_harness.py`` (fast profile, in CI) and ``python -m benchmarks
races`` (long profile). The newer write surfaces are raced by their own tests against a serial
order: the LangGraph store's tick batches from two threads and two processes
(``tests/langgraph/test_tick_races.py``, with its control) and two interchange imports of one
file (``tests/imports/test_interchange.py``).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from memory_ledger.commands.canonical.boundary import DecisionReads
from memory_ledger.commands.canonical.memory_state import MemoryStreamState
from memory_ledger.commands.engine.batch import Forget, Remember
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.commands.errors import ConcurrencyConflictError
from memory_ledger.ledger.digests import UNKEYED, IdDigests
from memory_ledger.ledger.errors import MemoryLedgerError
from memory_ledger.ledger.events import DirectCommandApplied, SessionReconciled
from memory_ledger.ledger.ids import Namespace, normalize_statement

__all__ = [
    "Call",
    "Model",
    "Op",
    "check_round",
    "initial_model",
    "plan_round",
    "run_op",
    "run_threads_round",
]

KEYED = ("Alice", "Bob")
"""Subjects of keyed values: ``<S> lives in <city>.`` under (S, lives in)."""
CHAINED = "Carol"
"""The subject of an unkeyed chain: ``Carol works at <place>.`` corrected by words or id."""
CITIES = ("Lisbon", "Porto", "Braga", "Faro", "Evora")
PLAIN = "Dave"
"""The subject of unkeyed statements remembered again and again: ``Dave likes <drink>.``
(statement identity: an active one is reinforced, a forgotten one activated anew)."""
DRINKS = ("tea", "coffee", "mate")


@dataclass(frozen=True)
class Op:
    """One planned command. ``target`` is a memory id read before the round (by-id
    commands); ``statement`` is unique per op for corrections (no collision with another
    memory)."""

    kind: str  # remember_keyed, remember_plain, correct_id, correct_words, forget, pin,
    # forget_all, batch (a keyed remember and a forget by id in one apply_batch)
    subject: str
    statement: str = ""
    target: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "subject": self.subject,
            "statement": self.statement,
            "target": self.target,
        }


@dataclass
class Call:
    """A call as it happened: the op, when it started and ended (``time.monotonic``, one
    clock for every process of the machine) and its answer: ``("ok", target id or None)``
    or ``("error", reason code)``."""

    op: Op
    start: float
    end: float
    answer: tuple[str, str | None]
    session_id: str | None = None


def plan_round(rng: random.Random, ns_state: dict[UUID, Any], n_ops: int, serial: int) -> list[Op]:
    """``n_ops`` random ops for one round. By-id targets are memories retrievable when the
    round starts (four in five: the ones the ops race to change) or any memory of the
    namespace (a stale id: superseded or forgotten, refused). ``ns_state`` maps memory ids
    to :class:`Memory`."""
    everything = list(ns_state)
    current = [m for m, v in ns_state.items() if getattr(v, "status", "") == "active"]
    ops: list[Op] = []

    def pick() -> UUID:
        return rng.choice(current if current and rng.random() < 0.8 else everything)

    for index in range(n_ops):
        tag = f"{serial}x{index}"
        roll = rng.random()
        if roll < 0.25:
            subject = rng.choice(KEYED)
            ops.append(Op("remember_keyed", subject, f"{subject} lives in {rng.choice(CITIES)}."))
        elif roll < 0.45:
            subject = rng.choice(KEYED)
            target = pick() if everything else None
            ops.append(
                Op("correct_id", subject, f"{subject} lives in Town{tag}.", str(target))
                if target is not None
                else Op("remember_keyed", subject, f"{subject} lives in {rng.choice(CITIES)}.")
            )
        elif roll < 0.65:
            ops.append(Op("correct_words", CHAINED, f"{CHAINED} works at Shop{tag}."))
        elif roll < 0.75:
            ops.append(Op("remember_plain", PLAIN, f"{PLAIN} likes {rng.choice(DRINKS)}."))
        elif roll < 0.81 and everything:
            subject = rng.choice(KEYED)
            statement = f"{subject} lives in {rng.choice(CITIES)}."
            ops.append(Op("batch", subject, statement, str(pick())))
        elif roll < 0.87 and everything:
            ops.append(Op("forget", "", target=str(pick())))
        elif roll < 0.98 and everything:
            ops.append(Op("pin", "", target=str(pick())))
        elif roll >= 0.98:
            ops.append(Op("forget_all", ""))
        else:
            ops.append(Op("remember_plain", PLAIN, f"{PLAIN} likes {rng.choice(DRINKS)}."))
    return ops


def run_op(engine: MemoryEngine, ns: Namespace, op: Op) -> Call:
    """Run ``op`` against ``engine`` and record it."""
    start = time.monotonic()
    session_id: str | None = None
    try:
        if op.kind == "remember_keyed":
            city = op.statement.rsplit(" ", 1)[1].rstrip(".")
            result = engine.remember(
                ns, op.statement, subject=op.subject, predicate="lives in", value=city
            )
            answer: tuple[str, str | None] = ("ok", None)
        elif op.kind == "remember_plain":
            result = engine.remember(ns, op.statement)
            answer = ("ok", None)
        elif op.kind == "correct_id":
            result = engine.correct(ns, op.statement, target=op.target)
            answer = ("ok", str(result.target) if result.target else None)
        elif op.kind == "correct_words":
            result = engine.correct(ns, op.statement)
            answer = ("ok", str(result.target) if result.target else None)
        elif op.kind == "forget":
            assert op.target is not None
            result = engine.forget(ns, op.target)
            answer = ("ok", str(result.target))
        elif op.kind == "pin":
            assert op.target is not None
            result = engine.pin(ns, op.target)
            answer = ("ok", str(result.target))
        elif op.kind == "batch":
            assert op.target is not None
            city = op.statement.rsplit(" ", 1)[1].rstrip(".")
            keyed = Remember(
                statement=op.statement, subject=op.subject, predicate="lives in", value=city
            )
            batch = engine.apply_batch(ns, [keyed, Forget(target=op.target)])
            answer = ("ok", op.target)
            return Call(op, start, time.monotonic(), answer, batch.session_id)
        else:
            count = engine.forget_all(ns)
            return Call(op, start, time.monotonic(), ("ok", str(count)))
        session_id = result.session_id
    except ConcurrencyConflictError:
        answer = ("error", "concurrency_conflict")
    except MemoryLedgerError as error:
        answer = ("error", error.reason_code)
    return Call(op, start, time.monotonic(), answer, session_id)


# The sequential specification ---------------------------------------------------------------


@dataclass
class Memory:
    statement: str
    status: str
    key: tuple[str, str] | None
    superseded_by: UUID | None = None


@dataclass
class Model:
    """The sequential specification of the deciding commands over one namespace: what
    each would answer and leave, applied one at a time (docs/design.md and the
    reconciliation rules of ``commands.canonical.reconcile``)."""

    ns: Namespace
    memories: dict[UUID, Memory] = field(default_factory=dict)
    digests: IdDigests = UNKEYED
    """How the store derives memory ids (its keyring's)."""

    def copy(self) -> Model:
        return Model(
            self.ns,
            {
                k: Memory(v.statement, v.status, v.key, v.superseded_by)
                for k, v in self.memories.items()
            },
            self.digests,
        )

    def retrievable(self) -> set[UUID]:
        return {k for k, v in self.memories.items() if v.status in ("active", "conflicted")}

    def _refusal(self, target: UUID) -> tuple[str, str | None] | None:
        """The answer of a command naming ``target`` by id when it is refused: a superseded
        memory gets ``target_superseded`` (never moved to the current value), a forgotten or
        unknown one ``unknown_memory``; None when it is retrievable."""
        memory = self.memories.get(target)
        if memory is not None and memory.status == "superseded":
            return ("error", "target_superseded")
        if memory is None or memory.status not in ("active", "conflicted"):
            return ("error", "unknown_memory")
        return None

    def _activate(self, statement: str, key: tuple[str, str] | None) -> UUID:
        mid = self.digests.memory_id(self.ns, normalize_statement(statement))
        existing = self.memories.get(mid)
        if existing is not None and existing.status in ("active", "conflicted"):
            return mid  # reinforced
        self.memories[mid] = Memory(statement, "active", key)
        if key is not None:
            for other, memory in self.memories.items():
                if other != mid and memory.key == key and memory.status == "active":
                    memory.status, memory.superseded_by = "superseded", mid
        return mid

    def _named(self) -> list[UUID]:
        """What the words of a ``Carol works at ...`` correction name: the retrievable
        memories of the chain's subject."""
        return sorted(
            mid
            for mid in self.retrievable()
            if self.memories[mid].statement.startswith(CHAIN_PREFIX)
        )

    def apply(self, op: Op) -> tuple[str, str | None]:
        """Apply ``op``; return the answer it gives in this state."""
        if op.kind == "remember_keyed":
            self._activate(op.statement, (op.subject.casefold(), "lives in"))
            return ("ok", None)
        if op.kind == "remember_plain":
            self._activate(op.statement, None)
            return ("ok", None)
        if op.kind in ("correct_id", "correct_words"):
            if op.kind == "correct_id":
                assert op.target is not None
                head: UUID | None = UUID(op.target)
                refused = self._refusal(UUID(op.target))
                if refused is not None:
                    return refused
            else:
                named = self._named()
                if len(named) > 1:
                    return ("error", "ambiguous_match")
                head = named[0] if named else None
            key = self.memories[head].key if head is not None else None
            new = self._activate(op.statement, key)
            if head is not None and head != new:
                memory = self.memories[head]
                if memory.status in ("active", "conflicted"):
                    memory.status, memory.superseded_by = "superseded", new
            return ("ok", str(head) if head is not None else None)
        if op.kind == "batch":  # one command: all of it, or none of it
            # Its operations one by one, nothing in between (docs/concurrency.md, "A batch is
            # its operations in order"): the forget's target is judged after the remember,
            # so a superseded or forgotten target that the remember makes current again is
            # forgotten, and one the remember supersedes refuses the batch.
            assert op.target is not None
            trial = self.copy()
            trial._activate(op.statement, (op.subject.casefold(), "lives in"))
            refused = trial._refusal(UUID(op.target))
            if refused is not None:
                return refused
            trial.memories[UUID(op.target)].status = "forgotten"
            self.memories = trial.memories
            return ("ok", op.target)
        if op.kind in ("forget", "pin"):
            assert op.target is not None
            refused = self._refusal(UUID(op.target))
            if refused is not None:
                return refused
            if op.kind == "forget":
                self.memories[UUID(op.target)].status = "forgotten"
            return ("ok", op.target)
        count = 0
        for memory in self.memories.values():
            if memory.status in ("active", "conflicted"):
                memory.status = "forgotten"
                count += 1
        return ("ok", str(count))


def initial_model(engine: MemoryEngine, ns: Namespace) -> Model:
    """The model of ``ns`` as the ledger has it now."""
    model = Model(ns, digests=engine.keyring.digests)
    for mid, state in DecisionReads(engine, ns).namespace_memories().items():
        statement = state.item.statement if state.item is not None else ""
        model.memories[mid] = Memory(statement, state.status, state.key, state.superseded_by)
    return model


def linearizable(model: Model, calls: Sequence[Call], final: set[UUID]) -> bool:
    """Whether some serial order of ``calls`` that respects real time gives every recorded
    answer and leaves exactly ``final`` retrievable (Wing & Gong's search; a call whose
    answer is a concurrency conflict wrote nothing and is left out)."""
    pending = [c for c in calls if c.answer != ("error", "concurrency_conflict")]
    seen: set[tuple[frozenset[int], tuple[Any, ...]]] = set()

    def fingerprint(state: Model) -> tuple[Any, ...]:
        return tuple(sorted((k, v.status, v.superseded_by) for k, v in state.memories.items()))

    def search(state: Model, left: frozenset[int]) -> bool:
        if not left:
            return state.retrievable() == final
        memo = (left, fingerprint(state))
        if memo in seen:
            return False
        seen.add(memo)
        earliest_end = min(pending[i].end for i in left)
        for index in sorted(left):
            call = pending[index]
            if call.start > earliest_end:
                continue  # some other pending call ended before this one began
            trial = state.copy()
            if trial.apply(call.op) == call.answer and search(trial, left - {index}):
                return True
        return False

    return search(model.copy(), frozenset(range(len(pending))))


def check_round(
    engine: MemoryEngine, ns: Namespace, before: Model, calls: Sequence[Call]
) -> list[str]:
    """The violations of one round (empty: none), read from the ledger."""
    violations: list[str] = []
    states = DecisionReads(engine, ns).namespace_memories()
    retrievable = {mid for mid, s in states.items() if s.retrievable}
    keys: dict[tuple[str, str], int] = {}
    for mid in retrievable:
        key = states[mid].key
        if key is not None:
            keys[key] = keys.get(key, 0) + 1
    violations += [f"key {k} has {n} current values" for k, n in keys.items() if n > 1]
    chains = [mid for mid in retrievable if _statement(states[mid]).startswith(CHAIN_PREFIX)]
    if len(chains) > 1:
        violations.append(f"the correction chain has {len(chains)} current values")
    for call in calls:
        if call.answer[0] != "ok" or not call.session_id:
            continue
        if not _reconciled(engine, ns, call.session_id):
            violations.append(f"{call.op.kind} acknowledged but its session is not reconciled")
        target = call.answer[1]
        if call.op.kind in ("forget", "pin", "correct_id", "correct_words", "batch") and target:
            written = [
                e.session_id for e in engine.load_stream(UUID(target)) if hasattr(e, "session_id")
            ]
            pinned = call.op.kind == "pin" and states[UUID(target)].pinned
            if call.session_id not in written and not pinned:
                violations.append(f"{call.op.kind} acknowledged but its target shows no effect")
    if not linearizable(before, calls, retrievable):
        violations.append("no serial order of the calls gives these answers and this state")
    return violations


CHAIN_PREFIX = f"{CHAINED} works at"


def _statement(state: MemoryStreamState) -> str:
    return state.item.statement if state.item is not None else ""


def _reconciled(engine: MemoryEngine, ns: Namespace, session_id: str) -> bool:
    stream = engine.load_stream(engine.keyring.digests.session_stream_id(ns, session_id))
    return any(
        isinstance(event, SessionReconciled)
        or (isinstance(event, DirectCommandApplied) and event.report is not None)
        for event in stream
    )


def run_threads_round(
    engine: MemoryEngine, ns: Namespace, ops: Sequence[Op], workers: int
) -> list[Call]:
    """Run ``ops`` from ``workers`` threads released together by a barrier; each thread
    runs its share in order."""
    barrier = threading.Barrier(workers)
    calls: list[Call] = []
    lock = threading.Lock()

    def work(share: Sequence[Op]) -> None:
        barrier.wait()
        for op in share:
            call = run_op(engine, ns, op)
            with lock:
                calls.append(call)

    shares = [ops[i::workers] for i in range(workers)]
    threads = [threading.Thread(target=work, args=(share,)) for share in shares]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return calls


NAMESPACE = Namespace("acme", "racer", "races")
"""The namespace every surface of the harness races in."""


class Workers:
    """Worker processes (``benchmarks.race_worker``) on one store, or hosts of one
    PostgreSQL ledger (``url``; each host its own folder under ``store``)."""

    def __init__(self, store: Path, count: int, url: str | None = None) -> None:
        self.processes: list[subprocess.Popen[str]] = []
        root = Path(__file__).resolve().parents[1]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])),
        }
        for index in range(count):
            folder = store / f"host-{index}" if url else store
            args = [sys.executable, "-m", "benchmarks.race_worker", str(folder)]
            self.processes.append(
                subprocess.Popen(
                    [*args, *([url] if url else [])],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    text=True,
                    cwd=root,
                    env=env,
                )
            )
        for process in self.processes:
            line = process.stdout.readline() if process.stdout else ""
            if "ready" not in line:
                self.close()
                msg = f"race worker did not start: {line!r}"
                raise RuntimeError(msg)
        self.conflicts = [0] * count

    def run_round(self, ops: Sequence[Op]) -> list[Call]:
        """Give each worker its share of ``ops``, released together; collect the calls."""
        release = time.monotonic() + 0.05 + 0.01 * len(self.processes)
        count = len(self.processes)
        for index, process in enumerate(self.processes):
            share = [op.as_dict() for op in ops[index::count]]
            assert process.stdin is not None
            process.stdin.write(json.dumps({"ops": share, "release_at": release}) + "\n")
            process.stdin.flush()
        calls: list[Call] = []
        for index, process in enumerate(self.processes):
            assert process.stdout is not None
            reply = json.loads(process.stdout.readline())
            self.conflicts[index] = reply["conflicts"]
            for raw in reply["calls"]:
                answer = (raw["answer"][0], raw["answer"][1])
                calls.append(
                    Call(Op(**raw["op"]), raw["start"], raw["end"], answer, raw["session_id"])
                )
        return calls

    def close(self) -> None:
        for process in self.processes:
            try:
                if process.stdin is not None:
                    process.stdin.write("\n")
                    process.stdin.close()
                process.wait(timeout=60)
            except (OSError, subprocess.TimeoutExpired):
                process.kill()


@dataclass
class SurfaceFigures:
    """What one surface of the harness did: rounds, commands, violations, conflicts."""

    surface: str
    rounds: int = 0
    commands: int = 0
    violations: list[str] = field(default_factory=list)
    conflicts: int = 0
    errors: dict[str, int] = field(default_factory=dict)


def race(
    surface: str,
    auditor: MemoryEngine,
    runner: Callable[[Sequence[Op]], list[Call]],
    *,
    rounds: int,
    ops_per_round: int,
    seed: int,
) -> SurfaceFigures:
    """Run ``rounds`` rounds through ``runner``, checking each with ``auditor`` (an engine
    on the same ledger)."""
    rng = random.Random(seed)
    figures = SurfaceFigures(surface)
    for index in range(rounds):
        before = initial_model(auditor, NAMESPACE)
        ops = plan_round(rng, before.memories, ops_per_round, index)
        calls = runner(ops)
        figures.rounds += 1
        figures.commands += len(calls)
        for call in calls:
            if call.answer[0] == "error" and call.answer[1]:
                figures.errors[call.answer[1]] = figures.errors.get(call.answer[1], 0) + 1
        found = check_round(auditor, NAMESPACE, before, calls)
        if found:  # what raced, so a rare violation can be replayed by hand
            raced = [(c.op.as_dict(), round(c.start, 6), round(c.end, 6), c.answer) for c in calls]
            figures.violations += [f"round {index}: {v}; calls: {raced}" for v in found]
    return figures
