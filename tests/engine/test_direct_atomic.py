"""A direct command is ONE append: one transaction, one sync (issue 25 items 4 and 5).

Before, ``remember`` opened a session (one transaction), applied its command (a second)
and reconciled it (a third): a SIGKILL between them left ``direct-...`` sessions holding only
``SessionOpened`` (or that and the unacknowledged command) that nothing reconciled, and a
backup taken meanwhile could hold half of one. Now SessionOpened, ExplicitCommandApplied,
SessionSealed, the memory events and SessionReconciled are planned together and appended
under one append condition (``commands.engine.direct``,
``commands.canonical.boundary.append_decision``).
"""

from __future__ import annotations

from typing import Any

import pytest

import memory_ledger
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.ledger.events import (
    DirectCommandApplied,
    ExplicitCommandApplied,
    SessionOpened,
    SessionReconciled,
    SessionSealed,
)
from tests.engine.append_spy import appended

NS = Namespace("acme", "alice", "assistant")


def test_every_direct_command_is_one_append(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    batches = appended(engine, monkeypatch)
    kept = engine.remember(NS, "Alice lives in Lisbon.", subject="Alice", predicate="lives in")
    fixed = engine.correct(NS, "Alice lives in Porto.", target=kept.memory_id)
    engine.pin(NS, str(fixed.memory_id))
    engine.forget(NS, "Porto")
    assert len(batches) == 4
    for batch in batches:
        kinds = [type(e) for e in batch]
        # one record for the command (its short session), then its memory events
        assert kinds[0] is DirectCommandApplied
        assert not ({SessionOpened, ExplicitCommandApplied, SessionSealed} & set(kinds[1:]))
        assert SessionReconciled not in kinds
        assert batch[0].report is not None and batch[0].originator_version == 1
        assert len({e.session_id for e in batch}) == 1  # one command, one session


def test_a_refused_direct_command_writes_nothing(engine: MemoryEngine) -> None:
    kept = engine.remember(NS, "Alice lives in Lisbon.")
    engine.forget(NS, str(kept.memory_id))
    head = engine.head
    with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
        engine.correct(NS, "Alice lives in Porto.", target=kept.memory_id)  # forgotten now
    assert refused.value.reason_code == "unknown_memory"
    with pytest.raises(memory_ledger.MemoryLedgerError):
        engine.remember(NS, "Alice's login.", predicate="password", value="Zq8!vR2#mK9pL4xW")
    assert engine.head == head


def test_a_superseded_target_is_refused_naming_the_current_value(engine: MemoryEngine) -> None:
    """The documented choice (README, docs/design.md): a forget, pin or correct naming a
    superseded memory is refused with SupersededTargetError naming the current value; it
    never moves to another memory (forgetting "Lisbon" must not forget "Porto")."""
    from memory_ledger.commands.errors import SupersededTargetError

    first = engine.remember(NS, "Alice lives in Lisbon.", subject="Alice", predicate="lives in")
    second = engine.correct(NS, "Alice lives in Porto.", target=first.memory_id)
    head = engine.head
    for command in (
        lambda: engine.correct(NS, "Alice lives in Braga.", target=first.memory_id),
        lambda: engine.pin(NS, str(first.memory_id)),
        lambda: engine.forget(NS, str(first.memory_id)),
    ):
        with pytest.raises(SupersededTargetError) as refused:
            command()
        assert refused.value.reason_code == "target_superseded"
        assert refused.value.current == second.memory_id
        assert str(second.memory_id) in str(refused.value)
    assert engine.head == head  # nothing written
    hits = engine.recall(NS, "where does Alice live", k=5)
    assert [hit.statement for hit in hits] == ["Alice lives in Porto."]


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"subject": "S" * 100_000}, "field_too_long"),
        ({"predicate": "p" * 257}, "field_too_long"),
        ({"value": "v" * 2001}, "field_too_long"),
        ({"tags": ["t" * 257]}, "field_too_long"),
        ({"tags": [f"t{i}" for i in range(65)]}, "too_many_tags"),
    ],
)
def test_keys_and_labels_are_bounded(
    engine: MemoryEngine, fields: dict[str, Any], reason: str
) -> None:
    head = engine.head
    with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
        engine.remember(NS, "Alice lives in Lisbon.", **fields)
    assert refused.value.reason_code == reason
    assert engine.head == head


def test_a_session_command_naming_a_superseded_id_is_refused_and_finish_declines_a_late_one(
    engine: MemoryEngine,
) -> None:
    from memory_ledger.commands.errors import SupersededTargetError

    first = engine.remember(NS, "Alice lives in Lisbon.", subject="Alice", predicate="lives in")
    with engine.session(NS, "chat-1") as session:
        session.apply_explicit_command("forget", "Lisbon", 1, target=first.memory_id)
        second = engine.correct(NS, "Alice lives in Porto.", target=first.memory_id)  # meanwhile
        with pytest.raises(SupersededTargetError):
            session.apply_explicit_command("pin", "Lisbon", 2, target=first.memory_id)
        report = session.finish()
    assert report.forgotten == ()
    assert [d.reason_code for d in report.declined] == ["target_superseded"]
    hits = engine.recall(NS, "where does Alice live", k=5)
    assert [hit.memory_id for hit in hits] == [str(second.memory_id)]


def test_a_refused_target_names_the_argument_that_named_it(engine: MemoryEngine) -> None:
    """A single forget, pin or correct refused for its target names the caller's argument in
    ``parameter`` (as a batch names ``ops[i]``), for an unknown id, words naming nothing and
    a superseded id alike; ``turn`` is the one command's."""
    from uuid import uuid4

    from memory_ledger.commands.errors import SupersededTargetError, UnknownMemoryError

    first = engine.remember(NS, "Alice lives in Lisbon.", subject="Alice", predicate="lives in")
    engine.correct(NS, "Alice lives in Porto.", target=first.memory_id)
    unknown = str(uuid4())
    cases: list[tuple[Any, type[Exception], str]] = [
        (lambda: engine.forget(NS, unknown), UnknownMemoryError, "statement_or_id"),
        (lambda: engine.pin(NS, unknown), UnknownMemoryError, "statement_or_id"),
        (lambda: engine.forget(NS, "zebras on mars"), UnknownMemoryError, "statement_or_id"),
        (lambda: engine.correct(NS, "Bob is 40.", target=unknown), UnknownMemoryError, "target"),
        (lambda: engine.forget(NS, str(first.memory_id)), SupersededTargetError, "statement_or_id"),
        (
            lambda: engine.correct(NS, "Alice lives in Braga.", target=first.memory_id),
            SupersededTargetError,
            "target",
        ),
    ]
    head = engine.head
    for command, error, parameter in cases:
        with pytest.raises(error) as refused:
            command()
        assert isinstance(refused.value, UnknownMemoryError | SupersededTargetError)
        assert refused.value.parameter == parameter, (error, parameter)
        assert refused.value.turn == 1
    assert engine.head == head  # nothing written
