"""A PostgreSQL ledger without the ``postgres`` extra: a typed error naming the command that
installs it, one line from the CLI (the README's "Try it" after the README's set-up)."""

from __future__ import annotations

import pickle
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import memory_ledger
from memory_ledger.commands import MemoryEngine
from memory_ledger.commands.errors import LedgerDriverNotInstalledError
from memory_ledger.replay.cli.app import app
from tests.conftest import REPO_ROOT

URL = "postgresql://postgres@127.0.0.1:5432/test?schema=demo"


@pytest.fixture
def no_psycopg(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``import psycopg`` fail as it does where the extra is not installed."""
    for name in list(sys.modules):
        if name == "psycopg" or name.startswith(("psycopg.", "psycopg_pool")):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "psycopg", None)
    for name in ("memory_ledger.ledger.postgres", "eventsourcing.postgres"):
        monkeypatch.delitem(sys.modules, name, raising=False)


@pytest.mark.usefixtures("no_psycopg")
def test_opening_a_postgres_ledger_without_the_driver_names_the_extra(tmp_path: Path) -> None:
    with pytest.raises(LedgerDriverNotInstalledError) as raised:
        MemoryEngine.open(tmp_path / "store", ledger=URL)
    error = raised.value
    assert isinstance(error, memory_ledger.MemoryLedgerError)
    assert isinstance(error, ImportError)
    assert error.reason_code == "postgres_extra_not_installed"
    assert error.name == "psycopg"
    assert 'pip install "memory-ledger[postgres]"' in str(error)
    again = pickle.loads(pickle.dumps(error))
    assert (str(again), again.reason_code) == (str(error), error.reason_code)
    assert not (tmp_path / "store").exists()  # nothing was created


@pytest.mark.usefixtures("no_psycopg")
def test_the_readme_try_it_command_says_which_extra_to_install(tmp_path: Path) -> None:
    quickstart = str(REPO_ROOT / "examples" / "quickstart.jsonl")
    result = CliRunner().invoke(
        app, ["run", quickstart, "--store", str(tmp_path / "host-a"), "--ledger", URL]
    )
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert "ModuleNotFoundError" not in result.output
    assert 'pip install "memory-ledger[postgres]"' in " ".join(result.output.split())
