"""A small, complete store for the replay tests, built through the public API.

Session ``s1`` (occurred 10 January 2024) teaches that Alice lives in Lisbon and likes
espresso. Session ``s2`` (occurred 5 February 2024) repeats the espresso preference (a
reinforcement), recalls where Alice lives in turn 2, admits and uses that memory, then learns
she moved to Porto (which supersedes Lisbon at finish).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from tests.conftest import make_item

NAMESPACE = Namespace("acme", "alice", "assistant")
JAN = datetime(2024, 1, 10, 9, 0, tzinfo=UTC)
FEB = datetime(2024, 2, 5, 18, 0, tzinfo=UTC)


@dataclass(frozen=True)
class Story:
    """Positions and ids of the story (``after_s1``: the head once s1 was reconciled)."""

    store: Path
    after_s1: int
    head: int
    lisbon: str
    porto: str
    espresso: str


def build_story(store: Path) -> Story:
    with MemoryEngine.open(store, sync=False) as engine:
        extractor = RecordedExtractor()
        s1 = engine.session(NAMESPACE, "s1", extractor=extractor)
        extractor.provide(
            1,
            [
                make_item(
                    "Alice lives in Lisbon.",
                    predicate="lives_in",
                    value="Lisbon",
                    evidence=["s1:1"],
                ),
                make_item(
                    "Alice likes espresso.",
                    predicate="likes",
                    value="espresso",
                    source="preference",
                    evidence=["s1:1"],
                ),
            ],
        )
        s1.observe_final_transcript(1, "user: I live in Lisbon and I love espresso.", JAN)
        first = s1.finish()
        s1.close()
        after_s1 = engine.head
        time.sleep(0.01)  # s2 is recorded strictly later than s1 (recorded-time as-of tests)
        lisbon, espresso = (str(m) for m in first.activated)

        extractor2 = RecordedExtractor("notes-v2")
        s2 = engine.session(NAMESPACE, "s2", extractor=extractor2)
        extractor2.provide(
            1,
            [
                make_item(
                    "Alice likes espresso",
                    predicate="likes",
                    value="espresso",
                    source="preference",
                    evidence=["s2:1"],
                )
            ],
        )
        s2.observe_final_transcript(1, "user: espresso again for me, please.", FEB)
        extractor2.provide(2, [])
        s2.observe_final_transcript(2, "user: remind me where I live?", FEB)
        answer = s2.recall("where does Alice live Lisbon", turn_id=2, k=3)
        assert answer.results and answer.results[0].memory_id == lisbon
        s2.admit(2, answer.results[:1])
        s2.record_use(2, lisbon)
        extractor2.provide(
            3,
            [
                make_item(
                    "Alice lives in Porto.",
                    predicate="lives_in",
                    value="Porto",
                    evidence=["s2:3"],
                )
            ],
        )
        s2.observe_final_transcript(3, "user: I moved to Porto last week.", FEB)
        second = s2.finish()
        s2.close()
        porto = next(str(m) for m in second.activated)
        assert [str(m) for m in second.superseded] == [lisbon]
        assert [str(m) for m in second.reinforced] == [espresso]
        assert engine.catch_up() == engine.head  # the live projection file is at the head
        return Story(
            store=store,
            after_s1=after_s1,
            head=engine.head,
            lisbon=lisbon,
            porto=porto,
            espresso=espresso,
        )
