"""A direct command is one record per command plus its memory events (DirectCommandApplied).

The record says what the short session's SessionOpened, SessionSealed and SessionReconciled
said (its policy, its extractor, and on its last command the report), so a direct command's
session is never read as open or pending; and the direct commands written before, as whole
short sessions (SessionOpened, ExplicitCommandApplied..., SessionSealed, memory events,
SessionReconciled), fold to the same canonical memory, the same session state and the same
lineage as the same commands written as one record each.
"""

from __future__ import annotations

import re
import shutil
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.utils import get_topic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memory_ledger import Forget, Remember, replay
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.commands.session.state import SessionState
from memory_ledger.ledger.events import (
    DirectCommandApplied,
    ExplicitCommandApplied,
    LedgerEvent,
    MemoryActivated,
    MemoryForgotten,
    MemoryPinned,
    MemorySuperseded,
    SessionOpened,
    SessionReconciled,
    SessionSealed,
)
from memory_ledger.ledger.tags import MEMORY_EVENTS
from memory_ledger.replay.audit.timeline import event_record
from memory_ledger.replay.cli.app import app
from tests.engine.append_spy import appended

NS = Namespace("onerec", "alice", "assistant")
MEMORY_TOPICS = frozenset(get_topic(cls) for cls in MEMORY_EVENTS)


def kinds(engine: MemoryEngine, after: int) -> list[type[LedgerEvent]]:
    decode = engine.event_decoder()
    return [
        type(decode(topic, state, raw_id, version))
        for _, raw_id, version, topic, state in engine.read_records(after, 1000, engine.head)
    ]


def test_each_direct_command_writes_one_record_and_its_memory_events(
    engine: MemoryEngine,
) -> None:
    head = engine.head
    kept = engine.remember(NS, "Alice lives in Lisbon.", subject="Alice", predicate="lives in")
    assert kinds(engine, head) == [DirectCommandApplied, MemoryActivated]
    assert kept.position == engine.head == head + 2
    (record, _) = [e for _, e in replay.filter_events(engine)][-2:]
    assert isinstance(record, DirectCommandApplied)
    assert record.originator_version == 1 and record.turn_id == 1
    assert record.session_id == kept.session_id and record.extractor_id == "direct"
    assert record.activation_policy == engine.config.activation_policy
    assert record.report is not None and record.report.activated == (kept.memory_id,)

    head = engine.head
    fixed = engine.correct(NS, "Alice lives in Porto.", target=kept.memory_id)
    assert kinds(engine, head) == [DirectCommandApplied, MemoryActivated, MemorySuperseded]
    head = engine.head
    engine.pin(NS, str(fixed.memory_id))
    assert kinds(engine, head) == [DirectCommandApplied, MemoryPinned]
    head = engine.head
    engine.forget(NS, str(fixed.memory_id))
    assert kinds(engine, head) == [DirectCommandApplied, MemoryForgotten]
    for event in (SessionOpened, SessionSealed, SessionReconciled):
        assert event not in kinds(engine, 0)


def test_the_audit_shows_every_field_of_the_record(engine: MemoryEngine) -> None:
    """Stored without the fields equal to their default, shown with all of them (``events
    --json``, the export's payload)."""
    head = engine.head
    done = engine.remember(NS, "Alice keeps a cat named Miso.")
    (position, record) = next((p, e) for p, e in replay.filter_events(engine) if p > head)
    shown = event_record(position, record)
    assert shown["type"] == "DirectCommandApplied" and shown["stream_version"] == 1
    assert shown["activation_policy"] == "auto" and shown["extractor_id"] == "direct"
    assert shown["target"] is None and shown["occurred_at"] is None
    assert list(shown["report"]["activated"]) == [str(done.memory_id)]
    assert set(shown) >= {f for f in DirectCommandApplied.__struct_fields__} - {
        "originator_id",
        "originator_version",
    }


def test_a_batch_is_one_record_per_command_and_the_last_carries_the_report(
    engine: MemoryEngine,
) -> None:
    head = engine.head
    result = engine.apply_batch(
        NS, [Remember(statement=f"Alice visited city {n}.") for n in range(3)]
    )
    seen = [e for p, e in replay.filter_events(engine) if p > head]
    commands = [e for e in seen if isinstance(e, DirectCommandApplied)]
    assert seen[:3] == commands and [type(e) for e in seen[3:]] == [MemoryActivated] * 3
    assert [c.originator_version for c in commands] == [1, 2, 3]
    assert [c.report is None for c in commands] == [True, True, False]
    assert [o.position for o in result.outcomes] == [head + 1, head + 2, head + 3]


def test_stats_count_a_direct_session_by_its_first_record(engine: MemoryEngine) -> None:
    engine.remember(NS, "Alice keeps a cat named Miso.")
    engine.apply_batch(NS, [Remember(statement=f"Alice visited city {n}.") for n in range(3)])
    session = engine.session(NS, "chat", extractor=None)  # a session's path: SessionOpened
    session.finish()
    stats = replay.store_stats(engine)
    assert stats.sessions == 3
    assert [(n.scope_id, n.sessions) for n in stats.namespaces] == [("assistant", 3)]
    assert stats.events_by_type["DirectCommandApplied"] == 4


def test_a_direct_session_is_never_open_or_pending(engine: MemoryEngine) -> None:
    """Resumed by its id, a direct command's session is sealed and reconciled: no pending
    command, no overlay, and ``finish()`` returns the recorded report writing nothing."""
    done = engine.remember(NS, "Alice keeps a cat named Miso.")
    stream = engine.keyring.digests.session_stream_id(NS, done.session_id)
    state = SessionState()
    for event in engine.load_stream(stream):
        state.apply(event)
    assert state.opened is not None and state.opened.extractor_id == "direct"
    assert state.sealed and state.report is not None
    assert state.report.activated == (done.memory_id,)
    head = engine.head
    session = engine.session(NS, done.session_id)
    assert session.pending_explicit_commands() == []
    report = session.finish()
    assert report.already_reconciled and report.activated == (done.memory_id,)
    with pytest.raises(MemoryLedgerError):
        session.apply_explicit_command("remember", "Alice also keeps a dog.", turn_id=2)
    assert engine.head == head


def test_explain_walks_a_one_record_command_back_to_the_call(engine: MemoryEngine) -> None:
    kept = engine.remember(NS, "Alice lives in Lisbon.", subject="Alice", predicate="lives in")
    fixed = engine.correct(NS, "Alice lives in Porto.", target=kept.memory_id)
    lineage = replay.explain(engine, str(fixed.memory_id))
    (origin,) = lineage.origins
    command_at = origin.position - 1  # the command's record, then its activation
    assert origin.session_id == fixed.session_id and origin.turn_id == 1
    assert origin.activation_policy == engine.config.activation_policy
    assert origin.command is not None
    assert (origin.command.intent, origin.command.statement) == ("correct", "Alice lives in Porto.")
    assert origin.command.position == command_at == origin.reconciled_position
    older = replay.explain(engine, str(kept.memory_id))
    assert [h.type for h in older.history] == ["MemorySuperseded"]
    assert older.history[0].session_id == fixed.session_id


def test_the_explain_command_shows_the_command_of_a_direct_call(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store) as engine:
        done = engine.remember(NS, "Alice only drinks espresso.")
        at = done.position - 1  # the command's record, then its activation
    result = CliRunner().invoke(
        app, ["explain", str(done.memory_id), "--store", str(store)], env={"COLUMNS": "1000"}
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"in {done.session_id} turn 1" in out
    assert f"reconciled @{at}" in out
    assert f"command remember @{at}: Alice only drinks espresso." in out


# Old and new forms fold alike ---------------------------------------------------------------


def old_form(events: Sequence[LedgerEvent]) -> list[LedgerEvent]:
    """The same direct command as it was written before DirectCommandApplied: SessionOpened,
    one ExplicitCommandApplied per command (version ``turn + 1``), SessionSealed, the memory
    events and SessionReconciled with the report."""
    commands = [e for e in events if isinstance(e, DirectCommandApplied)]
    memory = [e for e in events if not isinstance(e, DirectCommandApplied)]
    first, count = commands[0], len(commands)
    envelope: dict[str, Any] = {
        "originator_id": first.originator_id,
        "recorded_at": first.recorded_at,
        "namespace": first.namespace,
        "session_id": first.session_id,
    }
    opened = SessionOpened(
        **envelope,
        originator_version=1,
        activation_policy=first.activation_policy,
        extractor_id=first.extractor_id,
    )
    explicit = [
        ExplicitCommandApplied(
            **envelope,
            originator_version=c.turn_id + 1,
            turn_id=c.turn_id,
            command_id=c.command_id,
            intent=c.intent,
            statement=c.statement,
            target=c.target,
            item=c.item,
            occurred_at=c.occurred_at,
        )
        for c in commands
    ]
    report = commands[-1].report
    assert report is not None
    sealed = SessionSealed(**envelope, originator_version=count + 2)
    reconciled = SessionReconciled(**envelope, originator_version=count + 3, report=report)
    return [opened, *explicit, sealed, *memory, reconciled]


def ordinals(engine: MemoryEngine) -> dict[int, int]:
    """Position -> its rank among the memory events' records (the same in both forms)."""
    records = engine.read_records(0, 1_000_000, engine.head)
    at = [position for position, _, _, topic, _ in records if topic in MEMORY_TOPICS]
    return {position: rank for rank, position in enumerate(at, start=1)}


_POSITIONS = {"created_position", "updated_position", "position"}


def canonical(engine: MemoryEngine) -> dict[str, list[tuple[Any, ...]]]:
    """The DuckDB canonical tables and the serving state's rows, positions as ranks."""
    rank = ordinals(engine)

    def plain(row: dict[str, Any]) -> tuple[Any, ...]:
        return tuple(
            (k, rank[v] if k in _POSITIONS and v else str(v)) for k, v in sorted(row.items())
        )

    found: dict[str, list[tuple[Any, ...]]] = {}
    with engine.read_models() as live:
        for table in ("canonical_memory", "memory_history"):
            result = live.conn.execute(f"SELECT * FROM {table}")  # noqa: S608 (fixed names)
            names = [d[0] for d in result.description]
            found[table] = sorted(
                plain(dict(zip(names, r, strict=True))) for r in result.fetchall()
            )
    with engine.serving.lock:
        engine._serve()  # noqa: SLF001 (the serving state at the head, as a read brings it)
    found["serving"] = sorted(plain(dict(row)) for row in engine.serving.retrievable_rows())
    return found


def sessions(engine: MemoryEngine, ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """What each session's state says, as a resumed session reads it."""
    said = []
    for session_id in ids:
        state = SessionState()
        for event in engine.load_stream(engine.keyring.digests.session_stream_id(NS, session_id)):
            state.apply(event)
        assert state.opened is not None and state.report is not None
        said.append(
            (
                state.opened.session_id,
                state.opened.activation_policy,
                state.opened.extractor_id,
                state.sealed,
                state.report,
                [
                    (c.turn_id, c.command_id, c.intent, c.statement, c.target, c.item)
                    for c in state.commands
                ],
            )
        )
    return said


def lineages(engine: MemoryEngine, memory_ids: Sequence[str]) -> list[tuple[Any, ...]]:
    """Each memory's lineage, positions left out (the two forms number records apart)."""
    told = []
    for memory_id in memory_ids:
        lineage = replay.explain(engine, memory_id)
        told.append(
            (
                lineage.status,
                [
                    (
                        o.kind,
                        o.session_id,
                        o.turn_id,
                        o.decision,
                        o.activation_policy,
                        None if o.command is None else (o.command.intent, o.command.statement),
                        o.reconciled_position is not None,
                    )
                    for o in lineage.origins
                ],
                [
                    (h.type, h.session_id, h.turn_id, re.sub(r"@\d+", "@", h.detail))
                    for h in lineage.history
                ],
            )
        )
    return told


_OP = st.tuples(
    st.sampled_from(["remember", "correct", "pin", "forget", "batch"]), st.integers(0, 3)
)


@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(ops=st.lists(_OP, min_size=1, max_size=8))
def test_the_old_and_the_new_form_fold_to_the_same_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ops: list[tuple[str, int]]
) -> None:
    folder = tmp_path / uuid.uuid4().hex
    with MemoryEngine.open(folder / "new") as seeded:  # the namespace's keys made, copied:
        seeded.remember(NS, "Alice has a seed.")  # both stores derive ids under the same keys
    shutil.copytree(folder / "new", folder / "old")
    with MemoryEngine.open(folder / "new") as new, MemoryEngine.open(folder / "old") as old:
        batches = appended(new, monkeypatch)
        ids: list[str] = []
        for op, n in ops:
            subject = f"person{n % 2}"
            live = [doc.memory_id for doc in new.retrievable_memories(NS)]
            try:
                if op == "remember":
                    done = new.remember(
                        NS, f"{subject} lives in city {n}.", subject=subject, predicate="lives in"
                    )
                elif op == "batch":
                    done = new.apply_batch(
                        NS,
                        [
                            Remember(statement=f"{subject} likes thing {n}."),
                            *([Forget(target=live[0])] if live else []),
                        ],
                    )
                elif not live:
                    continue
                elif op == "correct":
                    done = new.correct(NS, f"{subject} lives in town {n}.", target=live[-1])
                elif op == "pin":
                    done = new.pin(NS, live[n % len(live)])
                else:
                    done = new.forget(NS, live[n % len(live)])
            except MemoryLedgerError:
                continue  # refused: nothing written
            ids.append(done.session_id)
        for batch in batches:
            old.append(old_form(batch))
        assert old.head == new.head + 3 * len(batches)
        assert canonical(old) == canonical(new)
        assert sessions(old, ids) == sessions(new, ids)
        with new.read_models() as live:
            rows = live.conn.execute("SELECT memory_id FROM canonical_memory").fetchall()
        every = sorted(str(memory_id) for (memory_id,) in rows)
        assert lineages(old, every) == lineages(new, every)
