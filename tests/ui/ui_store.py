"""The store the debugger's tests browse: two namespaces, a supersession, a session with
evidence, and stored strings that try to break out of the page."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.extraction import RecordedExtractor
from tests.conftest import make_item

ALICE = Namespace("acme", "alice", "assistant")
BOB = Namespace("acme", "bob", "assistant")
SCRIPT = "<script>alert('x')</script>"
BREAKOUT = '"><img src=x onerror=alert(1)>'
BIDI = "\u202egnp.exe"  # RIGHT-TO-LEFT OVERRIDE: reads "exe.png" backwards
CONTROL = "bell\x07and\x1bescape"
HOSTILE_STATEMENT = f"Alice's note {SCRIPT} and {BREAKOUT}"
HOSTILE_TRANSCRIPT = f"user: my file is {BIDI}, {CONTROL}, {SCRIPT} {BREAKOUT}"


@dataclass(frozen=True)
class UiStore:
    """The store folder and the ids the tests look for."""

    path: Path
    lisbon: str
    porto: str
    hostile: str
    position_before_move: int
    head: int


def build_store(folder: Path) -> UiStore:
    """Write the test store with the engine's public commands (sessions and remember /
    correct), then close it."""
    with MemoryEngine.open(folder) as engine:
        extractor = RecordedExtractor()
        session = engine.session(ALICE, "week-1", extractor=extractor)
        extractor.provide(
            1,
            [
                make_item(
                    "Alice lives in Lisbon.",
                    predicate="lives_in",
                    value="Lisbon",
                    evidence=["week-1:1"],
                )
            ],
        )
        extractor.provide(2, [make_item(HOSTILE_STATEMENT, evidence=["week-1:2"])])
        session.observe_final_transcript(
            1, "user: I live in Lisbon now.", occurred_at=datetime(2024, 3, 4, 9, 15, tzinfo=UTC)
        )
        session.observe_final_transcript(
            2, HOSTILE_TRANSCRIPT, occurred_at=datetime(2024, 3, 4, 9, 20, tzinfo=UTC)
        )
        session.finish()
        before = engine.head
        lisbon = engine.recall(ALICE, "Alice lives Lisbon", 1).results[0].memory_id
        porto = engine.correct(
            ALICE,
            "Alice lives in Porto.",
            target=lisbon,
            occurred_at=datetime(2024, 5, 1, tzinfo=UTC),
        )
        hostile = engine.recall(ALICE, "Alice note script", 1).results[0].memory_id
        for n in range(3):
            engine.remember(BOB, f"Bob likes tea number {n}.")
        return UiStore(
            path=folder,
            lisbon=lisbon,
            porto=str(porto.memory_id),
            hostile=hostile,
            position_before_move=before,
            head=engine.head,
        )
