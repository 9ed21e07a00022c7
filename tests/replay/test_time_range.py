"""Times with a zone whose UTC time no ``datetime`` holds (``9999-12-31T23:59:59-14:00`` is
the year 10000 in UTC; ``0001-01-01T00:00:00+14:00`` the year 0) are refused where they
come in, typed and naming the parameter, on every surface: never a raw ``OverflowError``."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.ids import Namespace
from memory_ledger.replay.audit import PointError, parse_point, parse_timestamp, position_at
from memory_ledger.replay.cli.app import app
from memory_ledger.replay.imports import (
    InterchangeFormatError,
    export_interchange,
    import_interchange,
)

NS = Namespace("acme", "alice", "assistant")
TEXTS = ["9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"]
TIMES = [
    datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=-14))),
    datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14))),
]


@pytest.mark.parametrize("text", TEXTS)
def test_parsed_points_are_refused_typed(text: str) -> None:
    with pytest.raises(PointError) as caught:
        parse_timestamp(text, "--since")
    assert caught.value.parameter == "--since"
    assert "UTC" in str(caught.value)
    with pytest.raises(PointError):
        parse_point(text, "--as-of")


@pytest.mark.parametrize("when", TIMES)
def test_datetime_arguments_are_refused_typed(tmp_path: Path, when: datetime) -> None:
    with MemoryEngine.open(tmp_path) as engine:
        with pytest.raises(InvalidArgumentError) as caught:
            engine.remember(NS, "Alice drinks tea.", occurred_at=when)
        assert caught.value.reason_code == "datetime_out_of_range"
        assert caught.value.parameter == "occurred_at"
        assert engine.head == 0  # nothing written
        with pytest.raises(PointError) as point:
            position_at(engine, when)
        assert point.value.reason_code == "datetime_out_of_range"
        engine.remember(NS, "Alice drinks tea.", occurred_at=when.replace(year=2024))


@pytest.mark.parametrize("text", TEXTS)
def test_the_cli_names_the_point(tmp_path: Path, text: str) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store) as engine:
        engine.remember(NS, "Alice drinks tea.")
    runner = CliRunner()
    for args in (
        ["as-of", text, "--store", str(store)],
        ["events", "--store", str(store), "--since", text],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "PointError" in result.output and "Overflow" not in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)


def test_an_interchange_line_holding_one_is_refused_naming_it(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "a") as engine:
        engine.remember(NS, "Alice drinks tea.")
        file = tmp_path / "memories.jsonl"
        export_interchange(engine, NS, file)
    lines = file.read_text().splitlines()
    memory = json.loads(lines[1])
    memory["versions"][0]["occurred_at"] = TEXTS[0]
    file.write_text("\n".join([lines[0], json.dumps(memory), ""]))
    with MemoryEngine.open(tmp_path / "b") as engine:
        with pytest.raises(InterchangeFormatError) as caught:
            import_interchange(engine, NS, file)
        assert caught.value.line == 2
        assert "occurred_at" in str(caught.value)
        assert engine.head == 0
