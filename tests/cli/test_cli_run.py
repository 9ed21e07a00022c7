"""``memory-ledger run``: progress on a terminal, rejected items named with their reason
codes, a re-run that writes nothing, and an extraction failure that is never silent."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine
from memory_ledger.replay.cli import common as cli_common
from memory_ledger.replay.cli.app import app
from tests.conftest import REPO_ROOT, make_item
from tests.scripted_server import Reply, ScriptedServer

runner = CliRunner()
QUICKSTART = str(REPO_ROOT / "examples" / "quickstart.jsonl")
API_KEY = "sk-test-" + "Yh7Gf6Dd5Ss4Aa3Qq2Ww1Ee0"
NS = {"tenant": "acme", "principal": "alice", "scope_id": "assistant"}


def head(store: Path) -> int:
    with MemoryEngine.open(store, create=False) as engine:
        return engine.head


def test_a_second_run_writes_nothing(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = runner.invoke(app, ["run", QUICKSTART, "--store", str(store), "--json"])
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout)
    assert report["recalls"] == 2 and report["recalls_recorded"] == 0
    assert report["head_before"] == 0 and report["head_after"] == head(store) > 0
    before = head(store)
    again = runner.invoke(app, ["run", QUICKSTART, "--store", str(store), "--json"])
    assert again.exit_code == 0, again.output
    second = json.loads(again.stdout)
    assert head(store) == before
    assert second["events_written"] == 0
    assert second["head_before"] == second["head_after"] == before
    assert second["turns_already_recorded"] == 5 and second["turns_observed"] == 0
    assert second["rejections"] == [] and second["refusals"] == []


def test_record_recalls_writes_recall_served(tmp_path: Path) -> None:
    store = tmp_path / "store"
    quiet = runner.invoke(app, ["run", QUICKSTART, "--store", str(store), "--json"])
    assert quiet.exit_code == 0
    before = head(store)
    loud = runner.invoke(
        app, ["run", QUICKSTART, "--store", str(store), "--record-recalls", "--json"]
    )
    assert loud.exit_code == 0, loud.output
    assert json.loads(loud.stdout)["recalls_recorded"] == 2
    assert head(store) == before + 2
    listed = runner.invoke(app, ["events", "--store", str(store), "--type", "RecallServed"])
    assert listed.exit_code == 0 and listed.stdout.count("RecallServed") == 2


def test_summary_names_rejected_items_with_their_reason_codes(tmp_path: Path) -> None:
    store = tmp_path / "store"
    table = runner.invoke(app, ["run", QUICKSTART, "--store", str(store)])
    assert table.exit_code == 0, table.output
    assert "rejected items" in table.stdout
    assert "missing_reason" in table.stdout and "week-1" in table.stdout
    as_json = runner.invoke(app, ["run", QUICKSTART, "--store", str(tmp_path / "s2"), "--json"])
    (rejection,) = json.loads(as_json.stdout)["rejections"]
    assert rejection == {
        "session": "week-1",
        "turn": 3,
        "index": 1,
        "reason_code": "missing_reason",
        "detail": "reason (future value) is empty",
    }


def test_progress_shows_turns_and_rate_only_on_a_terminal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = runner.invoke(app, ["run", QUICKSTART, "--store", str(tmp_path / "a")])
    assert plain.exit_code == 0 and "turns/s" not in plain.stderr
    monkeypatch.setattr(cli_common, "err", Console(stderr=True, force_terminal=True, width=100))
    shown = runner.invoke(app, ["run", QUICKSTART, "--store", str(tmp_path / "b")])
    assert shown.exit_code == 0, shown.output
    assert "5/5" in shown.stderr and "turns/s" in shown.stderr


def script(path: Path, turns: int) -> Path:
    lines: list[dict[str, Any]] = [{"op": "open", "session": "chat", "namespace": NS}]
    for turn in range(1, turns + 1):
        lines.append(
            {
                "op": "turn",
                "session": "chat",
                "turn": turn,
                "transcript": f"user: fact number {turn} about Alice",
                "extracted": [make_item(f"Recorded fact {turn}.")],
            }
        )
    lines.append({"op": "finish", "session": "chat"})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def dead_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def chat_reply(statement: str) -> Reply:
    content = json.dumps({"items": [make_item(statement)]})
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
    return Reply(body=json.dumps(body).encode())


def test_failed_extraction_is_named_exits_1_and_a_rerun_completes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMORY_LEDGER_TEST_KEY", API_KEY)
    path = script(tmp_path / "chat.jsonl", 2)
    store = tmp_path / "store"
    llm = ["--llm-model", "m", "--llm-api-key-env", "MEMORY_LEDGER_TEST_KEY"]
    down = runner.invoke(
        app, ["run", str(path), "--store", str(store), "--llm-url", dead_url(), *llm, "--json"]
    )
    assert down.exit_code == 1, down.output
    assert "Traceback" not in down.output and API_KEY not in down.output
    report = json.loads(down.stdout)
    assert [(p["session"], p["turn"], p["reason_code"]) for p in report["pending_extractions"]] == [
        ("chat", 1, "unreachable"),
        ("chat", 2, "unreachable"),
    ]
    assert report["sessions_left_open"] == ["chat"] and report["sessions_finished"] == 0
    assert report["recorded_items_ignored"] == 2
    failed = [line for line in down.stderr.splitlines() if "extraction failed" in line]
    assert len(failed) == 2 and "turn 1" in failed[0] and "unreachable" in failed[0]
    assert "run the script again" in down.stderr

    server = ScriptedServer()
    try:
        server.play(chat_reply("Alice keeps bees."), chat_reply("Alice rows on Sundays."))
        up = runner.invoke(
            app,
            ["run", str(path), "--store", str(store), "--llm-url", server.base_url, *llm, "--json"],
        )
    finally:
        server.close()
    assert up.exit_code == 0, up.output
    retried = json.loads(up.stdout)
    assert retried["pending_extractions"] == [] and retried["sessions_finished"] == 1
    # The first run wrote both turns' evidence; this one found it and wrote the extractions.
    assert retried["turns_observed"] == 0 and retried["turns_already_recorded"] == 2
    assert retried["candidates"] == 2 and retried["memories_activated"] == 2
    assert all(r.headers.get("authorization") == f"Bearer {API_KEY}" for r in server.requests)


def test_model_options_come_together(tmp_path: Path) -> None:
    path = script(tmp_path / "chat.jsonl", 1)
    result = runner.invoke(
        app, ["run", str(path), "--store", str(tmp_path / "s"), "--llm-url", dead_url()]
    )
    assert result.exit_code == 2 and "--llm-model" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def write_steps(path: Path, steps: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(step) + "\n" for step in steps))
    return path


def test_a_command_holding_a_secret_is_refused_and_the_script_goes_on(tmp_path: Path) -> None:
    path = write_steps(
        tmp_path / "secret.jsonl",
        [
            {"op": "open", "session": "s1", "namespace": NS},
            {"op": "turn", "session": "s1", "turn": 1, "transcript": "user: hi"},
            {
                "op": "command",
                "session": "s1",
                "turn": 1,
                "intent": "remember",
                "statement": f"My API key is {API_KEY}",
            },
            {
                "op": "command",
                "session": "s1",
                "turn": 1,
                "intent": "remember",
                "statement": "Alice likes tea.",
            },
            {"op": "finish", "session": "s1"},
        ],
    )
    store = tmp_path / "store"
    result = runner.invoke(app, ["run", str(path), "--store", str(store), "--json"])
    assert result.exit_code == 0, result.output
    assert API_KEY not in result.output
    report = json.loads(result.stdout)
    assert report["commands_refused"] == 1 and report["commands_applied"] == 1
    (refused,) = report["refusals"]
    assert (refused["session"], refused["turn"], refused["line"], refused["intent"]) == (
        "s1",
        1,
        3,
        "remember",
    )
    assert refused["reason_code"] == "secret_detected"
    assert report["sessions_finished"] == 1 and report["sessions_left_open"] == []
    assert report["active_memories"] == 1
    again = runner.invoke(app, ["run", str(path), "--store", str(store)])  # replayable
    assert again.exit_code == 0, again.output
    assert "refused commands" in again.stdout and "secret_detected" in again.stdout
    assert API_KEY not in again.output


def test_an_open_of_a_session_under_another_namespace_is_refused(tmp_path: Path) -> None:
    from memory_ledger.commands import Namespace
    from memory_ledger.replay.scripts.script import (
        FinishStep,
        OpenStep,
        SessionNamespaceMismatchError,
        Step,
        run_script,
    )

    other = {**NS, "principal": "bob"}
    path = write_steps(
        tmp_path / "rebind.jsonl",
        [
            {"op": "open", "session": "s1", "namespace": NS},
            {"op": "turn", "session": "s1", "turn": 1, "transcript": "user: hi"},
            {"op": "open", "session": "s1", "namespace": other},
            {"op": "finish", "session": "s1"},
        ],
    )
    store = tmp_path / "store"
    result = runner.invoke(app, ["run", str(path), "--store", str(store)])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.output
    assert "SessionNamespaceMismatchError: line 3" in result.stderr
    assert "acme/alice/assistant" in result.stderr and "acme/bob/assistant" in result.stderr
    assert not store.exists()  # refused before anything was written
    # Steps given to run_script directly (no parse_script) are refused at the step.
    steps: list[tuple[int, Step]] = [
        (1, OpenStep(session="s1", namespace=Namespace(**NS))),
        (2, OpenStep(session="s1", namespace=Namespace(**other))),
        (3, FinishStep(session="s1")),
    ]
    with MemoryEngine.open(tmp_path / "direct") as engine:
        with pytest.raises(SessionNamespaceMismatchError) as caught:
            run_script(engine, steps)
    assert caught.value.reason_code == "session_namespace_mismatch" and caught.value.line == 2


def test_overlapping_runs_count_each_turn_written_once(tmp_path: Path) -> None:
    """Two runs of one script at once: each says what it wrote and what it found written,
    and every turn is written (and counted observed) by exactly one of them."""
    import subprocess
    import sys

    turns = 150
    path = script(tmp_path / "many.jsonl", turns)
    store = tmp_path / "store"
    command = [sys.executable, "-m", "memory_ledger.replay", "run", str(path)]
    command += ["--store", str(store), "--json", "--no-sync"]
    runs = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=tmp_path)
        for _ in range(2)
    ]
    reports = []
    for run in runs:
        stdout, stderr = run.communicate(timeout=300)
        assert run.returncode == 0, stderr.decode()
        reports.append(json.loads(stdout))
    for report in reports:
        assert report["turns_observed"] + report["turns_already_recorded"] == turns
    assert sum(r["turns_observed"] for r in reports) == turns
