"""What is current in canonical memory (issue 13 items 2-5 and 7, and the bounded retries).

- valid time orders supersession: a backfilled value that occurred earlier never retires the
  current one; it is history from the moment it is stored, and ``as-of --occurred`` answers
  it for its own period; the final state does not depend on the arrival order; where either
  value lacks ``occurred_at``, ledger order decides;
- a forget is a tombstone with a position: evidence observed before it never re-activates
  the memory (declined with a reason code, also through ``activate_candidate``); evidence
  observed after it (even later in the same session) activates it anew;
- ``correct`` changes only what the correction says: the target's tags, source, scope,
  kind, provenance and importance carry over; the lexical and semantic channels follow the
  new text;
- every operation addressed by memory id checks the caller's namespace first: an id of
  another namespace behaves exactly like an id that does not exist (same error, same message
  shape, no event, no counter change);
- datetimes: a naive one is refused with a typed error naming the parameter (or, for
  ``occurred_at``, documented and read as UTC);
- a decision overtaken on every attempt gives up with ``ConcurrencyConflictError`` after a
  bounded number of attempts, having written nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.commands.errors import (
    CommandRejectedError,
    ConcurrencyConflictError,
    NaiveDatetimeError,
    NotAdmittedError,
    UnknownMemoryError,
)
from memory_ledger.commands.session import MemorySession
from memory_ledger.ledger import faults
from memory_ledger.ledger.events import (
    LedgerEvent,
    MemoryActivated,
    MemoryReinforced,
    MemorySuperseded,
    SessionSealed,
)
from memory_ledger.ledger.ids import normalize_statement
from memory_ledger.replay import EventFilter, PointError, as_of, explain
from tests.conftest import make_item
from tests.race_child import active_values
from tests.recall.test_semantic_recall import BagProvider

NS = Namespace("acme", "alice", "assistant")
OTHER = Namespace("acme", "mallory", "assistant")
Y2024 = datetime(2024, 5, 1, tzinfo=UTC)
Y2026 = datetime(2026, 5, 1, tzinfo=UTC)


def lives(city: str, **overrides: Any) -> dict[str, Any]:
    return make_item(f"Alice lives in {city}.", predicate="lives_in", value=city, **overrides)


def observed(
    engine: MemoryEngine,
    sid: str,
    *items: dict[str, Any],
    at: datetime | None = None,
    ns: Namespace = NS,
) -> MemorySession:
    extractor = RecordedExtractor()
    session = engine.session(ns, sid, extractor=extractor)
    extractor.provide(1, list(items))
    session.observe_final_transcript(1, "user: " + " ".join(i["statement"] for i in items), at)
    return session


def mid(engine: MemoryEngine, statement: str, ns: Namespace = NS) -> UUID:
    return engine.keyring.digests.memory_id(ns, normalize_statement(statement))


def status(engine: MemoryEngine, memory: UUID) -> str:
    engine.catch_up()
    rows = engine.projections.conn.execute(
        "SELECT status FROM canonical_memory WHERE memory_id = ?", [str(memory)]
    ).fetchall()
    return str(rows[0][0]) if rows else "absent"


def events_after(engine: MemoryEngine, position: int) -> list[LedgerEvent]:
    return [
        engine.mapper.to_domain_event(n)  # type: ignore[misc]
        for n in engine.recorder.select_notifications(position + 1, 10_000)
    ]


# 2. Valid time ------------------------------------------------------------------------------


def test_a_backfilled_older_value_is_history_and_never_retires_the_current_one(
    engine: MemoryEngine,
) -> None:
    observed(engine, "recent", lives("Porto"), at=Y2026).finish()
    report = observed(engine, "backfill", lives("Lisbon"), at=Y2024).finish()

    lisbon, porto = mid(engine, "Alice lives in Lisbon."), mid(engine, "Alice lives in Porto.")
    assert report.activated == (lisbon,) and report.superseded == (lisbon,)
    assert active_values(engine, NS) == [porto]
    assert [h.statement for h in engine.recall(NS, "where does Alice live", 5)] == [
        "Alice lives in Porto."
    ]
    [superseded] = [e for e in events_after(engine, 0) if isinstance(e, MemorySuperseded)]
    assert superseded.originator_id == lisbon and superseded.superseded_by == porto
    assert superseded.occurred_at == Y2026  # history from the current value's valid time
    with as_of(engine, datetime(2025, 1, 1, tzinfo=UTC), occurred=True) as then:
        assert [h.statement for h in then.recall(NS, "Alice lives", 5)] == [
            "Alice lives in Lisbon."
        ]
    with as_of(engine, datetime(2027, 1, 1, tzinfo=UTC), occurred=True) as then:
        assert [h.statement for h in then.recall(NS, "Alice lives", 5)] == ["Alice lives in Porto."]


def test_the_outcome_does_not_depend_on_the_arrival_order(tmp_path: Path) -> None:
    outcomes = []
    for order in (("old", "new"), ("new", "old")):
        with MemoryEngine.open(tmp_path / "-".join(order), sync=False) as engine:
            for which in order:
                city, at = ("Lisbon", Y2024) if which == "old" else ("Porto", Y2026)
                observed(engine, which, lives(city), at=at).finish()
            outcomes.append(
                {
                    city: status(engine, mid(engine, f"Alice lives in {city}."))
                    for city in ("Lisbon", "Porto")
                }
            )
    assert outcomes[0] == outcomes[1] == {"Lisbon": "superseded", "Porto": "active"}


def test_without_valid_time_on_either_value_ledger_order_decides(engine: MemoryEngine) -> None:
    observed(engine, "dated", lives("Porto"), at=Y2026).finish()
    observed(engine, "undated", lives("Lisbon")).finish()  # no occurred_at: ledger order
    assert active_values(engine, NS) == [mid(engine, "Alice lives in Lisbon.")]
    session = engine.session(NS, "told")
    session.apply_explicit_command("remember", "Alice lives in Faro.", 1, item=lives("Faro"))
    session.finish()  # an explicit command carries no occurred_at: the newest word wins
    assert active_values(engine, NS) == [mid(engine, "Alice lives in Faro.")]


# 3. Forgetting is a tombstone ---------------------------------------------------------------


def forget_tea(engine: MemoryEngine) -> None:
    session = engine.session(NS, f"forget-{uuid4().hex[:6]}")
    result = session.apply_explicit_command("forget", "forget that I like green tea", 1)
    assert result.target == mid(engine, "Alice likes green tea.")
    session.finish()


def test_evidence_observed_before_a_forget_never_reactivates_the_memory(
    engine: MemoryEngine,
) -> None:
    observed(engine, "first", make_item("Alice likes green tea.")).finish()
    earlier = observed(engine, "earlier", make_item("Alice likes green tea."))  # before
    forget_tea(engine)

    report = earlier.finish()

    tea = mid(engine, "Alice likes green tea.")
    assert report.activated == () and report.reinforced == ()
    assert [(d.memory_id, d.reason_code) for d in report.declined] == [
        (tea, "evidence_predates_forget")
    ]
    assert status(engine, tea) == "forgotten"
    later = observed(engine, "later", make_item("Alice likes green tea.")).finish()
    assert later.activated == (tea,)
    reactivation = [e for e in events_after(engine, 0) if isinstance(e, MemoryActivated)][-1]
    assert reactivation.originator_id == tea and reactivation.originator_version > 1
    assert status(engine, tea) == "active"


def test_in_one_session_a_mention_after_the_forget_command_counts_as_new_evidence(
    engine: MemoryEngine,
) -> None:
    observed(engine, "first", make_item("Alice likes green tea.")).finish()
    extractor = RecordedExtractor()
    session = engine.session(NS, "changed-mind", extractor=extractor)
    session.apply_explicit_command("forget", "forget that I like green tea", 1)
    extractor.provide(2, [make_item("Alice likes green tea.")])
    session.observe_final_transcript(2, "user: actually, I do like green tea")
    report = session.finish()
    assert report.forgotten == (mid(engine, "Alice likes green tea."),)
    assert report.activated == (mid(engine, "Alice likes green tea."),) and report.declined == ()
    assert status(engine, mid(engine, "Alice likes green tea.")) == "active"


def test_manual_activation_of_evidence_older_than_the_forget_is_declined(
    engine: MemoryEngine,
) -> None:
    observed(engine, "first", make_item("Alice likes green tea.")).finish()
    extractor = RecordedExtractor()
    manual = engine.session(NS, "manual", extractor=extractor, activation_policy="manual")
    extractor.provide(1, [make_item("Alice likes green tea.")])
    manual.observe_final_transcript(1, "user: I like green tea")
    [candidate] = manual.state.candidates
    forget_tea(engine)
    with pytest.raises(CommandRejectedError) as refused:
        manual.activate_candidate(candidate.candidate_id, "manual", ["user confirmed"])
    assert refused.value.reason_code == "evidence_predates_forget"
    assert status(engine, mid(engine, "Alice likes green tea.")) == "forgotten"


# 4. correct carries the target over ---------------------------------------------------------


def test_correct_keeps_the_targets_metadata_and_changes_only_what_it_says(
    engine: MemoryEngine,
) -> None:
    original = lives(
        "Lisbon",
        kind="procedural",
        source="decision",
        scope="workspace",
        tags=["home", "family"],
        evidence=["D1:3"],
        importance=0.82,
    )
    observed(engine, "s1", original).finish()
    observed(engine, "s2", {**original, "tags": ["travel"], "importance": 0.9}).finish()
    lisbon = mid(engine, "Alice lives in Lisbon.")
    session = engine.session(NS, "fix")
    session.apply_explicit_command("correct", "Alice lives in Porto.", 1, target=lisbon)
    report = session.finish()

    porto = mid(engine, "Alice lives in Porto.")
    assert report.activated == (porto,) and report.superseded == (lisbon,)
    activated = [e for e in events_after(engine, 0) if isinstance(e, MemoryActivated)][-1]
    item = activated.item
    assert (item.subject, item.predicate, item.value) == ("Alice", "lives_in", None)
    assert (item.kind, item.source, item.scope) == ("procedural", "decision", "workspace")
    assert item.tags == ("home", "family", "travel")  # merged by the reinforcement
    assert item.evidence == ("D1:3",) and item.importance == 0.9
    assert item.reason == original["reason"] and item.confidence == 1.0
    assert [h.statement for h in engine.recall(NS, "Porto", 5)] == ["Alice lives in Porto."]
    assert engine.recall(NS, "Lisbon", 5).results == ()
    # What the correction does say wins over what would carry over.
    fix2 = engine.session(NS, "fix2")
    fix2.apply_explicit_command(
        "correct", "Alice lives in Faro.", 1, target=porto, item={"tags": ["moved"]}
    )
    fix2.finish()
    last = [e for e in events_after(engine, 0) if isinstance(e, MemoryActivated)][-1]
    assert last.item.tags == ("moved",) and last.item.source == "decision"


def test_the_semantic_channel_follows_the_corrected_text(tmp_path: Path) -> None:
    with MemoryEngine.open(
        tmp_path / "store", embeddings=BagProvider(), index_in_background=False
    ) as engine:
        observed(engine, "s1", make_item("Alice's cat is called Tom.")).finish()
        cat = mid(engine, "Alice's cat is called Tom.")
        engine.index_vectors()
        session = engine.session(NS, "fix")
        session.apply_explicit_command("correct", "Alice's dog is called Rex.", 1, target=cat)
        session.finish()
        engine.index_vectors()
        hits = engine.recall(NS, "canine", 5)  # no shared word: the semantic channel
        assert [h.memory_id for h in hits] == [str(mid(engine, "Alice's dog is called Rex."))]


# 5. Memory ids of another namespace ---------------------------------------------------------


def test_an_id_of_another_namespace_behaves_exactly_like_an_unknown_id(
    engine: MemoryEngine,
) -> None:
    observed(engine, "mine", make_item("Alice likes green tea.")).finish()
    theirs = observed(engine, "theirs", make_item("Mallory keeps a ledger."), ns=OTHER)
    theirs.finish()
    foreign, unknown = mid(engine, "Mallory keeps a ledger.", OTHER), uuid4()
    session = engine.session(NS, "probe")

    def counters() -> tuple[Any, ...]:
        engine.catch_up()
        return tuple(
            engine.projections.conn.execute(
                "SELECT revision, status, recall_count, admission_count, use_count, pinned "
                "FROM canonical_memory WHERE memory_id = ?",
                [str(foreign)],
            ).fetchall()[0]
        )

    operations: dict[str, Callable[[UUID], object]] = {
        "admit": lambda m: session.admit(1, [(m, 1)]),
        "record_use": lambda m: session.record_use(1, m),
        "forget by id": lambda m: session.apply_explicit_command("forget", "drop it", 1, target=m),
        "pin by id": lambda m: session.apply_explicit_command("pin", "keep it", 1, target=m),
        "correct by id": lambda m: session.apply_explicit_command(
            "correct", "It is X.", 1, target=m
        ),
        "engine.forget": lambda m: engine.forget(NS, m),
        "engine.correct": lambda m: engine.correct(NS, "It is X.", target=m),
        "explain": lambda m: explain(engine, str(m), namespace=NS),
    }
    before, head = counters(), engine.head
    for name, operation in operations.items():
        errors = []
        for memory in (foreign, unknown):
            with pytest.raises(Exception) as caught:  # noqa: PT011 - compared below
                operation(memory)
            errors.append((type(caught.value), str(caught.value).replace(str(memory), "<id>")))
        assert errors[0] == errors[1], name
        assert issubclass(errors[0][0], UnknownMemoryError), name
        assert engine.head == head, f"{name} wrote an event"
    assert counters() == before
    with pytest.raises(NotAdmittedError):  # an own memory: the namespace check passes
        session.record_use(1, mid(engine, "Alice likes green tea."))


# 7. Datetimes -------------------------------------------------------------------------------


def test_naive_datetimes_are_refused_with_a_typed_error_naming_the_parameter(
    engine: MemoryEngine,
) -> None:
    session = observed(engine, "s1", make_item("Alice likes green tea."))
    naive = datetime(2024, 1, 1)  # noqa: DTZ001 - the point of the test
    with pytest.raises(NaiveDatetimeError, match="older_than") as caught:
        session.prune(older_than=naive)
    assert caught.value.parameter == "older_than"
    with pytest.raises(NaiveDatetimeError, match="since"):
        EventFilter(since=naive)
    with pytest.raises(NaiveDatetimeError, match="until"):
        EventFilter(until=naive)
    with pytest.raises(PointError, match="^at ") as point:
        as_of(engine, naive)
    assert isinstance(point.value, NaiveDatetimeError)
    assert point.value.parameter == "at"
    with pytest.raises(NaiveDatetimeError, match="occurred_at"):
        session.observe_final_transcript(2, "user: later", naive)
    assert 2 not in session.state.observed  # refused before anything was written
    assert session.prune(older_than=datetime(2000, 1, 1, tzinfo=UTC)) == []


# Bounded retries ----------------------------------------------------------------------------


def test_a_decision_overtaken_every_time_gives_up_with_a_typed_error(
    engine: MemoryEngine,
) -> None:
    observed(engine, "seed", lives("Lisbon")).finish()
    lisbon = mid(engine, "Alice lives in Lisbon.")
    racer = observed(engine, "racer", lives("Porto"))
    attempts = []

    def overtake() -> None:
        # Another writer changes the current value every time the decision has read it.
        attempts.append(1)
        state = engine.load_stream(lisbon)
        engine.append(
            [
                MemoryReinforced(
                    originator_id=lisbon,
                    originator_version=state[-1].originator_version + 1,
                    recorded_at=datetime.now(UTC),
                    namespace=NS,
                    session_id="other",
                    turn_id=1,
                    candidate_id=uuid4(),
                    importance=0.8,
                    tags=(),
                    evidence=(),
                )
            ]
        )

    faults.FAULTS["decision.planned"] = overtake
    engine.decision_deadline = 0.3  # seconds of jittered back-off, not a count of attempts
    head = engine.head
    try:
        with pytest.raises(ConcurrencyConflictError, match="nothing was written") as raised:
            racer.finish()
    finally:
        faults.FAULTS.clear()
        engine.decision_deadline = 10.0
    assert len(attempts) >= 2  # re-read and re-decided after each conflict
    assert f"overtook it {len(attempts)} times" in str(raised.value)
    assert "stream version" in str(raised.value)  # names what raced
    written = events_after(engine, head)
    assert len(written) == len(attempts)
    assert all(isinstance(e, MemoryReinforced) for e in written)  # only the other writer's
    assert not any(isinstance(e, SessionSealed) for e in written)
    assert racer.finish().activated == (
        mid(engine, "Alice lives in Porto."),
    )  # later, it goes through


def test_the_condition_carries_what_stream_versions_cannot_guard(engine: MemoryEngine) -> None:
    """A finish's condition names the keys it read and the memories it read without writing
    them; memories it writes at the next version are guarded by their stream versions."""
    from memory_ledger.commands.canonical import DecisionReads, Reconciler
    from memory_ledger.commands.canonical.reconcile import plan_finish
    from memory_ledger.ledger.tags import memory_tag

    observed(engine, "seed", lives("Lisbon")).finish()
    session = observed(engine, "next", lives("Porto"), make_item("Alice likes green tea."))
    reads = DecisionReads(engine, NS)
    reconciler = Reconciler(
        namespace=NS,
        session_id=session.session_id,
        load_memory=reads.memory,
        same_key=reads.activated_under,
        recorded_at=datetime.now(UTC),
        evidence_position=session.state.evidence_position,
        digests=reads.digests,
    )
    plan = plan_finish(
        reconciler,
        session_stream=session.stream_id,
        session_version=session.state.version,
        items=list(session.state.candidates),
        policy="auto",
    )
    condition = reads.condition(plan.events)
    assert condition is not None and condition.after == reads.after
    tags = {tag for item in condition.fail_if_events_match.items for tag in item.tags}
    assert tags == {engine.keyring.digests.key_tag(NS, ("alice", "lives_in"))}
    written = {e.originator_id for e in plan.events}
    assert {mid(engine, "Alice lives in Lisbon."), mid(engine, "Alice lives in Porto.")} <= written
    assert memory_tag(mid(engine, "Alice lives in Lisbon.")) in reads.tags  # read, and guarded
