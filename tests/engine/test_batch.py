"""Batch commands (issue 30 item 2; the LangGraph store's ``batch``, issue 28): many
remembers and forgets of one namespace as ONE command, one append, refused whole.

The property: a batch leaves exactly the canonical memory that the same operations applied
one by one as direct commands leave (a serial model of the batch).
"""

from __future__ import annotations

import asyncio
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import memory_ledger
from memory_ledger import Forget, Remember
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.aio import AsyncMemoryEngine
from memory_ledger.ledger.events import (
    DirectCommandApplied,
    MemoryForgotten,
    MemorySuperseded,
    SessionOpened,
    SessionReconciled,
    SessionSealed,
)
from memory_ledger.ledger.ids import normalize_statement
from tests.engine.append_spy import appended

NS = Namespace("acme", "alice", "assistant")
OTHER = Namespace("acme", "bob", "assistant")


def _events(engine: MemoryEngine) -> list[Any]:
    notifications = engine.recorder.select_notifications(1, engine.head + 1)
    return [engine.mapper.to_domain_event(n) for n in notifications]


def _current(engine: MemoryEngine, namespace: Namespace = NS) -> set[str]:
    return {doc.statement for doc in engine.retrievable_memories(namespace)}


def test_remember_many_is_one_append_of_one_session(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches = appended(engine, monkeypatch)
    facts = [f"Alice visited city number {n}." for n in range(50)]
    result = engine.remember_many(NS, facts)
    assert len(batches) == 1
    (events,) = batches
    # one record per command (the first opens the short session, the last carries its
    # report), then the memory events: no SessionOpened, SessionSealed or SessionReconciled
    commands = [e for e in events if isinstance(e, DirectCommandApplied)]
    assert [e.originator_version for e in commands] == list(range(1, 51))
    assert events[:50] == commands
    assert [e.report is not None for e in commands] == [False] * 49 + [True]
    assert not any(isinstance(e, SessionOpened | SessionSealed | SessionReconciled) for e in events)
    assert len(events) == 100  # 50 commands and 50 activations
    assert len({e.session_id for e in events}) == 1
    assert result.session_id.startswith("batch-")
    assert result.position == engine.head
    assert [o.memory_id for o in result.outcomes] == [
        engine.keyring.digests.memory_id(NS, normalize_statement(f)) for f in facts
    ]
    assert [o.position for o in result.outcomes] == sorted({o.position for o in result.outcomes})
    assert _current(engine) == set(facts)
    assert engine.recall(NS, "city number 17", k=1)[0].statement == facts[17]


def test_a_keyed_fact_put_twice_in_a_batch_keeps_the_later_value(engine: MemoryEngine) -> None:
    engine.remember(NS, "Alice lives in Faro.", subject="Alice", predicate="lives in")
    result = engine.apply_batch(
        NS,
        [
            Remember(statement="Alice lives in Lisbon.", subject="Alice", predicate="lives in"),
            Remember(statement="Alice lives in Porto.", subject="Alice", predicate="lives in"),
        ],
    )
    assert _current(engine) == {"Alice lives in Porto."}
    superseded = [e for e in _events(engine) if isinstance(e, MemorySuperseded)]
    assert len(superseded) == 2  # Faro by Lisbon, Lisbon by Porto: the ledger keeps both
    assert result.report.position == result.position


def test_a_forget_may_name_a_memory_remembered_earlier_in_the_batch(engine: MemoryEngine) -> None:
    kept = engine.remember(NS, "Alice likes tea.")
    fresh = engine.keyring.digests.memory_id(NS, normalize_statement("Alice likes green tea."))
    result = engine.apply_batch(
        NS,
        [
            "Alice likes green tea.",
            Forget(target=fresh),
            Forget(target=str(kept.memory_id)),
            "Alice likes coffee.",
        ],
    )
    assert _current(engine) == {"Alice likes coffee."}
    assert [o.intent for o in result.outcomes] == ["remember", "forget", "forget", "remember"]
    assert result.outcomes[2].memory_id == kept.memory_id
    forgotten = {e.originator_id for e in _events(engine) if isinstance(e, MemoryForgotten)}
    assert forgotten == {fresh, kept.memory_id}


def test_a_forget_by_words_names_a_memory_stored_before_the_batch(engine: MemoryEngine) -> None:
    engine.remember(NS, "Alice plays the cello on Sundays.")
    engine.apply_batch(NS, [Forget(target="cello Sundays"), "Alice plays chess."])
    assert _current(engine) == {"Alice plays chess."}


@pytest.mark.parametrize(
    ("ops", "reason", "parameter"),
    [
        ([], "empty_batch", "ops"),
        (["fine", "  "], "empty_statement", "ops[1].statement"),
        (
            ["fine", Remember(statement="my password is Zq8!vR2#mK9pL4xW")],
            "secret_detected",
            "ops[1].statement",
        ),
        (["fine", Remember(statement="tagged", tags="oops")], "invalid_tags", "ops[1].tags"),  # type: ignore[arg-type]
        (["fine", 42], "invalid_argument_type", "ops[1]"),
        ("just a string", "invalid_argument_type", "ops"),
    ],
)
def test_a_bad_operation_refuses_the_whole_batch_naming_it(
    engine: MemoryEngine, ops: Any, reason: str, parameter: str
) -> None:
    engine.remember(NS, "Alice likes tea.")
    head = engine.head
    with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
        engine.apply_batch(NS, ops)
    assert refused.value.reason_code == reason
    assert getattr(refused.value, "parameter", None) == parameter
    assert "Zq8" not in str(refused.value)
    assert engine.head == head
    assert _current(engine) == {"Alice likes tea."}


def test_another_namespaces_id_is_an_unknown_id_and_writes_nothing(engine: MemoryEngine) -> None:
    theirs = engine.remember(OTHER, "Bob likes tea.")
    head = engine.head
    with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
        engine.apply_batch(NS, ["Alice likes tea.", Forget(target=theirs.memory_id)])
    assert refused.value.reason_code == "unknown_memory"
    with pytest.raises(memory_ledger.MemoryLedgerError) as unknown:
        engine.apply_batch(NS, ["Alice likes tea.", Forget(target=UUID(int=7))])
    assert unknown.value.reason_code == refused.value.reason_code
    assert str(unknown.value).replace(str(UUID(int=7)), "ID") == str(refused.value).replace(
        str(theirs.memory_id), "ID"
    )
    assert engine.head == head
    assert _current(engine, OTHER) == {"Bob likes tea."}
    assert getattr(unknown.value, "parameter", None) == "ops[1]"
    assert getattr(refused.value, "parameter", None) == "ops[1]"


def test_a_superseded_target_is_refused_naming_the_current_value(engine: MemoryEngine) -> None:
    old = engine.remember(NS, "Alice lives in Faro.", subject="Alice", predicate="lives in")
    new = engine.remember(NS, "Alice lives in Porto.", subject="Alice", predicate="lives in")
    with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
        engine.apply_batch(NS, [Forget(target=old.memory_id)])
    assert refused.value.reason_code == "target_superseded"
    assert getattr(refused.value, "current", None) == new.memory_id
    with pytest.raises(memory_ledger.MemoryLedgerError) as again:
        engine.apply_batch(NS, [Remember(statement="ok then"), Forget(target=old.memory_id)])
    assert getattr(again.value, "parameter", None) == "ops[1]"


def test_occurred_at_orders_a_batch_by_valid_time(engine: MemoryEngine) -> None:
    early = datetime(2023, 5, 1, tzinfo=UTC)
    late = datetime(2023, 6, 1, tzinfo=UTC)
    engine.apply_batch(
        NS,
        [
            Remember(
                statement="Alice lives in Porto.",
                subject="Alice",
                predicate="lives in",
                occurred_at=late,
            ),
            Remember(
                statement="Alice lives in Faro.",
                subject="Alice",
                predicate="lives in",
                occurred_at=early,
            ),
        ],
    )
    assert _current(engine) == {"Alice lives in Porto."}  # the older evidence arrived later
    with pytest.raises(memory_ledger.MemoryLedgerError):
        engine.apply_batch(NS, [Remember(statement="naive", occurred_at=datetime(2023, 1, 1))])


def test_the_async_twins_write_one_command(tmp_path: Path) -> None:
    async def scenario() -> set[str]:
        async with AsyncMemoryEngine.open(tmp_path / "store") as mem:
            await mem.remember_many(NS, ["Alice likes tea.", "Alice likes jazz."])
            await mem.apply_batch(NS, [Forget(target="jazz"), "Alice likes blues."])
            return {doc.statement for doc in mem.engine.retrievable_memories(NS)}

    assert asyncio.run(scenario()) == {"Alice likes tea.", "Alice likes blues."}


# The serial model ----------------------------------------------------------------------------

_SUBJECTS = ["Alice", "Bob", "Carol"]
_VALUES = ["Lisbon", "Porto", "Faro", "Braga"]

_op = st.one_of(
    st.builds(
        lambda s, v: ("keyed", s, v),
        st.sampled_from(_SUBJECTS),
        st.sampled_from(_VALUES),
    ),
    st.builds(lambda v: ("plain", v), st.sampled_from(_VALUES)),
    st.builds(lambda n: ("forget", n), st.integers(min_value=0, max_value=9)),
    # a forget of a memory this program already forgot, or remembered, by its id
    st.builds(lambda n: ("forget_again", n), st.integers(min_value=0, max_value=9)),
    st.builds(lambda n: ("forget_remembered", n), st.integers(min_value=0, max_value=9)),
)


def _ops(program: list[tuple[Any, ...]], engine: MemoryEngine) -> list[Remember | Forget]:
    """The batch operations of ``program``; a forget names the n-th current memory (none
    when there is none), ``forget_again`` the n-th one the program forgot already and
    ``forget_remembered`` the n-th one it remembered, by id."""
    ops: list[Remember | Forget] = []
    remembered: list[UUID] = []
    forgotten: list[UUID] = []
    current = sorted(engine.retrievable_memories(NS), key=lambda d: d.memory_id)
    for step in program:
        if step[0] in ("forget_again", "forget_remembered"):
            named = forgotten if step[0] == "forget_again" else remembered
            if named:
                ops.append(Forget(target=named[step[1] % len(named)]))
            continue
        if step[0] == "keyed":
            text = f"{step[1]} lives in {step[2]}."
            ops.append(Remember(statement=text, subject=step[1], predicate="lives in"))
            remembered.append(engine.keyring.digests.memory_id(NS, normalize_statement(text)))
        elif step[0] == "plain":
            text = f"Someone once mentioned {step[1]}."
            ops.append(Remember(statement=text))
            remembered.append(engine.keyring.digests.memory_id(NS, normalize_statement(text)))
        elif current:
            ops.append(Forget(target=UUID(current[step[1] % len(current)].memory_id)))
            forgotten.append(UUID(current.pop(step[1] % len(current)).memory_id))
    return ops


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(before=[], program=[("plain", "Porto"), ("forget_remembered", 0), ("forget_again", 0)])
# an earlier op refused by reconciliation (its target superseded by the op before it) is the
# op refused, before a later op the decision refuses (a second forget of that target)
@example(
    before=[("keyed", "Carol", "Lisbon")],
    program=[("keyed", "Carol", "Porto"), ("forget", 0), ("forget_again", 0)],
)
@given(
    before=st.lists(_op, min_size=0, max_size=4),
    program=st.lists(_op, min_size=1, max_size=8),
)
def test_a_batch_leaves_what_its_operations_leave_one_by_one(
    tmp_path_factory: pytest.TempPathFactory,
    before: list[tuple[Any, ...]],
    program: list[tuple[Any, ...]],
) -> None:
    folder = tmp_path_factory.mktemp("serial")
    batched = MemoryEngine.open(folder / "batch")
    batched.keyring.namespace_id(NS)  # makes its store key: the serial store shares it
    shutil.copytree(folder / "batch" / "keys", folder / "serial" / "keys")  # the same ids
    with batched, MemoryEngine.open(folder / "serial") as serial:
        for engine in (batched, serial):
            for op in _ops(before, engine):
                try:
                    _one(engine, op)
                except memory_ledger.MemoryLedgerError:
                    pass  # a refused set-up op (a forget of a superseded id): alike in both
        assert _current(batched) == _current(serial)
        ops = _ops(program, batched)
        if not ops:
            return
        outcome: Any
        error: Any = None
        try:
            outcome = batched.apply_batch(NS, ops)
        except memory_ledger.MemoryLedgerError as refused:
            outcome, error = refused.reason_code, refused
        if isinstance(outcome, str):  # refused whole: the serial model must refuse one too
            head = batched.head
            index = _first_refused(serial, ops)
            assert batched.head == head
            assert error.parameter in (f"ops[{index}]", f"ops[{index}].target"), error
            return
        for op in ops:
            _one(serial, op)
        assert _current(batched) == _current(serial)


def _first_refused(engine: MemoryEngine, ops: list[Remember | Forget]) -> int:
    """Run ``ops`` one by one; the index of the first one refused (one must be)."""
    for index, op in enumerate(ops):
        try:
            _one(engine, op)
        except memory_ledger.MemoryLedgerError:
            return index
    raise AssertionError("the batch was refused, the same operations one by one were not")


def _one(engine: MemoryEngine, op: Remember | Forget) -> None:
    if isinstance(op, Remember):
        engine.remember(NS, op.statement, subject=op.subject, predicate=op.predicate)
    else:
        engine.forget(NS, op.target)


def test_a_document_value_is_long_and_kept_exactly(engine: MemoryEngine) -> None:
    """``Remember(document=True)``: the value is a document (the LangGraph store's item
    JSON): up to MAX_DOCUMENT_VALUE_CHARS, whitespace kept, never searched; the secret door
    reads all of it. Without the flag a value stays a short label."""
    from memory_ledger.commands.errors import CommandRejectedError
    from memory_ledger.commands.extraction.validation import MAX_DOCUMENT_VALUE_CHARS

    document = "zebra  " + "w " * ((MAX_DOCUMENT_VALUE_CHARS - 7) // 2)
    assert len(document) <= MAX_DOCUMENT_VALUE_CHARS
    engine.apply_batch(
        NS, [Remember(statement="Alice's profile.", subject="alice", value=document, document=True)]
    )
    (doc,) = engine.retrievable_memories(NS)
    assert doc.value == document
    assert list(engine.recall(NS, "zebra")) == []  # the value is not searched
    assert len(engine.recall(NS, "profile")) == 1
    refused = [
        Remember(statement="Alice's profile.", value="v" * 2001),
        Remember(
            statement="Bob's profile.", value="v" * (MAX_DOCUMENT_VALUE_CHARS + 1), document=True
        ),
        Remember(
            statement="Carol's profile.",
            value="w " * 30_000 + "AKIA" + "IOSFODNN7EXAMPLE",
            document=True,
        ),
    ]
    head = engine.head
    for op in refused:
        with pytest.raises(CommandRejectedError) as error:
            engine.apply_batch(NS, [op])
        assert str(error.value.parameter).endswith("value")
    assert engine.head == head


@pytest.mark.parametrize(
    ("op", "field"),
    [
        ("ab", "statement"),  # too short
        (Remember(statement="Alice keeps notes.", tags=("tenant:other",)), "tags"),
        (Remember(statement="Alice's login.", subject="AKIA" + "IOSFODNN7EXAMPLE"), "subject"),
    ],
)
def test_a_refused_item_check_names_its_op(tmp_path: Path, op: Any, field: str) -> None:
    """An item check refuses a batch naming ``ops[i]`` and the field, as every other
    refusal of a batch does (it named the field alone); nothing is written."""
    with MemoryEngine.open(tmp_path / "store") as engine:
        with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
            engine.apply_batch(NS, ["Alice likes tea.", op])
        assert getattr(refused.value, "parameter", None) == f"ops[1].{field}"
        assert engine.head == 0
