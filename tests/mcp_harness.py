"""Run ``memory-ledger mcp`` as a child process and talk to it with the SDK's ClientSession
(over stdio, or over streamable HTTP on 127.0.0.1 with a bearer token)."""

from __future__ import annotations

import json
import os
import queue
import socket
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation, InitializeResult

from memory_ledger.ledger.ids import Namespace

CLIENT = Implementation(name="pytest-agent", version="1.0")


def child_env() -> dict[str, str]:
    """The environment of a child server: this one's (a copy; nothing is set here)."""
    return dict(os.environ)


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "memory_ledger.replay", *args]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def stdio_command(store: Path, namespace: Namespace, *extra: str) -> list[str]:
    """The command line of ``memory-ledger mcp`` over stdio on ``store`` (no embeddings)."""
    return cli(
        "mcp",
        "--store",
        str(store),
        "--tenant",
        namespace.tenant,
        "--principal",
        namespace.principal,
        "--scope-id",
        namespace.scope_id,
        "--embeddings",
        "none",
        *extra,
    )


@asynccontextmanager
async def stdio_session(
    store: Path, namespace: Namespace, *extra: str, client: Implementation = CLIENT
) -> AsyncIterator[ClientSession]:
    """An initialized ClientSession with ``memory-ledger mcp`` over stdio (a child process);
    ``extra``: further command-line arguments (``--ledger URL``, ...); ``client``: the name
    and version the client sends when it connects."""
    params = StdioServerParameters(
        command=sys.executable,
        args=stdio_command(store, namespace, *extra)[1:],
        env=child_env(),
    )
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write, client_info=client) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def inprocess_client(
    store: Path, namespace: Namespace, client: Implementation = CLIENT
) -> AsyncIterator[Client]:
    """An initialized SDK ``Client`` connected in-process (memory streams, no child process)
    to a :class:`~memory_ledger.replay.mcp.server.MemoryMcpServer` serving ``namespace`` of
    ``store``: the same middleware and tools as ``memory-ledger mcp`` over stdio, faster."""
    from memory_ledger.commands.aio import AsyncMemoryEngine
    from memory_ledger.replay.mcp.server import MemoryMcpServer

    async with AsyncMemoryEngine.open(store) as memory:
        server = MemoryMcpServer(memory, namespace=namespace)
        try:
            async with Client(server.mcp, client_info=client) as session:
                yield session
        finally:
            await server.aclose()


@asynccontextmanager
async def http_session(
    url: str,
    token: str,
    on_initialize: Callable[[InitializeResult], None] | None = None,
    client: Implementation = CLIENT,
) -> AsyncIterator[ClientSession]:
    """An initialized ClientSession over streamable HTTP presenting ``token``;
    ``on_initialize`` sees the server's initialize result; ``client``: the name and
    version the client sends when it connects."""
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, client_info=client) as session:
                result = await session.initialize()
                if on_initialize is not None:
                    on_initialize(result)
                yield session


class HttpServer:
    """``memory-ledger mcp --http 127.0.0.1:PORT`` in a child process; ``stderr`` collects
    everything it logged."""

    def __init__(self, store: Path, tokens: Path, *extra: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.stderr: list[str] = []
        self.ready = threading.Event()
        self.process = subprocess.Popen(
            cli(
                "mcp",
                "--store",
                str(store),
                "--http",
                f"127.0.0.1:{self.port}",
                "--tokens",
                str(tokens),
                *extra,
            ),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.stderr.append(line)
            if "serving" in line:
                self.ready.set()
        self.ready.set()  # exited: wake the waiter (it checks the process)

    def wait_ready(self, timeout: float = 120) -> None:
        self.ready.wait(timeout)
        if self.process.poll() is not None or not self.ready.is_set():
            raise RuntimeError("the MCP server did not start: " + "".join(self.stderr)[-2000:])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self.reader.join(10)


class RawStdio:
    """``memory-ledger mcp`` over stdio driven with raw bytes (no SDK client): ``send`` writes
    one line, ``reply`` waits for the next line the server writes (parsed JSON)."""

    def __init__(self, store: Path, namespace: Namespace) -> None:
        self.process = subprocess.Popen(
            stdio_command(store, namespace),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=child_env(),
        )
        self.replies: queue.Queue[bytes] = queue.Queue()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.replies.put(line)

    def send(self, line: bytes | dict[str, object]) -> None:
        """Write ``line`` (bytes as they are, a dict as JSON) and a newline."""
        raw = line if isinstance(line, bytes) else json.dumps(line).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(raw + b"\n")
        self.process.stdin.flush()

    def reply(self, timeout: float = 60) -> dict[str, object]:
        """The next message the server writes; raises ``queue.Empty`` after ``timeout``."""
        message: dict[str, object] = json.loads(self.replies.get(timeout=timeout))
        return message

    def initialize(self, client: str = "raw-agent") -> dict[str, object]:
        """The MCP handshake (initialize, then notifications/initialized); its result."""
        self.send(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": client, "version": "1"},
                },
            }
        )
        answer = self.reply()
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return answer

    def close(self) -> None:
        """Close stdin (the server exits) and wait for the process."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        self.reader.join(10)
