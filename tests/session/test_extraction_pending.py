"""A background extraction that fails is never silent: ``finish()`` names the turns still
pending extraction and why (the cause, never the API key), and records it in its report."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.errors import ExtractionPendingError
from memory_ledger.commands.extraction import OpenAIChatExtractor
from memory_ledger.ledger.events import PendingExtraction, SessionReconciled
from memory_ledger.replay import EventFilter, filter_events

NS = Namespace("acme", "alice", "assistant")
API_KEY = "sk-test-" + "Zq8Vw3Lp0Xr5Nt2Bk7Hd4Jm9"


def dead_url() -> str:
    """An http URL on 127.0.0.1 where nothing listens (connection refused)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_finish_names_turns_pending_extraction_and_why(tmp_path: Path) -> None:
    with (
        MemoryEngine.open(tmp_path / "store") as engine,
        OpenAIChatExtractor(dead_url(), "m", API_KEY, timeout=5) as extractor,
    ):
        session = engine.session(NS, "s1", extractor=extractor, extraction_mode="background")
        for turn in (1, 2):
            outcome = session.observe_final_transcript(turn, f"user: turn {turn}")
            assert outcome.extraction_pending
        head = engine.head
        with pytest.raises(ExtractionPendingError) as refused:
            session.finish()
        assert [p.turn_id for p in refused.value.pending] == [1, 2]
        assert API_KEY not in str(refused.value) and engine.head == head  # nothing written
        report = session.finish(allow_pending=True)
        assert report.candidates == 0
        assert [p.turn_id for p in report.pending_extractions] == [1, 2]
        assert {p.reason_code for p in report.pending_extractions} == {"unreachable"}
        detail = report.pending_extractions[0].detail
        assert "unreachable" in detail and "127.0.0.1" in detail and API_KEY not in detail
        (reconciled,) = [
            e
            for _, e in filter_events(engine, EventFilter(types=("SessionReconciled",)))
            if isinstance(e, SessionReconciled)
        ]
        assert reconciled.report.pending_extractions == report.pending_extractions
        again = session.finish()
        assert again.already_reconciled
        assert again.pending_extractions == report.pending_extractions


def test_a_turn_no_process_tried_is_not_attempted(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "store") as engine:
        with OpenAIChatExtractor(dead_url(), "m", timeout=5) as extractor:
            first = engine.session(NS, "s1", extractor=extractor, extraction_mode="background")
            first.observe_final_transcript(1, "user: hello")
            first.wait_for_extractions()
            assert first.pending_extraction_causes()[0].reason_code == "unreachable"
            first.close()
        reopened = engine.session(NS, "s1")
        assert reopened.pending_extraction_causes() == (
            PendingExtraction(
                turn_id=1,
                reason_code="not_attempted",
                detail="evidence recorded; extraction never completed",
            ),
        )
        reopened.observe_final_transcript(1, "user: hello")  # the retry completes it
        assert reopened.pending_extraction_causes() == ()
        assert reopened.finish().pending_extractions == ()
