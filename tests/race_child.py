"""Racing decisions about one (subject, predicate) key: shared by
``tests/canonical/test_decision_races.py`` (threads) and run as a child process by it (two
processes on one store)::

    python -m tests.race_child '<json arguments>'

A child opens the store, says ``{"ready": pid}``, and per round: reads a ``round`` line,
prepares its session (a turn whose candidate is a new value of the key, or an explicit
``correct`` of the key's current value; with ``first`` a new key every round, so there is no
current value), calls ``finish()``, and at its first decision
(fault point ``decision.planned``: read and planned, not appended) says ``{"planned": r}``
and waits for ``go``, so the parent releases both processes' appends of decisions made from
the same ledger state. Then it says ``{"finished": r, "retries": n}`` (``n`` refused appends).
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from typing import Any
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from memory_ledger.commands.canonical.memory_state import fold_memory_history
from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.extraction import RecordedExtractor
from memory_ledger.commands.session import MemorySession
from memory_ledger.ledger import faults
from memory_ledger.ledger.ids import Namespace, subject_predicate_key
from memory_ledger.ledger.tags import memory_tag

SUBJECT, PREDICATE = "Alice", "lives_in"


def active_values(engine: MemoryEngine, ns: Namespace, subject: str = SUBJECT) -> list[UUID]:
    """The memories retrievable now under (ns, subject, lives_in), from the LEDGER (every
    value ever activated under the key, each folded from its own history)."""
    key = subject_predicate_key(subject, PREDICATE)
    assert key is not None
    ids = dict.fromkeys(
        e.originator_id for _, e in engine.read_tagged(engine.keyring.digests.key_tag(ns, key))
    )
    active = []
    for memory in ids:
        state = fold_memory_history(engine.read_tagged(memory_tag(memory)))
        if state is not None and state.retrievable and state.key == key:
            active.append(memory)
    return active


def value_item(city: str, subject: str = SUBJECT) -> dict[str, Any]:
    return {
        "kind": "semantic",
        "subject": subject,
        "predicate": PREDICATE,
        "value": city,
        "statement": f"{subject} lives in {city}.",
        "source": "fact",
        "scope": "user",
        "reason": "where the user lives",
        "importance": 0.8,
        "confidence": 0.9,
        "tags": ["home", city.lower()],
    }


def prepare(
    engine: MemoryEngine, ns: Namespace, sid: str, mode: str, city: str, subject: str = SUBJECT
) -> MemorySession:
    """A session whose ``finish()`` decides about the key (``subject``, lives_in): a new
    value (``candidate``) or a correction of the current value (``correct``)."""
    extractor = RecordedExtractor()
    session = engine.session(ns, sid, extractor=extractor)
    if mode == "candidate":
        extractor.provide(1, [value_item(city, subject)])
        session.observe_final_transcript(1, f"user: I live in {city} now")
    else:
        current = active_values(engine, ns, subject)
        assert len(current) == 1, current
        session.apply_explicit_command(
            "correct", f"{subject} lives in {city}.", 1, target=current[0]
        )
    return session


def round_subject(variant_first: bool, number: int) -> str:
    """The key's subject in a round: a new one every round for the "first values" variant
    (no value yet: only the key's append condition can see the other writer), else Alice."""
    return f"Person{number}" if variant_first else SUBJECT


def count_refusals(engine: MemoryEngine) -> Callable[[], int]:
    """Wrap ``engine.append`` to count refused appends (this process); returns a reader."""
    original = engine.append
    refused = [0]
    lock = threading.Lock()

    def append(events: Any, **kwargs: Any) -> list[int]:
        try:
            return original(events, **kwargs)
        except IntegrityError:
            with lock:
                refused[0] += 1
            raise

    engine.append = append  # type: ignore[method-assign]
    return lambda: refused[0]


def emit(**message: Any) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def run(
    store: str, namespace: list[str], child: int, rounds: int, mode: str, first: bool = False
) -> None:
    ns = Namespace(namespace[0], namespace[1], namespace[2])
    with MemoryEngine.open(store) as engine:
        refusals = count_refusals(engine)
        emit(ready=os.getpid())
        for number in range(rounds):
            if sys.stdin.readline().strip() != "round":
                raise SystemExit("expected 'round'")
            subject = round_subject(first, number)
            city = f"City{number}-{child}"
            session = prepare(engine, ns, f"p{child}-r{number}", mode, city, subject)
            waited = [False]

            def planned(number: int = number, waited: list[bool] = waited) -> None:
                if waited[0]:
                    return  # a re-decision after a refusal goes straight on
                waited[0] = True
                emit(planned=number)
                if sys.stdin.readline().strip() != "go":
                    raise SystemExit("expected 'go'")

            faults.FAULTS["decision.planned"] = planned
            before = refusals()
            session.finish()
            faults.FAULTS.clear()
            emit(finished=number, retries=refusals() - before)


if __name__ == "__main__":
    run(**json.loads(sys.argv[1]))
