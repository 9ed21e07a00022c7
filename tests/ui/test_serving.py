"""Serving the debugger: an address other than this machine's own warns that the token
crosses the network in clear (issue 34 item 6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine
from memory_ledger.replay.cli.app import app
from memory_ledger.replay.ui import server
from tests.ui.ui_store import BOB


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.10", "::1", "localhost", "ui.localhost"])
def test_a_loopback_host_needs_no_warning(host: str) -> None:
    assert server.clear_text_warning(host) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.20", "10.0.0.1", "example.org"])
def test_any_other_host_warns_that_the_token_crosses_in_clear(host: str) -> None:
    warning = server.clear_text_warning(host)
    assert warning is not None and host in warning
    assert "token" in warning and "plain HTTP" in warning


def run_ui(monkeypatch: pytest.MonkeyPatch, store: Path, *options: str) -> Any:
    """``memory-ledger ui`` with the server replaced by one that only announces itself."""
    served: list[str] = []

    def announce(engine: object, *, host: str, port: int | None, on_ready: Any) -> None:
        served.append(host)
        on_ready(f"http://{host}:8765/?token=t")

    monkeypatch.setattr(server, "serve", announce)
    result = CliRunner().invoke(app, ["ui", "--store", str(store), *options])
    assert result.exit_code == 0, result.output
    assert served == [options[-1] if options else "127.0.0.1"]
    return result


def test_the_cli_warns_on_stderr_for_a_network_host(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with MemoryEngine.open(tmp_path / "store") as engine:
        engine.remember(BOB, "Bob likes tea.")
    local = run_ui(monkeypatch, tmp_path / "store")
    assert local.stderr == "" and "127.0.0.1:8765" in local.stdout
    wide = run_ui(monkeypatch, tmp_path / "store", "--host", "0.0.0.0")
    assert "0.0.0.0:8765" in wide.stdout and "warning" not in wide.stdout
    assert "warning" in wide.stderr and "in clear" in wide.stderr
