"""The memory-ledger CLI end to end, on a real LoCoMo conversation and the example script."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_ledger.replay.cli.app import app
from tests.conftest import REPO_ROOT

runner = CliRunner()
LOCOMO_NS = ["--tenant", "locomo", "--principal", "conv-26", "--scope-id", "conversation"]


def cli(*args: str) -> str:
    result = runner.invoke(app, list(args), catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.stdout


def events(store: Path) -> list[dict[str, object]]:
    return [
        json.loads(line) for line in cli("events", "--store", str(store), "--json").splitlines()
    ]


@pytest.fixture(scope="module")
def conv26(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.conftest import skip_without_locomo

    source = skip_without_locomo()
    script = tmp_path_factory.mktemp("conv26") / "conv26.jsonl"
    result = runner.invoke(app, ["convert-locomo", str(source), "--sample", "conv-26"])
    assert result.exit_code == 0, result.output
    script.write_text(result.stdout)
    return script


def test_convert_writes_pure_json_lines(conv26: Path) -> None:
    lines = conv26.read_text().splitlines()
    steps = [json.loads(line) for line in lines]
    assert steps[0]["op"] == "open"
    assert sum(len(s.get("extracted", [])) for s in steps) == 184


def test_run_conv26_activates_every_fact_and_recalls_d1_3(conv26: Path, tmp_path: Path) -> None:
    store = tmp_path / "store"
    report = json.loads(cli("run", str(conv26), "--store", str(store), "--json"))
    assert report["rejected"] == 0
    assert report["active_memories"] == 184
    recorded = events(store)
    types = [e["type"] for e in recorded]
    assert types.count("MemoryActivated") == 184
    assert types.count("CandidateRejected") == 0
    assert [e["position"] for e in recorded] == list(range(1, len(recorded) + 1))
    assert all({"position", "type", "recorded_at"} <= e.keys() for e in recorded)

    answer = json.loads(
        cli("recall", "--store", str(store), *LOCOMO_NS, "LGBTQ support group", "--json")
    )
    top = answer["results"][0]
    assert set(top) == {
        "rank",
        "memory_id",
        "statement",
        "subject",
        "score",
        "evidence",
        "occurred_at",
    }
    assert top["rank"] == 1 and top["subject"] == "Caroline"
    assert top["evidence"] == ["D1:3"] and "support group" in top["statement"]
    assert top["occurred_at"] == "2023-05-08T13:56:00Z"

    # The same script again: a no-op that exits 0 and writes no MemoryActivated.
    again = json.loads(cli("run", str(conv26), "--store", str(store), "--json"))
    assert again["events_written"] == 0
    assert again["sessions_already_finished"] == 19
    assert [e["type"] for e in events(store)].count("MemoryActivated") == 184


def test_console_script_runs_the_example(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("memory-ledger")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "replay"]
    store = tmp_path / "store"
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    run = subprocess.run(
        [*command, "run", str(REPO_ROOT / "examples" / "quickstart.jsonl"), "--store", str(store)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert "active memories" in run.stdout
    recall = subprocess.run(
        [
            *command,
            "recall",
            "--store",
            str(store),
            "--tenant",
            "demo",
            "--principal",
            "alice",
            "--scope-id",
            "assistant",
            "espresso",
            "--json",
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert recall.returncode == 0, recall.stderr
    hits = json.loads(recall.stdout)["results"]
    assert hits and "espresso" in hits[0]["statement"]


def test_user_errors_exit_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"op":"turn","session":"s","turn":1,"transcript":"x"}\n')
    result = runner.invoke(app, ["run", str(bad), "--store", str(tmp_path / "s")])
    assert result.exit_code == 2
    assert "line 1" in result.stderr and "open" in result.stderr
    assert "Traceback" not in result.output

    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text('{"op":"open","session":"s","namespace":{"tenant":"t"}}\n')
    result = runner.invoke(app, ["run", str(garbage), "--store", str(tmp_path / "s")])
    assert result.exit_code == 2 and "principal" in result.stderr

    result = runner.invoke(
        app,
        [
            "recall",
            "--store",
            str(tmp_path / "s"),
            "--tenant",
            "",
            "--principal",
            "p",
            "--scope-id",
            "s",
            "q",
        ],
    )
    assert result.exit_code == 2 and "tenant" in result.stderr


def test_convert_unknown_sample_is_typed(tmp_path: Path) -> None:
    from tests.conftest import skip_without_locomo

    source = skip_without_locomo()
    result = runner.invoke(app, ["convert-locomo", str(source), "--sample", "conv-999"])
    assert result.exit_code == 2 and "conv-26" in result.stderr


def test_cli_input_errors_are_one_line(tmp_path: Path) -> None:
    script = tmp_path / "big.jsonl"
    script.write_text(
        '{"op":"open","session":"s","namespace":{"tenant":"t","principal":"p","scope_id":"a"}}\n'
        '{"op":"turn","session":"s","turn":9223372036854775808,"transcript":"hi"}\n'
    )
    store = tmp_path / "s"
    result = runner.invoke(app, ["run", str(script), "--store", str(store)])
    assert result.exit_code == 2 and "line 2" in result.stderr and "turn" in result.stderr
    assert not store.exists() or "Traceback" not in result.output

    missing = runner.invoke(app, ["events", "--store", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "no memory store" in missing.stderr
    assert not (tmp_path / "nope").exists()

    bom = tmp_path / "bom.jsonl"
    bom.write_bytes(
        b"\xef\xbb\xbf"
        + b'{"op":"open","session":"s","namespace":{"tenant":"t","principal":"p","scope_id":"a"}}\n'
    )
    assert runner.invoke(app, ["run", str(bom), "--store", str(store)]).exit_code == 0

    empty = tmp_path / "empty.json"
    empty.write_text("")
    converted = runner.invoke(app, ["convert-locomo", str(empty), "--sample", "x"])
    assert converted.exit_code == 2 and "Traceback" not in converted.output

    version = runner.invoke(app, ["--version"])
    assert version.exit_code == 0 and "memory-ledger" in version.stdout


def test_damaged_projection_file_is_rebuilt(tmp_path: Path) -> None:
    store = tmp_path / "s"
    cli("run", str(REPO_ROOT / "examples" / "quickstart.jsonl"), "--store", str(store))
    before = json.loads(
        cli(
            "recall",
            "--store",
            str(store),
            "--tenant",
            "demo",
            "--principal",
            "alice",
            "--scope-id",
            "assistant",
            "espresso",
            "--json",
        )
    )
    slot = store / "projections" / "slot-0.duckdb"
    slot.write_bytes(b"garbage" * 100)
    after = json.loads(
        cli(
            "recall",
            "--store",
            str(store),
            "--tenant",
            "demo",
            "--principal",
            "alice",
            "--scope-id",
            "assistant",
            "espresso",
            "--json",
        )
    )
    assert after["results"] == before["results"]
    assert list((store / "projections").glob("slot-0.duckdb.damaged-*"))
