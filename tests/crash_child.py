"""Child process for ``tests/crash/test_crash_kill.py``: replay a session script, acknowledging.

Run from the repository root (never forked from a process with an LMDB environment open)::

    python -m tests.crash_child --store DIR --script FILE.jsonl [options]

The child opens the store with durable sync ON and replays the script one command at a
time. As soon as a command has returned it writes one acknowledgement line (JSON) to stdout
and flushes it, so every acknowledged command must survive a SIGKILL that follows:

- ``{"kind": "open", "session", "position"}``: ``engine.session(...)`` appended SessionOpened;
- ``{"kind": "evidence", "session", "turn", "position"}``: the evidence command of
  ``observe_final_transcript`` (TranscriptObserved) has returned; written from inside the
  extractor, which the session calls only after the evidence is durable;
- ``{"kind": "extraction", "session", "turn", "position", "evidence_position", ...}``: the
  extraction outcome command returned (``position`` is ``extraction_position``);
- ``{"kind": "finish", "session", "position", "activated", "reinforced", ...}``: ``finish()``;
- with ``--catch-up``: ``{"kind": "page", "position", "rows"}`` after each committed page of a
  projection catch-up and ``{"kind": "caught_up", "position"}`` after ``engine.catch_up()``,
  which the child calls after every finish.

Stall options make the child emit ``{"kind": "stalled", ...}`` and sleep (to be killed) at an
exact point: ``--stall-turn SESSION@TURN`` inside the extractor of one turn (evidence durable,
extraction not written); ``--stall-in-write COMMAND`` inside the LMDB write transaction of one
command (every record of its batch put, nothing committed), COMMAND being ``finish:SESSION``
or ``extraction:SESSION@TURN``; ``--stall-page K`` right after the K-th committed catch-up page
holding memory events, with ``--stall-in-page-txn`` inside that page's DuckDB transaction
instead (rows written, not committed). ``CRASH_CHILD_PAUSE_MS`` (or ``--pause-ms``) sleeps
between commands so that a kill lands in the middle of the run.

The store need not be fresh: replaying into a store that holds part of the script (after a
crash) skips what is recorded, as ``run_script`` does. Only commands that wrote something are
acknowledged; ``{"kind": "skipped", ...}`` names the others.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.extraction import ExtractionRequest, RecordedExtractor
from memory_ledger.commands.session import MemorySession
from memory_ledger.ledger.events import MemoryActivated, MemoryReinforced
from memory_ledger.replay.scripts.script import (
    FinishStep,
    OpenStep,
    RecallStep,
    TurnStep,
    parse_script,
    step_op,
)

STALL_SECONDS = 60.0


_command = ""
"""The command the child is running, as ``--stall-in-write`` names it (or "")."""


def emit(**message: Any) -> None:
    """Write one JSON line to stdout and flush it at once (one write: atomic on a pipe)."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class AckingExtractor:
    """A :class:`RecordedExtractor` that acknowledges the evidence command when called.

    ``observe_final_transcript`` calls the extractor only after TranscriptObserved was
    appended (durably), so this is the moment the evidence command has returned.
    """

    def __init__(self, stall_turn: int | None) -> None:
        self.recorded = RecordedExtractor()
        self.session: MemorySession | None = None
        self.stall_turn = stall_turn
        self.position_before = 0
        """``session.last_position`` before the turn's ``observe_final_transcript``."""

    @property
    def extractor_id(self) -> str:
        return self.recorded.extractor_id

    def provide(self, turn_id: int, items: Sequence[Any]) -> None:
        self.recorded.provide(turn_id, items)

    def extract(self, request: ExtractionRequest) -> Sequence[Any]:
        global _command
        assert self.session is not None
        _command = f"extraction:{request.session_id}@{request.turn_id}"
        if self.session.last_position != self.position_before:  # the evidence was written now
            emit(
                kind="evidence",
                session=request.session_id,
                turn=request.turn_id,
                position=self.session.last_position,
            )
        if request.turn_id == self.stall_turn:
            emit(kind="stalled", session=request.session_id, turn=request.turn_id)
            time.sleep(STALL_SECONDS)
        return self.recorded.extract(request)


def _instrument_catch_up(
    engine: MemoryEngine, *, page_size: int, stall_page: int | None, stall_in_txn: bool
) -> None:
    """Acknowledge every committed catch-up page; stall at the ``stall_page``-th memory page.

    A memory page is one holding MemoryActivated/MemoryReinforced events (it writes rows).
    """
    runner = engine.runner
    store = engine.projections
    runner.page_size = page_size
    original_apply = runner.apply_events
    original_set_position = store.set_position
    memory_pages = 0
    stalling = False

    def count_rows() -> int:
        rows = store.conn.execute("SELECT count(*) FROM canonical_memory").fetchall()
        return int(rows[0][0])

    def apply_events(
        events: Sequence[tuple[int, Any]], *, previous: int, last: int, **kwargs: Any
    ) -> None:
        nonlocal memory_pages, stalling
        batch = kwargs.get("batch")
        columnar = batch is not None and bool(batch.activations)
        if columnar or any(isinstance(e, MemoryActivated | MemoryReinforced) for _, e in events):
            memory_pages += 1
            stalling = memory_pages == stall_page
        else:
            stalling = False
        original_apply(events, previous=previous, last=last, **kwargs)

    def set_position(position: int) -> None:
        # Called inside the page's DuckDB transaction, after its rows were written.
        original_set_position(position)
        if stalling and stall_in_txn:
            emit(kind="stalled", where="page_txn", position=position, rows=count_rows())
            time.sleep(STALL_SECONDS)

    def on_page(position: int) -> None:
        # Called by catch_up after each page's transaction committed.
        emit(kind="page", position=position, rows=count_rows())
        if stalling and not stall_in_txn:
            emit(kind="stalled", where="between_pages", position=position)
            time.sleep(STALL_SECONDS)

    runner.apply_events = apply_events  # type: ignore[method-assign]
    runner.on_page = on_page
    store.set_position = set_position  # type: ignore[method-assign]


def _instrument_ledger_writes(engine: MemoryEngine, command: str) -> None:
    """Stall inside the LMDB write transaction of ``command``, after its records were put
    (by a conditional append, or by the plain appends a transaction runs together)."""
    recorder: Any = engine.recorder
    original_insert = recorder.insert_in_transaction
    original_plain = recorder._combine_plain

    def stall(ids: list[int]) -> None:
        if _command == command:
            emit(kind="stalled", where="ledger_txn", command=command, ids=ids)
            time.sleep(STALL_SECONDS)

    def insert(txn: Any, prepared: Any, tracking: Any, *args: Any) -> list[int]:
        ids: list[int] = original_insert(txn, prepared, tracking, *args)
        stall(ids)
        return ids

    def insert_plain(txn: Any, requests: list[Any]) -> None:
        original_plain(txn, requests)
        stall([i for request in requests for i in request.result or []])

    recorder.insert_in_transaction = insert
    recorder._combine_plain = insert_plain


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.crash_child")
    parser.add_argument("--store", required=True)
    parser.add_argument("--script", required=True)
    parser.add_argument(
        "--pause-ms", type=float, default=float(os.environ.get("CRASH_CHILD_PAUSE_MS", "0"))
    )
    parser.add_argument("--stall-turn", help="SESSION@TURN: sleep inside its extractor")
    parser.add_argument("--stall-in-write", help="finish:SESSION or extraction:SESSION@TURN")
    parser.add_argument("--catch-up", action="store_true", help="catch up after every finish")
    parser.add_argument("--page-size", type=int, default=5000)
    parser.add_argument("--stall-page", type=int, help="stall at the K-th memory page")
    parser.add_argument("--stall-in-page-txn", action="store_true")
    args = parser.parse_args(argv)
    global _command

    stall_session, stall_turn = None, None
    if args.stall_turn:
        stall_session, _, turn = args.stall_turn.rpartition("@")
        stall_turn = int(turn)
    with open(args.script, "rb") as handle:
        steps = parse_script(handle.read().splitlines())
    pause = args.pause_ms / 1000.0

    engine = MemoryEngine.open(args.store, sync=True)
    if args.catch_up:
        _instrument_catch_up(
            engine,
            page_size=args.page_size,
            stall_page=args.stall_page,
            stall_in_txn=args.stall_in_page_txn,
        )
    if args.stall_in_write:
        _instrument_ledger_writes(engine, args.stall_in_write)
    emit(kind="ready", pid=os.getpid(), head=engine.head)
    sessions: dict[str, tuple[MemorySession, AckingExtractor]] = {}
    for _number, step in steps:
        _command = f"{step_op(step)}:{step.session}"
        if isinstance(step, OpenStep):
            extractor = AckingExtractor(stall_turn if step.session == stall_session else None)
            session = engine.session(
                step.namespace,
                step.session,
                extractor=extractor,
                activation_policy=step.activation_policy,
            )
            extractor.session = session
            sessions[step.session] = (session, extractor)
            if session.last_position:
                emit(kind="open", session=step.session, position=session.last_position)
            else:
                emit(kind="skipped", command=_command)
        elif isinstance(step, TurnStep):
            session, extractor = sessions[step.session]
            extractor.provide(step.turn, step.extracted)
            extractor.position_before = session.last_position
            outcome = session.observe_final_transcript(step.turn, step.transcript, step.occurred_at)
            if outcome.extraction_position:
                emit(
                    kind="extraction",
                    session=step.session,
                    turn=step.turn,
                    position=outcome.extraction_position,
                    evidence_position=outcome.evidence_position,
                    candidates=outcome.candidates,
                    rejected=outcome.rejected,
                )
            else:
                emit(kind="skipped", command=f"turn:{step.session}@{step.turn}")
        elif isinstance(step, FinishStep):
            session, _ = sessions[step.session]
            report = session.finish()
            if report.already_reconciled:
                emit(kind="skipped", command=_command)
            else:
                emit(
                    kind="finish",
                    session=step.session,
                    position=report.position,
                    activated=len(report.activated),
                    reinforced=len(report.reinforced),
                )
            if args.catch_up:
                emit(kind="caught_up", position=engine.catch_up())
        elif isinstance(step, RecallStep):
            session, _ = sessions[step.session]
            session.recall(step.query, step.turn, step.k)
        else:
            raise SystemExit(f"crash_child: unsupported step {step!r} in {args.script}")
        if pause:
            time.sleep(pause)
    head = engine.head
    engine.close()
    emit(kind="done", head=head)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
