"""A forget is never undone by older evidence: valid time orders the tombstone too.

Evidence recorded AFTER a forget whose ``occurred_at`` is earlier than the forget's time
(the forget command's ``occurred_at``, else its recorded time) is declined with
``evidence_older_than_forget``, recorded in the ledger like the position rule's declines;
evidence that occurred after the forget (a genuinely new statement) activates the memory
anew; an explicit ``remember`` after a forget is the user's new word and still activates it;
projections rebuilt from the ledger give the same answer (see also
``tests/canonical/test_canonical_machine.py``, which checks the rule over random interleavings).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar
from uuid import UUID, uuid4

import msgspec
import pytest
from eventsourcing.persistence import JSONTranscoder
from eventsourcing.utils import get_topic

import memory_ledger
from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.commands.canonical.memory_state import fold_memory_stream
from memory_ledger.commands.errors import CommandRejectedError
from memory_ledger.commands.session import MemorySession
from memory_ledger.ledger.events import (
    ExplicitCommandApplied,
    ExtractedItem,
    LedgerEvent,
    MemoryActivated,
    MemoryForgotten,
    SessionReconciled,
)
from memory_ledger.ledger.ids import normalize_statement
from memory_ledger.ledger.mapper import MsgspecMapper
from memory_ledger.projections import table_digests
from tests.conftest import make_item
from tests.projections.test_projections import fresh_digests

NS = Namespace("acme", "alice", "assistant")
ESPRESSO = "Alice likes espresso."
Y2020 = datetime(2020, 1, 1, tzinfo=UTC)
Y2023 = datetime(2023, 6, 1, tzinfo=UTC)
Y2024 = datetime(2024, 6, 1, tzinfo=UTC)
Y2025 = datetime(2025, 6, 1, tzinfo=UTC)


def espresso(engine: MemoryEngine) -> Any:
    return engine.keyring.digests.memory_id(NS, normalize_statement(ESPRESSO))


def observe(engine: MemoryEngine, at: datetime | None, statement: str = ESPRESSO) -> MemorySession:
    """A new session whose turn 1 (occurred ``at``) states ``statement``."""
    extractor = RecordedExtractor()
    session = engine.session(NS, f"s-{uuid4().hex[:8]}", extractor=extractor)
    extractor.provide(1, [make_item(statement)])
    session.observe_final_transcript(1, f"user: {statement}", at)
    return session


def recalled(engine: MemoryEngine) -> list[str]:
    return [hit.statement for hit in engine.recall(NS, "espresso", k=5)]


def events(engine: MemoryEngine) -> list[LedgerEvent]:
    notifications = engine.recorder.select_notifications(1, engine.head + 1)
    return [engine.mapper.to_domain_event(n) for n in notifications]  # type: ignore[misc]


def forgotten_events(engine: MemoryEngine) -> list[MemoryForgotten]:
    return [e for e in events(engine) if isinstance(e, MemoryForgotten)]


def assert_rebuild_agrees(engine: MemoryEngine) -> None:
    engine.catch_up()
    assert table_digests(engine.projections.conn) == fresh_digests(engine)


def test_evidence_recorded_after_a_forget_but_older_than_it_is_declined(tmp_path: Path) -> None:
    """The tester's repro: a 2020 turn recorded after today's forget brought it back."""
    with memory_ledger.open(tmp_path / "store") as mem:
        remembered = mem.remember(NS, ESPRESSO)
        mem.forget(NS, "espresso")
        report = observe(mem, Y2020).finish()

        assert report.activated == () and report.reinforced == ()
        assert [(d.memory_id, d.reason_code) for d in report.declined] == [
            (remembered.memory_id, "evidence_older_than_forget")
        ]
        assert recalled(mem) == []
        # Recorded in the ledger like the position rule's declines.
        [reconciled] = [
            e
            for e in events(mem)
            if isinstance(e, SessionReconciled) and e.session_id == report.session_id
        ]
        assert reconciled.report.declined == report.declined
        # The forget's time is the forget command's recorded time (a direct forget has no
        # occurred_at), and the tombstone carries it.
        [command] = [
            e for e in events(mem) if isinstance(e, ExplicitCommandApplied) and e.intent == "forget"
        ]
        [tombstone] = forgotten_events(mem)
        assert command.occurred_at is None
        assert tombstone.occurred_at == command.recorded_at == tombstone.forget_time
        assert_rebuild_agrees(mem)


def test_evidence_that_occurred_after_the_forget_still_reactivates(engine: MemoryEngine) -> None:
    engine.remember(NS, ESPRESSO)
    forget = engine.session(NS, "forget-2024")
    forget.apply_explicit_command("forget", "forget espresso", 1, occurred_at=Y2024)
    assert forget.finish().forgotten == (espresso(engine),)
    [tombstone] = forgotten_events(engine)
    assert tombstone.occurred_at == Y2024

    older = observe(engine, Y2023).finish()
    assert [d.reason_code for d in older.declined] == ["evidence_older_than_forget"]
    assert recalled(engine) == []

    newer = observe(engine, Y2025).finish()
    assert newer.activated == (espresso(engine),) and newer.declined == ()
    assert recalled(engine) == [ESPRESSO]
    # Once active again, the older evidence still neither re-activates nor reinforces it.
    again = observe(engine, Y2023).finish()
    assert again.reinforced == () and [d.reason_code for d in again.declined] == [
        "evidence_older_than_forget"
    ]
    assert_rebuild_agrees(engine)


def test_undated_evidence_recorded_after_a_forget_is_ordered_by_position(
    engine: MemoryEngine,
) -> None:
    engine.remember(NS, ESPRESSO)
    engine.forget(NS, ESPRESSO)
    report = observe(engine, None).finish()
    assert report.activated == (espresso(engine),) and report.declined == ()


def test_a_direct_forget_is_undone_only_by_evidence_newer_than_its_recorded_time(
    engine: MemoryEngine,
) -> None:
    engine.remember(NS, ESPRESSO)
    engine.forget(NS, ESPRESSO)
    [tombstone] = forgotten_events(engine)
    just_before = observe(engine, tombstone.forget_time - timedelta(seconds=1)).finish()
    assert [d.reason_code for d in just_before.declined] == ["evidence_older_than_forget"]
    after = observe(engine, tombstone.forget_time + timedelta(days=1)).finish()
    assert after.activated == (espresso(engine),)


def test_a_forget_command_takes_its_turns_occurred_at(engine: MemoryEngine) -> None:
    engine.remember(NS, ESPRESSO)
    extractor = RecordedExtractor()
    session = engine.session(NS, "dated-conversation", extractor=extractor)
    extractor.provide(1, [])
    session.observe_final_transcript(1, "user: please forget that I like espresso", Y2024)
    session.apply_explicit_command("forget", "forget espresso", 1)
    session.finish()
    [command] = [e for e in events(engine) if isinstance(e, ExplicitCommandApplied)][-1:]
    [tombstone] = forgotten_events(engine)
    assert command.occurred_at == tombstone.occurred_at == Y2024

    assert [d.reason_code for d in observe(engine, Y2023).finish().declined] == [
        "evidence_older_than_forget"
    ]
    assert observe(engine, Y2025).finish().activated == (espresso(engine),)


def test_evidence_observed_before_the_forget_keeps_its_reason_code(engine: MemoryEngine) -> None:
    engine.remember(NS, ESPRESSO)
    before = observe(engine, Y2020)  # observed before the forget AND older than it
    engine.forget(NS, ESPRESSO)
    assert [d.reason_code for d in before.finish().declined] == ["evidence_predates_forget"]


def test_remember_after_a_forget_is_a_new_statement_whatever_its_time(
    engine: MemoryEngine,
) -> None:
    engine.remember(NS, ESPRESSO)
    engine.forget(NS, ESPRESSO)
    session = engine.session(NS, "told-again")
    session.apply_explicit_command("remember", ESPRESSO, 1, occurred_at=Y2020)
    report = session.finish()
    assert report.activated == (espresso(engine),) and report.declined == ()
    assert recalled(engine) == [ESPRESSO]
    assert engine.remember(NS, ESPRESSO).report.reinforced == (espresso(engine),)


def test_correct_into_a_forgotten_statement_is_a_new_statement(engine: MemoryEngine) -> None:
    engine.remember(NS, ESPRESSO, subject="Alice", predicate="likes", value="espresso")
    engine.forget(NS, ESPRESSO)
    engine.remember(NS, "Alice likes tea.", subject="Alice", predicate="likes", value="tea")
    tea = engine.keyring.digests.memory_id(NS, normalize_statement("Alice likes tea."))
    corrected = engine.correct(NS, ESPRESSO, target=tea)
    assert corrected.report.activated == (espresso(engine),)
    assert recalled(engine) == [ESPRESSO]


def test_manual_activation_of_evidence_older_than_the_forget_is_declined(
    engine: MemoryEngine,
) -> None:
    engine.remember(NS, ESPRESSO)
    engine.forget(NS, ESPRESSO)
    extractor = RecordedExtractor()
    manual = engine.session(NS, "manual", extractor=extractor, activation_policy="manual")
    extractor.provide(1, [make_item(ESPRESSO)])
    manual.observe_final_transcript(1, "user: I like espresso", Y2020)
    [candidate] = manual.state.candidates
    with pytest.raises(CommandRejectedError) as refused:
        manual.activate_candidate(candidate.candidate_id, "manual", ["user confirmed"])
    assert refused.value.reason_code == "evidence_older_than_forget"
    assert recalled(engine) == []


def test_forget_all_is_a_tombstone_in_time_too(engine: MemoryEngine) -> None:
    engine.remember(NS, ESPRESSO)
    engine.forget_all(NS)
    [tombstone] = forgotten_events(engine)
    assert tombstone.occurred_at == tombstone.recorded_at
    assert [d.reason_code for d in observe(engine, Y2020).finish().declined] == [
        "evidence_older_than_forget"
    ]


class MemoryForgottenV2(LedgerEvent, frozen=True, kw_only=True):
    """``MemoryForgotten`` as class version 2 stored it (no forget time)."""

    class_version: ClassVar[int] = 2
    session_id: str
    turn_id: int
    command_id: UUID
    command_position: int = 0


def test_a_version_2_tombstone_reads_its_recorded_time_as_the_forgets_time() -> None:
    at = datetime(2024, 1, 2, tzinfo=UTC)
    common: dict[str, Any] = {"originator_id": uuid4(), "recorded_at": at, "namespace": NS}
    mapper = MsgspecMapper(transcoder=JSONTranscoder())
    stored = mapper.to_stored_event(
        MemoryForgottenV2(
            **common, originator_version=2, session_id="s", turn_id=1, command_id=uuid4()
        )
    )
    assert stored.state[0] == 2
    as_today = type(stored)(
        originator_id=stored.originator_id,
        originator_version=stored.originator_version,
        topic=get_topic(MemoryForgotten),
        state=stored.state,
    )
    upcast = mapper.to_domain_event(as_today)
    assert isinstance(upcast, MemoryForgotten) and upcast.occurred_at is None
    assert upcast.forget_time == at
    activated = MemoryActivated(
        **common,
        originator_version=1,
        session_id="s",
        turn_id=1,
        candidate_id=uuid4(),
        decision="auto",
        item=msgspec.convert(make_item(ESPRESSO, supersedes=[]), ExtractedItem),
        normalized=normalize_statement(ESPRESSO),
        occurred_at=None,
    )
    folded = fold_memory_stream([activated, upcast])
    assert folded is not None and folded.status == "forgotten" and folded.forgotten_time == at
