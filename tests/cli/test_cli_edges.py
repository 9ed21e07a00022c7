"""Edges of the command line: a closed output pipe, a negative position, the lite
embeddings provider, a LoCoMo file that is not JSON, a key file in a missing folder, and
``stats`` of an encrypted store before its first data key."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_ledger.replay.cli.app import app
from tests.conftest import REPO_ROOT

runner = CliRunner()
QUICKSTART = str(REPO_ROOT / "examples" / "quickstart.jsonl")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("edges") / "store"
    result = runner.invoke(app, ["run", QUICKSTART, "--store", str(folder)])
    assert result.exit_code == 0, result.output
    return folder


def one_line_error(result: object) -> str:
    stderr = result.stderr  # type: ignore[attr-defined]
    assert result.exit_code == 2, result.output  # type: ignore[attr-defined]
    assert stderr.count("\n") == 1 and stderr.startswith("error: "), stderr
    assert "Traceback" not in result.output  # type: ignore[attr-defined]
    return str(stderr)


@pytest.mark.parametrize(
    "args",
    [["events", "--json"], ["events"], ["stats", "--json"], ["stats"]],
    ids=["events-json", "events-table", "stats-json", "stats-table"],
)
def test_a_closed_output_pipe_ends_quietly_with_0(store: Path, args: list[str]) -> None:
    """``memory-ledger events | head``: the reader has gone before the first write."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "memory_ledger.replay", *args, "--store", str(store)],
            stdout=write_end,
            stderr=subprocess.PIPE,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
    finally:
        os.close(write_end)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr == b""  # no "Exception ignored", no traceback


def test_a_negative_position_gets_a_one_line_error(store: Path) -> None:
    for args in (["as-of", "-1", "--store", str(store)], ["as-of", "--store", str(store), "-1"]):
        message = one_line_error(runner.invoke(app, args))
        assert "position -1 is negative" in message and "No such option" not in message
    # A negative value of an option stays the option's; unknown options are still refused.
    tenant = runner.invoke(
        app,
        [
            "as-of",
            "--tenant",
            "-1",
            "--principal",
            "p",
            "--scope-id",
            "s",
            "1",
            "--store",
            str(store),
        ],
    )
    assert tenant.exit_code == 0, tenant.output
    typo = runner.invoke(app, ["as-of", "1", "--tenat", "x", "--store", str(store)])
    assert typo.exit_code == 2 and "No such option: --tenat" in typo.output


def test_a_negative_turn_gets_a_typed_error(store: Path) -> None:
    message = one_line_error(runner.invoke(app, ["events", "--turn", "-5", "--store", str(store)]))
    assert "InvalidArgumentError" in message and "turn" in message


def test_an_unknown_export_format_lists_every_format(store: Path, tmp_path: Path) -> None:
    args = ["export", "--format", "xml", "--out", str(tmp_path / "x"), "--store", str(store)]
    message = one_line_error(runner.invoke(app, args))
    assert "parquet, jsonl or interchange" in message


def test_embeddings_accepts_the_lite_provider(store: Path) -> None:
    args = ["recall", "--store", str(store), "--tenant", "demo", "--principal", "alice"]
    result = runner.invoke(app, [*args, "--scope-id", "assistant", "--embeddings", "lite", "x"])
    assert "Invalid value" not in result.output
    assert result.exit_code in (0, 2) and "Traceback" not in result.output
    if result.exit_code == 2:  # the extra is not installed here: said in one line
        assert "lite" in one_line_error(result)
    served = runner.invoke(app, ["mcp", "--help"], env={"COLUMNS": "200"})
    assert "lite" in served.stdout


def test_convert_locomo_names_a_file_that_is_not_json(tmp_path: Path) -> None:
    bad = tmp_path / "notes.json"
    bad.write_text("not json at all")
    message = one_line_error(runner.invoke(app, ["convert-locomo", str(bad), "--sample", "x"]))
    assert "LocomoFileError" in message and "notes.json" in message
    assert "msgspec" not in message


def test_keys_new_creates_missing_folders_owner_only(tmp_path: Path) -> None:
    out = tmp_path / "keys" / "prod" / "master.key"
    result = runner.invoke(app, ["keys", "new", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert stat.S_IMODE(out.stat().st_mode) == 0o600 and out.stat().st_size == 32
    for folder in (tmp_path / "keys", tmp_path / "keys" / "prod"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    again = runner.invoke(app, ["keys", "new", "--out", str(out)])
    assert "exists" in one_line_error(again)


def test_stats_of_a_new_encrypted_store_names_its_master_key(tmp_path: Path) -> None:
    from memory_ledger.commands import MemoryEngine
    from memory_ledger.commands.config import load_config

    key_file = tmp_path / "master.key"
    made = runner.invoke(app, ["keys", "new", "--out", str(key_file), "--json"])
    key_id = json.loads(made.stdout)["key_id"]
    store = tmp_path / "store"
    with MemoryEngine.open(store, config=load_config(None, master_key_file=str(key_file))):
        pass  # a new encrypted store: no data key written yet
    shown = runner.invoke(
        app,
        ["stats", "--store", str(store), "--master-key-file", str(key_file)],
        env={"COLUMNS": "300"},
    )
    assert shown.exit_code == 0, shown.output
    assert "None" not in shown.stdout and key_id in shown.stdout
    as_json = runner.invoke(
        app, ["stats", "--store", str(store), "--master-key-file", str(key_file), "--json"]
    )
    encryption = json.loads(as_json.stdout)["encryption"]
    assert encryption["master_key_id"] == key_id and encryption["master_key_recorded"] is False


def test_a_missing_script_and_forget_without_all_are_typed_errors(tmp_path: Path) -> None:
    """A newcomer's review: ``run`` of a missing file printed ``error: FileNotFoundError``
    and ``forget`` without ``--all`` ``error: ValueError``: raw exception classes, not the
    engine's typed errors with a reason code."""
    missing = runner.invoke(app, ["run", str(tmp_path / "nope.jsonl"), "--store", str(tmp_path)])
    assert missing.exit_code == 2
    assert "ScriptError" in missing.output and "FileNotFoundError" not in missing.output
    assert "nope.jsonl" in missing.output
    args = ["forget", "--tenant", "a", "--principal", "b", "--scope-id", "c"]
    refused = runner.invoke(app, [*args, "--store", str(tmp_path)])
    assert refused.exit_code == 2
    assert "ConfirmationRequiredError" in refused.output and "ValueError" not in refused.output


DEEP = 200_000
"""Levels of nesting past any decoder's recursion limit (msgspec, json, tomllib)."""


def _deep_files(tmp_path: Path, store: Path) -> dict[str, tuple[list[str], str]]:
    """For each reader of a user's file, its command line over a file nested ``DEEP``
    levels and the typed error (and line) it must answer in one line."""
    nested = "[" * DEEP + "]" * DEEP
    script = tmp_path / "deep.jsonl"
    opened = {"tenant": "t", "principal": "p", "scope_id": "s"}
    script.write_text(
        json.dumps({"op": "open", "session": "s1", "namespace": opened})
        + "\n"
        + '{"op":"turn","session":"s1","turn":1,"transcript":"hi",'
        + f'"occurred_at":"2024-01-01T00:00:00Z","extracted":{nested}}}\n'
    )
    interchange = tmp_path / "deep-interchange.jsonl"
    interchange.write_text(
        json.dumps({"format": "memory-ledger.interchange", "version": 1})
        + "\n"
        + f'{{"unknown":{nested}}}\n'
    )
    locomo = tmp_path / "deep-locomo.json"
    locomo.write_text(nested)
    config = tmp_path / "deep.toml"
    config.write_text(f"[memory]\nrecall_k = {nested}\n")
    backup = tmp_path / "backup"
    assert (
        runner.invoke(app, ["backup", "--store", str(store), "--out", str(backup)]).exit_code == 0
    )
    (backup / "backup.json").write_text(f'{{"format":{nested}}}')
    receipt = tmp_path / "receipt.json"
    receipt.write_text(f'{{"format":{nested}}}')
    signing = tmp_path / "signing.key"
    assert runner.invoke(app, ["keys", "new", "--signing", "--out", str(signing)]).exit_code == 0
    namespace = ["--tenant", "t", "--principal", "p", "--scope-id", "s"]
    return {
        "run": (
            ["run", str(script), "--store", str(tmp_path / "run")],
            "ScriptError: line 2: nested",
        ),
        "import": (
            ["import", "interchange", str(interchange), "--store", str(store), *namespace],
            "InterchangeFormatError: line 2 of",
        ),
        "convert-locomo": (
            ["convert-locomo", str(locomo), "--sample", "x"],
            "LocomoFileError:",
        ),
        "config": (["--config", str(config), "stats", "--store", str(store)], "ConfigError:"),
        "restore": (
            ["restore", str(backup), "--store", str(tmp_path / "restored")],
            "BackupManifestError:",
        ),
    }


def test_a_user_file_nested_too_deeply_is_a_typed_one_line_error(
    store: Path, tmp_path: Path
) -> None:
    """A session script line nested 200,000 levels deep answered ``error: RecursionError``
    with no line number (msgspec, json and tomllib raise it): every reader of a user's file
    answers its own typed error in one line, naming the line where it has lines."""
    for name, (args, expected) in _deep_files(tmp_path, store).items():
        message = one_line_error(runner.invoke(app, args))
        assert expected in message, (name, message)
        assert "RecursionError" not in message, (name, message)
    # verify-receipt answers a receipt it cannot read as not verified (exit 1), in one line.
    receipt, signing = tmp_path / "receipt.json", tmp_path / "signing.key"
    checked = runner.invoke(app, ["verify-receipt", str(receipt), "--public-key", f"{signing}.pub"])
    assert checked.exit_code == 1, checked.output
    assert "receipt_malformed" in checked.stderr and checked.stderr.count("\n") == 1
    assert "RecursionError" not in checked.output and "Traceback" not in checked.output
