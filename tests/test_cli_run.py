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
from memory_ledger.replay import cli_common
from memory_ledger.replay.cli import app
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
    assert second["turns_skipped"] == 5 and second["rejections"] == []


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
    assert retried["turns_observed"] == 2 and retried["memories_activated"] == 2
    assert all(r.headers.get("authorization") == f"Bearer {API_KEY}" for r in server.requests)


def test_model_options_come_together(tmp_path: Path) -> None:
    path = script(tmp_path / "chat.jsonl", 1)
    result = runner.invoke(
        app, ["run", str(path), "--store", str(tmp_path / "s"), "--llm-url", dead_url()]
    )
    assert result.exit_code == 2 and "--llm-model" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
