"""``BatchResult.never_activated``: the match keys a batch's decision read and found no
memory ever activated under, before the batch (what the LangGraph reader takes a new key in
with, instead of a tag read of its own). Sound (no key named that held an activation before
the batch's first record, by an independent read of the tag index) and complete for the
keys the batch remembers under and its ``vacant`` ones; the same from the async engine;
empty when the append condition is switched off."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger import BatchResult, Forget, Remember
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.aio import AsyncMemoryEngine
from memory_ledger.commands.errors import (
    CommandRejectedError,
    SupersededTargetError,
    UnknownMemoryError,
)
from memory_ledger.ledger.ids import subject_predicate_key

SUBJECTS = ["alice", "bob", "carol"]
PREDICATE = "likes"


def key(subject: str) -> tuple[str, str]:
    found = subject_predicate_key(subject, PREDICATE)
    assert found is not None
    return found


def activated_before(
    engine: MemoryEngine, namespace: Namespace, result: BatchResult
) -> set[tuple[str, str]]:
    """The keys of :data:`SUBJECTS` with an activation before ``result``'s first record."""
    start = result.outcomes[0].position  # the batch's first record: its first command
    held: set[tuple[str, str]] = set()
    for subject in SUBJECTS:
        tag = engine.keyring.digests.key_tag(namespace, key(subject))
        if any(position < start for position, _ in engine.read_tagged(tag)):
            held.add(key(subject))
    return held


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryEngine]:
    with MemoryEngine.open(tmp_path_factory.mktemp("never") / "store") as engine:
        yield engine


_OP = st.tuples(st.sampled_from(["remember", "forget", "vacant"]), st.integers(0, 2))


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(batches=st.lists(st.lists(_OP, min_size=1, max_size=4), min_size=1, max_size=5))
def test_never_activated_is_exact_for_the_keys_the_batch_reads(
    shared: MemoryEngine, batches: list[list[tuple[str, int]]]
) -> None:
    namespace = Namespace("never", "a", uuid.uuid4().hex)
    held: dict[str, UUID] = {}  # subject -> its latest remembered memory
    for round_, ops in enumerate(batches):
        items: list[Remember | Forget] = []
        vacant: list[tuple[str, str]] = []
        for kind, which in ops:
            subject = SUBJECTS[which]
            if kind == "remember":
                items.append(
                    Remember(
                        statement=f"{subject} likes thing {round_}",
                        subject=subject,
                        predicate=PREDICATE,
                    )
                )
            elif kind == "forget" and subject in held:
                items.append(Forget(target=held[subject]))
            elif kind == "vacant":
                vacant.append((subject, PREDICATE))
        if not items:
            items.append(Remember(statement=f"a note of round {round_}"))
        try:
            result = shared.apply_batch(namespace, items, vacant=vacant)
        except (CommandRejectedError, UnknownMemoryError, SupersededTargetError):
            continue  # refused whole (a vacant key holding a value, a forget of a gone one)
        before = activated_before(shared, namespace, result)
        assert not (result.never_activated & before)  # sound: none held one before
        read = {key(s) for s, _ in vacant} | {
            key(item.subject) for item in items if isinstance(item, Remember) and item.subject
        }
        assert read - before <= result.never_activated  # complete for the keys it read
        for item, outcome in zip(items, result.outcomes, strict=True):
            if isinstance(item, Remember) and item.subject and outcome.memory_id is not None:
                held[item.subject] = outcome.memory_id


def test_a_held_key_is_not_named_and_a_new_or_vacant_one_is(engine: MemoryEngine) -> None:
    namespace = Namespace("never", "a", "fixed")
    engine.remember(namespace, "alice likes tea", subject="alice", predicate=PREDICATE)
    result = engine.apply_batch(
        namespace,
        [
            Remember(statement="alice likes jazz", subject="alice", predicate=PREDICATE),
            Remember(statement="bob likes chess", subject="bob", predicate=PREDICATE),
        ],
        vacant=[("carol", PREDICATE)],
    )
    assert result.never_activated == {key("bob"), key("carol")}
    again = engine.apply_batch(
        namespace, [Remember(statement="bob likes go", subject="bob", predicate=PREDICATE)]
    )
    assert again.never_activated == frozenset()


def test_the_async_engine_answers_the_same(tmp_path: Path) -> None:
    namespace = Namespace("never", "a", "async")

    async def scenario() -> BatchResult:
        async with AsyncMemoryEngine.open(tmp_path / "store") as mem:
            await mem.remember(namespace, "alice likes tea", subject="alice", predicate=PREDICATE)
            return await mem.apply_batch(
                namespace,
                [
                    Remember(statement="alice likes jazz", subject="alice", predicate=PREDICATE),
                    Remember(statement="bob likes chess", subject="bob", predicate=PREDICATE),
                ],
            )

    assert asyncio.run(scenario()).never_activated == {key("bob")}


def test_nothing_is_named_without_the_append_condition(engine: MemoryEngine) -> None:
    engine.consistency_boundary = False  # the benchmark's baseline: nothing guards the reads
    result = engine.apply_batch(
        Namespace("never", "a", "off"),
        [Remember(statement="bob likes chess", subject="bob", predicate=PREDICATE)],
    )
    assert result.never_activated == frozenset()
