"""Stored and user text reaches the terminal as written: the CLI never reads it as Rich
markup (``[/]`` would raise, ``[red]`` would colour, ``[a-z]+`` would vanish)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.replay.cli.app import app

NS = Namespace("acme", "alice", "assistant")
SCOPE = ["--tenant", NS.tenant, "--principal", NS.principal, "--scope-id", NS.scope_id]
TEXTS = (
    "Alice wrote [/] and more.",
    "Carol's regex is [a-z]+[/] ok.",
    "Dan likes [red]tomatoes[/red] raw.",
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    folder = tmp_path_factory.mktemp("markup") / "store [red]x[/]"
    with MemoryEngine.open(folder) as engine:
        ids = [str(engine.remember(NS, text).memory_id) for text in TEXTS]
        ids.append(str(engine.head))
    return folder, ids


def _run(*args: str) -> str:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "1000"})
    assert result.exit_code == 0, result.output
    assert "MarkupError" not in result.output
    return result.stdout


@pytest.mark.parametrize(
    "command",
    [
        ["recall", "markup regex tomatoes wrote"],
        ["as-of", "HEAD", "--all"],
        ["events"],
    ],
)
def test_recall_as_of_and_events_print_stored_text_as_written(
    store: tuple[Path, list[str]], command: list[str]
) -> None:
    folder, ids = store
    scope = [] if command[0] == "events" else SCOPE
    command = [ids[-1] if word == "HEAD" else word for word in command]
    out = _run(*command, "--store", str(folder), *scope)
    for text in TEXTS:
        assert text in out, out


def test_recall_of_the_words_inside_markup_finds_it(store: tuple[Path, list[str]]) -> None:
    folder, _ = store
    out = _run("recall", "markup", "--store", str(folder), *SCOPE)
    assert "recall 'markup'" in out


def test_explain_and_stats_print_stored_text_and_paths_as_written(
    store: tuple[Path, list[str]],
) -> None:
    folder, ids = store
    for memory_id, text in zip(ids[:-1], TEXTS, strict=True):
        assert text in _run("explain", memory_id, "--store", str(folder))
    assert str(folder) in _run("stats", "--store", str(folder))
