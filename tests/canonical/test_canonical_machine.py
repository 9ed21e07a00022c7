"""A hypothesis state machine over canonical memory (issue 13, "done when").

Several sessions of ONE namespace interleave turns (some backfilled: an earlier
``occurred_at`` than values already current), explicit commands (remember, correct and
forget by id) and ``finish()``. After every step:

1. at most one value is active per (subject, predicate) key, in the ledger and in the
   projection;
2. no memory was ever re-activated (or reinforced) by evidence older than its forget: for
   every activation and reinforcement after a tombstone, the evidence's ledger position
   (its turn's transcript, or its command) is after the tombstone's, and a candidate's valid
   time (``occurred_at``, when it has one) is not earlier than the latest forget's time
   (forgets carry random ``occurred_at`` too, or none: then their recorded time);
3. the projections equal a rebuild from the ledger;
4. canonical memory equals :class:`RulesModel`, an independent model of the rules
   (``commands/canonical/reconcile.py``'s docstring): every fact's status, and every finish's
   declined
   candidates.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.commands.errors import SupersededTargetError, UnknownMemoryError
from memory_ledger.commands.session import MemorySession
from memory_ledger.ledger.events import (
    CandidateExtracted,
    ExplicitCommandApplied,
    LedgerEvent,
    MemoryActivated,
    MemoryForgotten,
    MemoryReinforced,
    TranscriptObserved,
)
from memory_ledger.ledger.ids import normalize_statement
from memory_ledger.projections import table_digests
from tests.conftest import make_item
from tests.projections.test_projections import fresh_digests

NS = Namespace("acme", "alice", "machine")
FACTS: list[tuple[str, str | None]] = [
    ("Alice lives in Lisbon.", "lives_in"),
    ("Alice lives in Porto.", "lives_in"),
    ("Alice lives in Faro.", "lives_in"),
    ("Alice's nickname is Al.", "nickname"),
    ("Alice's nickname is Ally.", "nickname"),
    ("Alice likes green tea.", None),
]
TIMES = [None, datetime(2024, 1, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC)]
TIMES.append(datetime(2026, 1, 1, tzinfo=UTC))
TIMES.append(datetime(2100, 1, 1, tzinfo=UTC))  # after any recorded time: undoes a forget
SESSIONS = 2


def item(statement: str, predicate: str | None) -> dict[str, Any]:
    return make_item(statement, subject="Alice", predicate=predicate)


def mid(engine: MemoryEngine, statement: str) -> UUID:
    return engine.keyring.digests.memory_id(NS, normalize_statement(statement))


# The model ----------------------------------------------------------------------------------


@dataclass
class Fact:
    """The model's view of one memory."""

    status: str = "absent"
    key: str | None = None
    occurred: datetime | None = None
    forgotten_at: int | None = None
    forgotten_time: datetime | None = None

    def tombstone(self, position: int, at: datetime) -> None:
        """Forgotten by a forget at ``position`` and time ``at`` (the latest time holds)."""
        self.status, self.forgotten_at = "forgotten", position
        self.forgotten_time = at if self.forgotten_time is None else max(self.forgotten_time, at)


@dataclass
class Entry:
    """A candidate or command of a session, with the position of its evidence and its
    valid time (a forget: the forget's time, its ``occurred_at`` else its recorded time)."""

    kind: str  # candidate, remember, correct, forget
    statement: str
    predicate: str | None
    evidence: int
    occurred: datetime | None = None
    target: str | None = None


@dataclass
class RulesModel:
    """Canonical memory as the rules say it should be, fact by fact."""

    facts: dict[str, Fact] = field(default_factory=lambda: {s: Fact() for s, _ in FACTS})

    def _activate(self, statement: str, key: str | None, occurred: datetime | None) -> None:
        fact = self.facts[statement]
        fact.status, fact.key, fact.occurred = "active", key, occurred
        if key is None:
            return
        holders = [
            s
            for s, f in self.facts.items()
            if s != statement and f.key == key and f.status == "active"
        ]
        newer = []
        for other in holders:
            theirs = self.facts[other].occurred
            if occurred is not None and theirs is not None and occurred < theirs:
                newer.append(other)
            else:
                self.facts[other].status = "superseded"
        if newer:
            fact.status = "superseded"

    def finish(self, entries: list[Entry]) -> list[tuple[str, str]]:
        """Apply a session's entries in ledger order; return the declined statements with
        their reason codes."""
        declined = []
        for entry in entries:
            if entry.kind in ("forget", "correct") and entry.target is not None:
                if self.facts[entry.target].status == "superseded":
                    # superseded since the command named it: declined, never moved to the
                    # value that superseded it
                    declined.append((entry.target, "target_superseded"))
                    continue
            if entry.kind == "forget":
                assert entry.target is not None and entry.occurred is not None
                target = self.facts[entry.target]
                if target.status == "active":
                    target.tombstone(entry.evidence, entry.occurred)
                continue
            fact = self.facts[entry.statement]
            if fact.forgotten_at is not None and fact.forgotten_at > entry.evidence:
                declined.append((entry.statement, "evidence_predates_forget"))
                continue
            if (
                entry.kind == "candidate"  # remember and correct: the user's new word
                and entry.occurred is not None
                and fact.forgotten_time is not None
                and entry.occurred < fact.forgotten_time
            ):
                declined.append((entry.statement, "evidence_older_than_forget"))
                continue
            if fact.status == "active":
                continue  # reinforced: nothing that the model tracks changes
            if entry.kind == "correct":
                assert entry.target is not None
                corrected = self.facts[entry.target]
                key = corrected.key
                self._activate(entry.statement, key, None)
                if corrected.status == "active" and entry.target != entry.statement:
                    corrected.status = "superseded"
                continue
            self._activate(entry.statement, entry.predicate, entry.occurred)
        return declined


# The machine --------------------------------------------------------------------------------


class CanonicalMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.mkdtemp(prefix="canonical_")
        self.engine = MemoryEngine.open(self.folder, sync=False)
        self.model = RulesModel()
        self.sessions: dict[int, tuple[MemorySession, RecordedExtractor]] = {}
        self.entries: dict[int, list[Entry]] = {}
        self.turns: dict[int, int] = {}
        self.finished: set[int] = set()
        self.generation = 0

    def teardown(self) -> None:
        self.engine.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _session(self, sid: int) -> tuple[MemorySession, RecordedExtractor]:
        if sid not in self.sessions:
            extractor = RecordedExtractor()
            name = f"s{sid}-{self.generation}"
            self.sessions[sid] = (self.engine.session(NS, name, extractor=extractor), extractor)
            self.entries[sid] = []
        return self.sessions[sid]

    def _next_turn(self, sid: int) -> int:
        self.turns[sid] = self.turns.get(sid, 0) + 1
        return self.turns[sid]

    @initialize()
    def seed(self) -> None:
        """Start from current values (as of 2026) so that forgets and backfills bite."""
        for fact in (FACTS[0], FACTS[3], FACTS[5]):
            self.observe(0, fact, TIMES[3])
        self.finish(0)
        self.new_session(0)

    @rule(sid=st.integers(0, SESSIONS - 1), fact=st.sampled_from(FACTS[:5]))
    def backfill(self, sid: int, fact: tuple[str, str | None]) -> None:
        """A late import: a turn that occurred in 2024, reconciled at once."""
        if sid in self.finished:
            return
        self.observe(sid, fact, TIMES[1])
        self.finish(sid)

    @rule(sid=st.integers(0, SESSIONS - 1), fact=st.sampled_from(FACTS), at=st.sampled_from(TIMES))
    def observe(self, sid: int, fact: tuple[str, str | None], at: datetime | None) -> None:
        if sid in self.finished:
            return
        session, extractor = self._session(sid)
        turn = self._next_turn(sid)
        extractor.provide(turn, [item(*fact)])
        outcome = session.observe_final_transcript(turn, f"user: {fact[0]}", at)
        assert outcome.candidates == 1
        self.entries[sid].append(
            Entry("candidate", fact[0], fact[1], outcome.evidence_position, occurred=at)
        )

    @rule(sid=st.integers(0, SESSIONS - 1), fact=st.sampled_from(FACTS))
    def remember(self, sid: int, fact: tuple[str, str | None]) -> None:
        if sid in self.finished:
            return
        session, _ = self._session(sid)
        result = session.apply_explicit_command(
            "remember", fact[0], self._next_turn(sid), item=item(*fact)
        )
        self.entries[sid].append(Entry("remember", fact[0], fact[1], result.position))

    def _active_facts(self) -> list[tuple[str, str | None]]:
        return [f for f in FACTS if self.model.facts[f[0]].status == "active"]

    @precondition(lambda self: bool(self._active_facts()))
    @rule(sid=st.integers(0, SESSIONS - 1), data=st.data())
    def correct(self, sid: int, data: st.DataObject) -> None:
        """Correct an active keyed fact by another value of its key."""
        if sid in self.finished:
            return
        keyed = [f for f in self._active_facts() if f[1] is not None]
        if not keyed:
            return
        old = data.draw(st.sampled_from(keyed), label="old")
        others = [f for f in FACTS if f[1] == old[1] and f != old]
        replacement = data.draw(st.sampled_from(others), label="replacement")
        session, _ = self._session(sid)
        result = session.apply_explicit_command(
            "correct", replacement[0], self._next_turn(sid), target=mid(self.engine, old[0])
        )
        self.entries[sid].append(
            Entry("correct", replacement[0], old[1], result.position, target=old[0])
        )

    def _command_time(self, position: int) -> datetime:
        """The time of the forget command at ``position``: its occurred_at, else when it
        was recorded (read back from the ledger)."""
        [notification] = self.engine.recorder.select_notifications(position, 1)
        command = self.engine.mapper.to_domain_event(notification)
        assert isinstance(command, ExplicitCommandApplied) and command.intent == "forget"
        return command.occurred_at or command.recorded_at

    @precondition(lambda self: bool(self._active_facts()))
    @rule(sid=st.integers(0, SESSIONS - 1), data=st.data(), at=st.sampled_from(TIMES))
    def forget(self, sid: int, data: st.DataObject, at: datetime | None) -> None:
        """Forget an active fact by its id, said at ``at`` (None: its recorded time)."""
        if sid in self.finished:
            return
        old = data.draw(st.sampled_from(self._active_facts()), label="forget")
        session, _ = self._session(sid)
        result = session.apply_explicit_command(
            "forget",
            f"forget {old[0]}",
            self._next_turn(sid),
            target=mid(self.engine, old[0]),
            occurred_at=at,
        )
        when = self._command_time(result.position)
        assert at is None or when == at
        self.entries[sid].append(
            Entry("forget", old[0], old[1], result.position, occurred=when, target=old[0])
        )

    @precondition(lambda self: bool(self._active_facts()))
    @rule(data=st.data())
    def forget_directly(self, data: st.DataObject) -> None:
        """The host forgets an active fact at once (``engine.forget``), while open sessions
        may hold evidence of it observed before."""
        old = data.draw(st.sampled_from(self._active_facts()), label="forget directly")
        result = self.engine.forget(NS, mid(self.engine, old[0]))
        stream = self.engine.keyring.digests.session_stream_id(NS, result.session_id)
        [command] = [
            position
            for position, event in self.engine.load_positioned(stream)
            if isinstance(event, ExplicitCommandApplied)
        ]
        when = self._command_time(command)
        self.model.finish([Entry("forget", old[0], old[1], command, occurred=when, target=old[0])])

    @rule()
    def forget_everything(self) -> None:
        """``forget_all``: each forget's own position and recorded time are its tombstone's."""
        head = self.engine.head
        count = self.engine.forget_all(NS)
        forgotten = {
            event.originator_id: (position, event.recorded_at)
            for position, event in self._events()
            if position > head and isinstance(event, MemoryForgotten)
        }
        assert count == len(forgotten) == len(self._active_facts())
        for statement, fact in self.model.facts.items():
            if fact.status == "active":
                fact.tombstone(*forgotten[mid(self.engine, statement)])

    @rule(fact=st.sampled_from(FACTS))
    def id_of_an_inactive_fact_is_unknown(self, fact: tuple[str, str | None]) -> None:
        if self.model.facts[fact[0]].status == "active":
            return
        session, _ = self._session(0)
        if 0 in self.finished:
            return
        # The policy of every surface (docs/design.md): a superseded memory is refused with
        # SupersededTargetError naming the current value; a forgotten or unknown one is
        # unknown.
        superseded = self.model.facts[fact[0]].status == "superseded"
        try:
            session.apply_explicit_command(
                "forget", "forget it", 99, target=mid(self.engine, fact[0])
            )
        except SupersededTargetError:
            assert superseded, f"{fact[0]!r} is not superseded"
            return
        except UnknownMemoryError:
            assert not superseded, f"the superseded {fact[0]!r} read as unknown"
            return
        raise AssertionError(f"forget of the inactive {fact[0]!r} was accepted")

    @rule(sid=st.integers(0, SESSIONS - 1))
    def finish(self, sid: int) -> None:
        session, _ = self._session(sid)
        report = session.finish()
        if sid in self.finished:
            assert report.already_reconciled
            return
        self.finished.add(sid)
        expected = self.model.finish(self.entries[sid])
        declined = [(d.memory_id, d.reason_code) for d in report.declined]
        assert declined == [(mid(self.engine, s), code) for s, code in expected]

    @rule(sid=st.integers(0, SESSIONS - 1))
    def new_session(self, sid: int) -> None:
        """Replace a finished session by a fresh one (a new conversation)."""
        if sid in self.finished:
            self.sessions[sid][0].close()
            del self.sessions[sid]
            self.finished.discard(sid)
            self.turns.pop(sid, None)
            self.generation += 1

    # Invariants ---------------------------------------------------------------------------

    def _events(self) -> list[tuple[int, LedgerEvent]]:
        return [
            (n.id, self.engine.mapper.to_domain_event(n))  # type: ignore[misc]
            for n in self.engine.recorder.select_notifications(1, self.engine.head + 1)
        ]

    def _statuses(self) -> dict[str, str]:
        self.engine.catch_up()
        rows = self.engine.projections.conn.execute(
            "SELECT memory_id, status, predicate FROM canonical_memory"
        ).fetchall()
        return {str(r[0]): str(r[1]) for r in rows}

    @invariant()
    def at_most_one_active_value_per_key(self) -> None:
        self.engine.catch_up()
        rows = self.engine.projections.conn.execute(
            "SELECT lower(subject), lower(predicate), count(*) FROM canonical_memory "
            "WHERE predicate IS NOT NULL AND status IN ('active', 'conflicted') GROUP BY 1, 2"
        ).fetchall()
        assert all(count == 1 for _, _, count in rows), rows

    @invariant()
    def no_memory_revived_by_evidence_older_than_its_forget(self) -> None:
        transcripts: dict[tuple[UUID, int], int] = {}
        commands: dict[UUID, int] = {}
        candidates: dict[UUID, tuple[UUID, int]] = {}
        occurred: dict[UUID, datetime | None] = {}
        tombstones: dict[UUID, int] = {}
        tombstone_times: dict[UUID, datetime] = {}
        for position, event in self._events():
            if isinstance(event, TranscriptObserved):
                transcripts[(event.originator_id, event.turn_id)] = position
            elif isinstance(event, CandidateExtracted):
                candidates[event.candidate_id] = (event.originator_id, event.turn_id)
                occurred[event.candidate_id] = event.occurred_at
            elif isinstance(event, ExplicitCommandApplied):
                commands[event.command_id] = position
            elif isinstance(event, MemoryForgotten):
                memory = event.originator_id
                tombstones[memory] = event.command_position or position
                assert event.occurred_at is not None  # every forget records its time
                previous = tombstone_times.get(memory, event.occurred_at)
                tombstone_times[memory] = max(previous, event.occurred_at)
            elif isinstance(event, MemoryActivated | MemoryReinforced):
                tombstone = tombstones.get(event.originator_id)
                if tombstone is None:
                    continue
                source = event.candidate_id
                evidence = (
                    transcripts[candidates[source]] if source in candidates else commands[source]
                )
                assert evidence > tombstone, (event, evidence, tombstone)
                valid_time = occurred.get(source)  # None for a command: the user's new word
                forget_time = tombstone_times[event.originator_id]
                assert valid_time is None or valid_time >= forget_time, (event, forget_time)

    @rule()
    def projections_equal_a_rebuild(self) -> None:
        # A rule, not an invariant: a rebuild is a whole new DuckDB file, most of a step's
        # time when run after every step. The other invariants catch the read models up
        # after every step, so the incremental path is still taken step by step; this rule
        # compares what it built with a rebuild at random points.
        self.engine.catch_up()
        assert table_digests(self.engine.projections.conn) == fresh_digests(self.engine)

    @invariant()
    def canonical_memory_equals_the_model(self) -> None:
        statuses = self._statuses()
        for statement, fact in self.model.facts.items():
            assert statuses.get(str(mid(self.engine, statement)), "absent") == fact.status, (
                statement
            )


CanonicalMachine.TestCase.settings = settings(
    max_examples=30,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCanonicalMachine = CanonicalMachine.TestCase
