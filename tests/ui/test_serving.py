"""Serving the debugger: an address other than this machine's own warns that the token
crosses the network in clear (issue 34 item 6); an address it cannot listen on is refused
in one typed line with exit status 2 before anything starts (newcomer finding F8)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
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

    def announce(engine: object, *, host: str, on_ready: Any, sock: socket.socket) -> None:
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


@pytest.fixture
def taken() -> Iterator[int]:
    """A port another socket listens on (127.0.0.1)."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield int(other.getsockname()[1])


def refused(store: Path, *options: str) -> str:
    """``memory-ledger ui`` with ``options``: exit status 2, one line on stderr, returned."""
    result = CliRunner().invoke(app, ["ui", "--store", str(store), *options])
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    return str(result.stderr)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["--port", "99999"], "ListenAddressError: --port must be a TCP port from 1 to 65535"),
        (["--port", "-1"], "ListenAddressError: --port must be a TCP port from 1 to 65535"),
        (["--port", "65536"], "ListenAddressError: --port must be a TCP port from 1 to 65535"),
        (["--host", "999.1.1.1"], "ListenAddressError: --host '999.1.1.1' is neither"),
        (["--host", "bad host name"], "ListenAddressError: --host 'bad host name' is neither"),
    ],
)
def test_an_address_it_cannot_listen_on_is_refused_in_words(
    tmp_path: Path, options: list[str], said: str
) -> None:
    with MemoryEngine.open(tmp_path / "store") as engine:
        engine.remember(BOB, "Bob likes tea.")
    assert refused(tmp_path / "store", *options).startswith(f"error: {said}")


def test_a_port_in_use_is_a_typed_error_with_status_2(tmp_path: Path, taken: int) -> None:
    with MemoryEngine.open(tmp_path / "store") as engine:
        engine.remember(BOB, "Bob likes tea.")
    line = refused(tmp_path / "store", "--port", str(taken))
    assert line == (
        f"error: ListenError: cannot listen on 127.0.0.1:{taken}: the port is in use "
        "(another server listens there)\n"
    )


def test_listen_socket_reasons(taken: int) -> None:
    from memory_ledger.ledger.errors import ListenAddressError, ListenError
    from memory_ledger.replay.cli.listen import listen_socket

    names = {"host_option": "--host", "port_option": "--port"}
    with pytest.raises(ListenError) as in_use:
        listen_socket("127.0.0.1", taken, **names)
    assert in_use.value.reason_code == "address_in_use"
    with pytest.raises(ListenAddressError) as bad_port:
        listen_socket("127.0.0.1", 70000, **names)
    assert (bad_port.value.parameter, bad_port.value.reason_code) == (
        "--port",
        "invalid_listen_address",
    )
    with pytest.raises(ListenAddressError) as bad_host:
        listen_socket("999.1.1.1", 0, **names)
    assert bad_host.value.parameter == "--host"
    with listen_socket("127.0.0.1", 0, **names) as free:  # 0: a free port, bound
        assert free.getsockname()[1] > 0


def test_the_ui_serves_on_the_socket_it_bound(tmp_path: Path) -> None:
    """``memory-ledger ui --port 0`` announces the port of the socket it bound and serves
    there (uvicorn serves on that socket: no second bind)."""
    import httpx

    from tests.ui.ui_process import start_ui

    with MemoryEngine.open(tmp_path / "store") as engine:
        engine.remember(BOB, "Bob likes tea.")
    child, url = start_ui("--store", str(tmp_path / "store"))
    try:
        assert url.startswith("http://127.0.0.1:") and ":0/" not in url
        with httpx.Client(follow_redirects=True, timeout=60) as browser:  # keeps the cookie
            page = browser.get(url)
        assert page.status_code == 200 and "acme" in page.text
    finally:
        child.terminate()
        child.communicate(timeout=60)
