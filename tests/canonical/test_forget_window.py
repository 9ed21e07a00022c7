"""A forgotten memory's source turn lends no words to the conversation windows of its
neighbours: after a forget, a query on the forgotten words finds nothing through them, live,
in a prepared snapshot and in a fresh process; recall as of before the forget still finds
it."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from typer.testing import CliRunner

from memory_ledger import replay
from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.commands.recall.lexical import ConversationWindows
from memory_ledger.replay.cli.app import app
from tests.conftest import REPO_ROOT, make_item

NS = Namespace("acme", "alice", "assistant")
SISTER = "Alice's sister Inês lives in Porto."


class FakeTranscripts:
    """``text_at`` over a dict of ledger positions."""

    def __init__(self, texts: dict[int, str]) -> None:
        self.texts = texts

    def text_at(self, position: int) -> str | None:
        return self.texts.get(position)


def test_a_silenced_turn_lends_nothing_to_a_window() -> None:
    turns = [("s1", 1, 10), ("s1", 2, 12), ("s1", 3, 14)]
    fake = FakeTranscripts({p: f"turn {t}" for _, t, p in turns})

    def turns_of(tenant: str, principal: str, scope_id: str) -> Sequence[tuple[str, int, int]]:
        return turns

    reader = ConversationWindows(fake, turns_of)  # type: ignore[arg-type]
    assert reader.for_namespace("t", "p", "s")([10], 100) == "turn 2\nturn 3"
    assert reader.for_namespace("t", "p", "s", {12})([10], 100) == "turn 3"
    assert reader.for_namespace("t", "p", "s", {12, 14})([10], 100) is None
    # A memory's own source turn is not its window: silencing it changes nothing there.
    assert reader.for_namespace("t", "p", "s", {10})([10], 100) == "turn 2\nturn 3"


def conversation(engine: MemoryEngine) -> None:
    extractor = RecordedExtractor()
    session = engine.session(NS, "week-1", extractor=extractor)
    extractor.provide(1, [make_item("Alice likes espresso.")])
    extractor.provide(2, [make_item(SISTER, subject="Inês")])
    extractor.provide(3, [make_item("Deploys fail without the base URL.", subject="deploy")])
    session.observe_final_transcript(1, "user: I only drink espresso.")
    session.observe_final_transcript(2, "user: My sister Inês is visiting from Porto.")
    session.observe_final_transcript(3, "user: The deploy failed without the base URL.")
    session.finish()


def statements(hits: Sequence[object]) -> list[str]:
    return [hit.statement for hit in hits]  # type: ignore[attr-defined]


def test_after_a_forget_its_words_no_longer_find_the_neighbours(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "store") as engine:
        conversation(engine)
        found = engine.recall(NS, "sister Porto", 5)
        # Before: the memory itself first, its neighbours through their windows.
        assert statements(found)[0] == SISTER
        assert len(found) == 3
        sister = found[0].memory_id
        before = engine.head
        engine.forget(NS, sister)  # the index built above is refreshed, not rebuilt
        assert statements(engine.recall(NS, "sister Porto", 5)) == []
        assert statements(engine.recall(NS, "Inês", 5)) == []
        # The neighbours' own words still find them (and the windows of the others).
        assert statements(engine.recall(NS, "espresso", 5)) == [
            "Alice likes espresso.",
            "Deploys fail without the base URL.",  # turn 1 is in turn 3's window
        ]
        # A snapshot prepared for a turn that names the forgotten words holds nothing.
        later = engine.session(NS, "week-2", extractor=RecordedExtractor())
        assert later.prepare(1, "sister Inês, Porto?").items == ()
        later.finish()
        # As of before the forget, recall answers as it did then.
        with replay.as_of(engine, before) as then:
            past = then.recall(NS, "sister Porto", 5)
            assert statements(past)[0] == SISTER
            assert len(past) == 3
    # A fresh process builds the index from scratch: the same answer.
    with MemoryEngine.open(tmp_path / "store") as engine:
        assert statements(engine.recall(NS, "sister Porto", 5)) == []


def test_a_memory_remembered_again_lends_its_turn_again(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "store") as engine:
        conversation(engine)
        sister = engine.recall(NS, "sister Porto", 5)[0].memory_id
        engine.forget(NS, sister)
        assert statements(engine.recall(NS, "Porto", 5)) == []
        engine.remember(NS, SISTER, subject="Inês")  # the user's new word
        again = engine.recall(NS, "Porto", 5)
        assert statements(again)[0] == SISTER
        assert len(again) == 3  # its source turn lends its words to the neighbours again


def test_the_readme_quick_start_forgets_ines_for_good(tmp_path: Path) -> None:
    runner = CliRunner()
    store = str(tmp_path / "store")
    quickstart = str(REPO_ROOT / "examples" / "quickstart.jsonl")
    assert runner.invoke(app, ["run", quickstart, "--store", store]).exit_code == 0
    demo = ["--tenant", "demo", "--principal", "alice", "--scope-id", "assistant"]

    def recall(query: str, *extra: str) -> list[str]:
        result = runner.invoke(app, ["recall", "--store", store, *demo, query, "--json", *extra])
        assert result.exit_code == 0, result.output
        return [hit["statement"] for hit in json.loads(result.output)["results"]]

    assert recall("Inês") == []
    assert recall("sister Porto") == []
    then = recall("sister Porto", "--as-of", "20")
    assert then[0] == "Alice's sister Inês lives in Porto and visits on 20 March 2024."
