"""Bulk erasure (issue 13 item 6): ``forget_all(namespace)`` and ``memory-ledger forget --all``.

One command forgets every retrievable memory of exactly one namespace and returns the count;
the ledger says what was forgotten and by which command; other namespaces (even ones sharing
the tenant and principal) are untouched; a missing or empty namespace part is refused, never
read as "all"; evidence observed before the erasure never brings a memory back.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.ledger.events import (
    LedgerEvent,
    MemoryForgotten,
    NamespaceForgotten,
)
from memory_ledger.ledger.ids import InvalidNamespaceError
from memory_ledger.replay import verify_store
from memory_ledger.replay.cli.app import app
from tests.conftest import make_item

ALICE = Namespace("acme", "alice", "assistant")
ALICE_OTHER_SCOPE = Namespace("acme", "alice", "other")
BOB = Namespace("acme", "bob", "assistant")


def remember(engine: MemoryEngine, ns: Namespace, sid: str, *statements: str) -> None:
    extractor = RecordedExtractor()
    session = engine.session(ns, sid, extractor=extractor)
    extractor.provide(1, [make_item(s) for s in statements])
    session.observe_final_transcript(1, "user: " + " ".join(statements))
    session.finish()


def all_events(engine: MemoryEngine) -> list[tuple[int, LedgerEvent]]:
    return [
        (n.id, engine.mapper.to_domain_event(n))  # type: ignore[misc]
        for n in engine.recorder.select_notifications(1, engine.head + 1)
    ]


def recalled(engine: MemoryEngine, ns: Namespace, query: str) -> list[str]:
    return [hit.statement for hit in engine.recall(ns, query, 10)]


def test_forget_all_forgets_exactly_one_namespace_in_one_auditable_command(
    engine: MemoryEngine,
) -> None:
    remember(engine, ALICE, "a1", "Alice likes green tea.", "Alice plays chess.")
    remember(engine, ALICE, "a2", "Alice walks her dog daily.")
    remember(engine, ALICE_OTHER_SCOPE, "o1", "Alice likes green tea.")
    remember(engine, BOB, "b1", "Bob likes green tea.")
    forgotten_before = engine.forget(ALICE, "Alice plays chess.").memory_id
    head = engine.head

    assert engine.forget_all(ALICE) == 2

    written = [(p, e) for p, e in all_events(engine) if p > head]
    [(_, command)] = [(p, e) for p, e in written if isinstance(e, NamespaceForgotten)]
    assert isinstance(command, NamespaceForgotten)
    forgets = [e for _, e in written if isinstance(e, MemoryForgotten)]
    assert len(written) == 3  # one transaction: the command and its two forgets
    assert {e.originator_id for e in forgets} == set(command.forgotten)
    assert forgotten_before not in command.forgotten  # it was not retrievable any more
    assert all(e.command_id == command.command_id and e.namespace == ALICE for e in forgets)
    assert recalled(engine, ALICE, "tea chess dog") == []
    assert recalled(engine, ALICE_OTHER_SCOPE, "tea") == ["Alice likes green tea."]
    assert recalled(engine, BOB, "tea") == ["Bob likes green tea."]
    head = engine.head
    assert engine.forget_all(ALICE) == 0  # nothing left: a no-op, nothing written
    assert engine.head == head
    assert verify_store(engine).ok


def test_forget_all_of_an_empty_namespace_writes_nothing(engine: MemoryEngine) -> None:
    """A namespace that never held a memory: 0 forgotten, no record appended."""
    remember(engine, BOB, "b1", "Bob likes green tea.")
    head = engine.head
    assert engine.forget_all(ALICE) == 0
    assert engine.head == head
    assert not any(isinstance(e, NamespaceForgotten) for _, e in all_events(engine))
    assert recalled(engine, BOB, "tea") == ["Bob likes green tea."]


def test_cli_forget_all_of_an_empty_namespace_says_nothing_was_forgotten(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store) as engine:
        remember(engine, BOB, "b1", "Bob likes green tea.")
        head = engine.head
    ns = ["--tenant", "acme", "--principal", "alice", "--scope-id", "assistant"]
    runner = CliRunner()
    said = runner.invoke(app, ["forget", "--all", "--store", str(store), *ns])
    assert said.exit_code == 0, said.output
    assert "nothing to forget in acme/alice/assistant" in said.stdout
    assert "nothing was written" in said.stdout
    result = runner.invoke(app, ["forget", "--all", "--store", str(store), *ns, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {
        "namespace": {"tenant": "acme", "principal": "alice", "scope_id": "assistant"},
        "forgotten": 0,
        "position": head,
    }
    with MemoryEngine.open(store) as engine:
        assert engine.head == head


@pytest.mark.parametrize(
    "parts",
    [("acme", "", "assistant"), ("acme", "alice", " "), ("", "alice", "assistant")],
)
def test_an_empty_namespace_part_is_refused_never_read_as_all(
    engine: MemoryEngine, parts: tuple[str, str, str]
) -> None:
    remember(engine, ALICE, "a1", "Alice likes green tea.")
    head = engine.head
    with pytest.raises(InvalidNamespaceError, match="must be a non-empty string"):
        engine.forget_all(Namespace(*parts))
    assert engine.head == head
    assert recalled(engine, ALICE, "tea") == ["Alice likes green tea."]


def test_evidence_observed_before_the_erasure_never_brings_a_memory_back(
    engine: MemoryEngine,
) -> None:
    remember(engine, ALICE, "a1", "Alice likes green tea.")
    late = RecordedExtractor()
    before = engine.session(ALICE, "observed-before", extractor=late)
    late.provide(1, [make_item("Alice likes green tea.")])
    before.observe_final_transcript(1, "user: I like green tea")
    engine.forget_all(ALICE)

    report = before.finish()

    assert report.activated == () and report.reinforced == ()
    assert [d.reason_code for d in report.declined] == ["evidence_predates_forget"]
    assert recalled(engine, ALICE, "tea") == []
    remember(engine, ALICE, "after", "Alice likes green tea.")  # new evidence: a new activation
    assert recalled(engine, ALICE, "tea") == ["Alice likes green tea."]


def test_cli_forget_all_prints_the_count_and_refuses_a_missing_part(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store) as engine:
        remember(engine, ALICE, "a1", "Alice likes green tea.", "Alice plays chess.")
        remember(engine, BOB, "b1", "Bob likes green tea.")
    runner = CliRunner()
    ns = ["--tenant", "acme", "--principal", "alice", "--scope-id", "assistant"]
    result = runner.invoke(app, ["forget", "--all", "--store", str(store), *ns, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["forgotten"] == 2
    refused = runner.invoke(
        app, ["forget", "--all", "--store", str(store), "--tenant", "acme", "--principal", "bob"]
    )
    assert refused.exit_code == 2  # --scope-id missing: typer refuses it
    empty = runner.invoke(
        app,
        ["forget", "--all", "--store", str(store), "--tenant", "acme", "--principal", "bob"]
        + ["--scope-id", ""],
    )
    assert empty.exit_code == 2 and "non-empty" in empty.output
    without_all = runner.invoke(app, ["forget", "--store", str(store), *ns])
    assert without_all.exit_code == 2 and "--all" in without_all.output
    with MemoryEngine.open(store) as engine:
        assert recalled(engine, BOB, "tea") == ["Bob likes green tea."]
        assert recalled(engine, ALICE, "tea chess") == []
