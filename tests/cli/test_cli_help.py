"""The CLI explains itself and fails in one line: help text on every option and argument,
real argument names in usage lines, and every error as one line on stderr with exit 2."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import lmdb
import pytest
import typer
from typer.testing import CliRunner

from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.replay.cli.app import app
from tests.conftest import REPO_ROOT

runner = CliRunner()
QUICKSTART = str(REPO_ROOT / "examples" / "quickstart.jsonl")
COMMANDS = typer.main.get_command(app)


def commands() -> dict[str, Any]:
    found: dict[str, Any] = getattr(COMMANDS, "commands", {})
    assert len(found) >= 12
    return found


@pytest.mark.parametrize("name", sorted(commands()))
def test_every_option_and_argument_has_help(name: str) -> None:
    command = commands()[name]
    for param in command.params:
        assert (getattr(param, "help", None) or "").strip(), f"{name}: {param.name} has no help"


def test_root_options_have_help_and_say_where_settings_come_from() -> None:
    for param in COMMANDS.params:
        assert (getattr(param, "help", None) or "").strip(), f"--{param.name} has no help"
    shown = runner.invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0
    assert "memory-ledger.toml" in shown.stdout and "current directory" in shown.stdout


@pytest.mark.parametrize("name", sorted(commands()))
def test_usage_line_shows_real_argument_names(name: str) -> None:
    shown = runner.invoke(app, [name, "--help"], env={"COLUMNS": "200"})
    assert shown.exit_code == 0, shown.output
    (usage,) = [line for line in shown.stdout.splitlines() if "Usage:" in line]
    assert not re.search(r"\bARGS?\b", usage), usage
    for param in commands()[name].params:
        if param.param_type_name == "argument":
            assert param.metavar and param.metavar in usage, (name, param.name, usage)


def one_line_error(args: list[str]) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


@pytest.mark.parametrize(
    ("raised", "shown"),
    [
        (MemoryLedgerError("the store is unhappy"), "MemoryLedgerError: the store is unhappy"),
        (lmdb.Error("/x/ledger: MDB_CORRUPTED"), "lmdb.Error: /x/ledger: MDB_CORRUPTED"),
        (duckdb.IOException("short read\nin slot-0"), "duckdb.IOException: short read in slot-0"),
        (RuntimeError("unexpected"), "RuntimeError: unexpected"),
    ],
)
def test_any_error_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, raised: Exception, shown: str
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise raised

    monkeypatch.setattr("memory_ledger.commands.engine.memory_engine.MemoryEngine.open", broken)
    for args in (
        ["stats", "--store", str(tmp_path)],
        ["run", QUICKSTART, "--store", str(tmp_path)],
        ["recall", "q", "--store", str(tmp_path), "--tenant", "t"]
        + ["--principal", "p", "--scope-id", "s"],
    ):
        assert one_line_error(args) == f"error: {shown}"


def test_bad_settings_file_is_one_line(tmp_path: Path) -> None:
    settings = tmp_path / "bad.toml"
    settings.write_text("[memory]\nrecall_k = 0\n")
    line = one_line_error(["--config", str(settings), "stats", "--store", str(tmp_path)])
    assert "ConfigError" in line and "recall_k" in line


def test_debug_variable_lets_the_traceback_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORY_LEDGER_DEBUG", "1")
    result = runner.invoke(app, ["stats", "--store", str(tmp_path / "none")])
    assert result.exit_code != 0 and isinstance(result.exception, MemoryLedgerError)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["recall", "q", "-k", "-1"], "'-k'"),
        (["events", "--limit", "-1"], "'--limit'"),
        (["--store", "x"], "--store"),
        (["bogus"], "'bogus'"),
        (["recall"], "QUERY"),
    ],
)
def test_a_usage_error_is_one_line_naming_the_option_and_help(args: list[str], named: str) -> None:
    line = one_line_error(args)
    assert named in line and "--help" in line
    assert "╭" not in line


def test_a_usage_error_never_echoes_a_secret() -> None:
    line = one_line_error(["recall", "q", "-k", "sk-proj-AbCdEf0123456789AbCdEf0123456789"])
    assert "AbCdEf0123456789" not in line
