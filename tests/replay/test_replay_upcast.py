"""Upcasting through replay: records of an older class version still decode AND project.

The store is written by today's code (TranscriptObserved, class version 1). Then the class
"evolves": its topic now resolves to a version 2 that gained a ``language`` field and an
``upcast_v1_v2``. Every old record decodes as version 2, the chain still verifies, and a
rebuild gives exactly the tables the old code built.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import msgspec
import pytest
from eventsourcing.utils import get_topic

from memory_ledger import ledger
from memory_ledger.commands import MemoryEngine
from memory_ledger.ledger.events import TranscriptObserved
from memory_ledger.replay import (
    EventFilter,
    explain,
    filter_events,
    rebuild_projections,
    verify_store,
)
from tests.replay_story import build_story


class TranscriptObservedV2(TranscriptObserved, frozen=True, kw_only=True):
    """Version 2 of the evidence event: gained the transcript's ``language``."""

    class_version: ClassVar[int] = 2
    language: str

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["language"] = "und"


def test_old_records_decode_and_project_after_the_class_gained_a_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    story = build_story(tmp_path / "store")
    with MemoryEngine.open(story.store, create=False) as engine:
        before = rebuild_projections(engine)

    topic = get_topic(TranscriptObserved)
    monkeypatch.setitem(
        ledger.mapper._TOPICS,
        topic,
        (TranscriptObservedV2, msgspec.msgpack.Decoder(TranscriptObservedV2), 2),
    )
    with MemoryEngine.open(story.store, create=False) as engine:
        observed = [
            event for _, event in filter_events(engine, EventFilter(types=("TranscriptObserved",)))
        ]
        assert len(observed) == 4
        assert all(isinstance(e, TranscriptObservedV2) for e in observed)
        assert {e.language for e in observed if isinstance(e, TranscriptObservedV2)} == {"und"}
        assert observed[0].transcript.startswith("user: I live in Lisbon")
        assert verify_store(engine).ok
        after = rebuild_projections(engine)
        lineage = explain(engine, story.lisbon)
    assert after.digests == before.digests
    transcript = lineage.origins[0].transcript
    assert transcript is not None and transcript.turn_id == 1
