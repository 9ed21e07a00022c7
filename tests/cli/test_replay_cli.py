"""CLI conventions of the audit commands: every command takes --json."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from memory_ledger.replay.cli.app import app
from tests.conftest import skip_without_locomo

runner = CliRunner()


def test_every_command_takes_json() -> None:
    group = typer.main.get_command(app)
    commands = getattr(group, "commands", {})
    names = set(commands)
    assert {"replay", "as-of", "explain", "export", "backup", "restore", "stats"} <= names
    leaves = [
        (f"{name} {sub}", leaf)
        for name, command in commands.items()
        for sub, leaf in (getattr(command, "commands", None) or {"": command}).items()
    ]  # a group (``keys``): each of its commands
    assert {"erase", "keys new", "keys rotate"} <= {name.strip() for name, _ in leaves}
    for name, command in leaves:
        options = {opt for param in command.params for opt in getattr(param, "opts", [])}
        assert "--json" in options, f"{name.strip()} has no --json"


def test_convert_locomo_json_summary() -> None:
    source = skip_without_locomo()
    result = runner.invoke(app, ["convert-locomo", str(source), "--sample", "conv-26", "--json"])
    assert result.exit_code == 0
    summary = json.loads(result.stderr)
    assert summary["sample"] == "conv-26" and summary["facts"] == 184
