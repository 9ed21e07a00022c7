"""An extracted item's ``supersedes`` and ``conflicts_with``: one memory id, a list of ids, or
nothing; through validation, events (old single-id records upcast), reconciliation and the
session script format."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from eventsourcing.persistence import StoredEvent

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.extraction import ExtractionRequest, Rejection, validate_item
from memory_ledger.commands.extraction.validation import cited_ids
from memory_ledger.ledger.events import (
    CandidateExtracted,
    ExtractedItem,
    MemoryActivated,
    MemoryConflictMarked,
    MemorySuperseded,
)
from memory_ledger.ledger.ids import normalize_statement
from memory_ledger.replay import rebuild_projections
from memory_ledger.replay.scripts.script import parse_script, run_script
from tests.conftest import make_item

NS = Namespace("acme", "alice", "assistant")


def mid(engine: MemoryEngine, statement: str) -> str:
    return str(engine.keyring.digests.memory_id(NS, normalize_statement(statement)))


@pytest.mark.parametrize(
    ("supersedes", "conflicts_with", "expected"),
    [
        (None, [], ((), ())),
        ([], None, ((), ())),
        ("m-1", "m-2", (("m-1",), ("m-2",))),
        (["m-1", "m-2", " m-1 ", ""], ["m-2"], (("m-1", "m-2"), ("m-2",))),
    ],
)
def test_relations_take_one_id_a_list_or_nothing(
    supersedes: Any, conflicts_with: Any, expected: tuple[tuple[str, ...], tuple[str, ...]]
) -> None:
    raw = make_item("Alice lives in Porto.", supersedes=supersedes, conflicts_with=conflicts_with)
    item = validate_item(raw, relation_ids={"m-1", "m-2"})
    assert isinstance(item, ExtractedItem)
    assert (item.supersedes, item.conflicts_with) == expected


def test_every_cited_id_must_have_been_shown() -> None:
    raw = make_item("Alice lives in Porto.", supersedes=["m-1", "invented"])
    rejected = validate_item(raw, relation_ids={"m-1"})
    assert isinstance(rejected, Rejection) and rejected.reason_code == "unknown_relation_id"
    wrong_type = validate_item(make_item("Alice lives in Porto.", supersedes=[7]))
    assert isinstance(wrong_type, Rejection) and wrong_type.reason_code == "schema_invalid"
    assert cited_ids([make_item("x y z", supersedes="a", conflicts_with=["b", ""]), 3]) == {
        "a",
        "b",
    }


class Consolidating:
    """A model that merges the two related memories it was shown into one item."""

    extractor_id = "model"

    def extract(self, request: ExtractionRequest) -> list[Any]:
        shown = [r.memory_id for r in request.related]
        assert len(shown) == 2
        return [
            make_item(
                "Alice drinks espresso and green tea.",
                supersedes=shown,
                conflicts_with=shown[0],  # a single id where a list is expected
            )
        ]


def test_a_consolidation_supersedes_every_memory_it_names(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "store") as engine:
        first = engine.session(NS, "s1")
        first.extractor.provide(  # type: ignore[attr-defined]
            1, [make_item("Alice drinks espresso."), make_item("Alice drinks green tea.")]
        )
        first.observe_final_transcript(1, "user: espresso, and green tea")
        first.finish()
        second = engine.session(NS, "s2", extractor=Consolidating())
        second.observe_final_transcript(1, "user: Alice drinks espresso and green tea")
        report = second.finish()
        assert {str(m) for m in report.superseded} == {
            mid(engine, "Alice drinks espresso."),
            mid(engine, "Alice drinks green tea."),
        }
        superseded = [e for _, e in _events(engine) if isinstance(e, MemorySuperseded)]
        assert {e.cause for e in superseded} == {"declared"}
        assert [h.statement for h in engine.recall(NS, "espresso green tea", 5).results] == [
            "Alice drinks espresso and green tea."
        ]
        engine.catch_up()
        (row,) = engine.canonical.active_memories(*msgspec.structs.astuple(NS))
        assert sorted(row["supersedes"]) == sorted(
            [mid(engine, "Alice drinks espresso."), mid(engine, "Alice drinks green tea.")]
        )


def _events(engine: MemoryEngine) -> list[tuple[int, Any]]:
    from memory_ledger.replay import EventFilter, filter_events

    return list(filter_events(engine, EventFilter()))


def test_a_session_script_cites_a_list_and_a_single_id(tmp_path: Path) -> None:
    def line(step: dict[str, Any]) -> str:
        return json.dumps(step)

    ns = {"tenant": NS.tenant, "principal": NS.principal, "scope_id": NS.scope_id}
    facts = ["Alice lives in Lisbon.", "Alice works in Lisbon.", "Alice was born in 1990."]
    engine = MemoryEngine.open(tmp_path / "store")  # a script cites ids its store derives
    script = [
        line({"op": "open", "session": "s1", "namespace": ns}),
        line(
            {
                "op": "turn",
                "session": "s1",
                "turn": 1,
                "transcript": "user: Lisbon, 1990",
                "extracted": [make_item(f) for f in facts],
            }
        ),
        line({"op": "finish", "session": "s1"}),
        line({"op": "open", "session": "s2", "namespace": ns}),
        line(
            {
                "op": "turn",
                "session": "s2",
                "turn": 1,
                "transcript": "user: I moved to Porto for work; born 1991",
                "extracted": [
                    make_item(
                        "Alice lives and works in Porto.",
                        supersedes=[mid(engine, facts[0]), mid(engine, facts[1])],
                    ),
                    make_item("Alice was born in 1991.", conflicts_with=mid(engine, facts[2])),
                    make_item("Alice likes Porto.", supersedes="not-a-known-id"),
                ],
            }
        ),
        line({"op": "finish", "session": "s2"}),
    ]
    with engine:
        report = run_script(engine, parse_script(script))
        assert report.memories_superseded == 2
        assert [(r.reason_code, r.turn) for r in report.rejections] == [("unknown_relation_id", 1)]
        marked = [e for _, e in _events(engine) if isinstance(e, MemoryConflictMarked)]
        assert len(marked) == 2
        statuses = {
            h.statement: h for h in engine.recall(NS, "Alice Lisbon Porto born", 10).results
        }
        assert set(statuses) == {
            "Alice lives and works in Porto.",
            "Alice was born in 1990.",
            "Alice was born in 1991.",
        }


def _as_version_1(stored: StoredEvent) -> StoredEvent:
    """The record as the code before lists wrote it: class version 1, one id or null."""
    state = msgspec.msgpack.decode(stored.state[1:])
    ids = state["item"]["supersedes"]
    state["item"]["supersedes"] = ids[0] if ids else None
    return StoredEvent(
        originator_id=stored.originator_id,
        originator_version=stored.originator_version,
        topic=stored.topic,
        state=b"\x01" + msgspec.msgpack.encode(state),
    )


class Declaring:
    extractor_id = "model"

    def extract(self, request: ExtractionRequest) -> list[Any]:
        return [make_item("Alice lives in Porto.", supersedes=request.related[0].memory_id)]


def test_records_with_a_single_supersedes_id_still_decode_and_project(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store) as engine:
        real = engine.mapper.to_stored_event
        written: list[str] = []

        def old_writer(event: Any) -> StoredEvent:
            stored = real(event)
            if isinstance(event, CandidateExtracted | MemoryActivated):
                written.append(type(event).__name__)
                return _as_version_1(stored)
            return stored

        monkeypatch.setattr(engine.mapper, "to_stored_event", old_writer)
        first = engine.session(NS, "s1")
        first.extractor.provide(1, [make_item("Alice lives in Lisbon.")])  # type: ignore[attr-defined]
        first.observe_final_transcript(1, "user: I live in Lisbon")
        first.finish()
        second = engine.session(NS, "s2", extractor=Declaring())
        second.observe_final_transcript(1, "user: Alice lives in Porto now, not Lisbon")
        second.finish()
        monkeypatch.undo()
        assert written.count("MemoryActivated") == 2
    with MemoryEngine.open(store, create=False) as engine:
        decoded = [e for _, e in _events(engine) if isinstance(e, CandidateExtracted)]
        assert [e.item.supersedes for e in decoded] == [
            (),
            (mid(engine, "Alice lives in Lisbon."),),
        ]
        live = engine.recall(NS, "where does Alice live", 5).results
        assert [h.statement for h in live] == ["Alice lives in Porto."]
        engine.catch_up()
        (row,) = engine.canonical.active_memories(*msgspec.structs.astuple(NS))
        assert row["supersedes"] == [mid(engine, "Alice lives in Lisbon.")]
        rebuilt = rebuild_projections(engine)
        assert rebuilt.rows["canonical_memory"] == 2
