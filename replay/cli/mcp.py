"""The ``memory-ledger mcp`` and ``memory-ledger mcp-token`` commands.

``mcp`` serves one store to MCP clients (:mod:`memory_ledger.replay.mcp.server`): over
stdio by default, for one namespace fixed by ``--tenant/--principal/--scope-id``; over
streamable HTTP with ``--http HOST:PORT``, where each bearer token maps to one namespace
(``--tokens FILE``, or the ``[mcp]`` section of the configuration file). ``mcp-token`` makes
a token and prints the entry to add. The SDK is imported only when a command runs, so the
rest of the CLI starts as fast without the ``mcp`` extra.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from memory_ledger.commands.config import (
    CONFIG_FILE,
    MemoryConfig,
    load_config,
    load_config_from,
)
from memory_ledger.ledger.ids import Namespace
from memory_ledger.replay.cli.common import Embeddings, LedgerOption, describe_error
from memory_ledger.replay.mcp.tokens import TokenRegistry, new_token, token_entry_toml

__all__ = [
    "MCP_EXTRA",
    "mcp_command",
    "mcp_token_command",
    "refuse_initialize",
    "register",
    "startup_error_line",
]


_MCP_MODULES = ("mcp", "mcp_types", "uvicorn", "starlette")

MCP_EXTRA = "pip install 'memory-ledger[mcp]'"
"""The command that installs the MCP server's SDK."""


def _leaf(error: BaseException) -> BaseException:
    """The one error inside nested single-error groups (an anyio task group's), else
    ``error`` itself."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return error


def startup_error_line(error: BaseException) -> str:
    """What went wrong, in one line without a traceback (secret shapes redacted): a missing
    SDK names the ``mcp`` extra, anything else is :func:`describe_error`'s line."""
    error = _leaf(error)
    if isinstance(error, ModuleNotFoundError) and (error.name or "").split(".")[0] in (
        _MCP_MODULES
    ):
        return f"the MCP server needs the mcp extra: {MCP_EXTRA}"
    return describe_error(error)


@contextmanager
def _one_line_errors() -> Iterator[None]:
    """Any error: one line on stderr (flushed), exit status 2, never a traceback (an MCP
    client that started the server over stdio shows or logs its stderr).
    ``MEMORY_LEDGER_DEBUG=1`` lets the error through with its traceback instead."""
    try:
        yield
    except Exception as e:
        if isinstance(e, typer.Exit | typer.Abort) or os.environ.get("MEMORY_LEDGER_DEBUG"):
            raise
        print(f"error: {startup_error_line(e)}", file=sys.stderr, flush=True)
        raise typer.Exit(2) from None


def refuse_initialize(message: str, *, wait: float = 5.0) -> bool:
    """Answer an MCP client's first request on stdin (its ``initialize``) with a JSON-RPC
    error carrying ``message`` on stdout, so the client shows why the server did not start
    rather than a closed pipe. Waits at most ``wait`` seconds for the request; does nothing
    on a terminal, or when stdin cannot be waited on. True when an answer was written."""
    stdin = sys.stdin
    try:
        if stdin is None or stdin.isatty():
            return False
        ready, _, _ = select.select([stdin], [], [], wait)
        if not ready:
            return False
        request = json.loads(stdin.readline())
    except (OSError, ValueError, RecursionError):  # no descriptor, closed, not JSON
        return False
    if not isinstance(request, dict) or request.get("id") is None:
        return False
    reply = {
        "jsonrpc": "2.0",
        "id": request["id"],
        "error": {"code": -32603, "message": f"memory-ledger mcp did not start: {message}"},
    }
    try:
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    except (OSError, ValueError):
        return False
    return True


@contextmanager
def _refusing_initialize() -> Iterator[None]:
    """Around what a stdio server does before it serves (read its options and configuration,
    check the namespace, open the store): an error is also the answer to the client's
    ``initialize`` (:func:`refuse_initialize`, with :func:`startup_error_line`'s reason),
    then raised on (``_one_line_errors`` writes it to stderr and exits with status 2). Every
    start-up refusal is answered so, not only a store that cannot be opened."""
    try:
        yield
    except Exception as e:
        if not isinstance(e, typer.Exit | typer.Abort):
            refuse_initialize(startup_error_line(e))
        raise


def _address(text: str) -> tuple[str, int]:
    """HOST and PORT of ``--http HOST:PORT`` (an IPv6 host in brackets).

    :raises ListenAddressError: not HOST:PORT, or a port outside 1-65535.
    """
    from memory_ledger.ledger.errors import ListenAddressError
    from memory_ledger.replay.cli.listen import check_port

    host, _, port = text.rpartition(":")
    host = host.strip("[]")
    if not host or re.fullmatch(r"[0-9]{1,5}", port) is None:
        msg = f"--http must be HOST:PORT (e.g. 127.0.0.1:8765), got {text!r}"
        raise ListenAddressError(msg, parameter="--http")
    return host, check_port(int(port), "--http")


def mcp_command(
    ctx: typer.Context,
    store: Annotated[
        Path,
        typer.Option(
            "--store",
            help="Store folder: its LMDB ledger (unless --ledger names one) and this host's "
            "DuckDB projections.",
        ),
    ],
    ledger: LedgerOption = None,
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Namespace tenant (stdio only).")
    ] = None,
    principal: Annotated[
        str | None, typer.Option("--principal", help="Namespace principal (stdio only).")
    ] = None,
    scope_id: Annotated[
        str | None, typer.Option("--scope-id", help="Namespace scope id (stdio only).")
    ] = None,
    http: Annotated[
        str | None,
        typer.Option(
            "--http",
            metavar="HOST:PORT",
            help="Serve streamable HTTP at http://HOST:PORT/mcp instead of stdio; every "
            "request needs a bearer token (see mcp-token).",
        ),
    ] = None,
    tokens: Annotated[
        Path | None,
        typer.Option(
            "--tokens",
            help="TOML file of \\[\\[mcp.token]] (or \\[\\[token]]) entries for --http (default: "
            "the \\[mcp] section of --config or ./memory-ledger.toml).",
        ),
    ] = None,
    config_file: Annotated[
        Path | None,
        typer.Option(
            "--config", help="Configuration file (default: ./memory-ledger.toml if present)."
        ),
    ] = None,
    master_key_file: Annotated[
        Path | None,
        typer.Option(
            "--master-key-file",
            metavar="FILE",
            help="Master key file of an encrypted store (default: master_key_file of the "
            "configuration, else MEMORY_LEDGER_MASTER_KEY_FILE).",
            show_default=False,
        ),
    ] = None,
    embeddings: Annotated[
        Embeddings,
        typer.Option(
            "--embeddings",
            help="config: what the configuration says; none: lexical recall; local: hybrid "
            "recall with the bundled MiniLM (the embeddings extra); lite: hybrid recall with "
            "the bundled multilingual e5 without PyTorch (the embeddings-lite extra); "
            "loaded once.",
        ),
    ] = Embeddings.config,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="With --http: announce the URL on stderr as one JSON line."),
    ] = False,
) -> None:
    """Serve this store over the Model Context Protocol (stdio, or streamable HTTP)."""
    import asyncio

    with _one_line_errors():
        # Over stdio a client waits for its initialize answer: a refusal is that answer too.
        starting = _refusing_initialize() if http is None else contextlib.nullcontext()
        with starting:
            if config_file is None and isinstance(ctx.obj, Path):
                config_file = ctx.obj  # memory-ledger --config FILE mcp ...
            config = load_config(config_file)
            if embeddings is not Embeddings.config:
                config = load_config_from(config, embeddings=embeddings.value)
            if master_key_file is not None:
                config = load_config_from(config, master_key_file=str(master_key_file))
            if ledger:
                config = load_config_from(config, ledger=ledger)
            parts = (tenant, principal, scope_id)
            if http is None:
                if None in parts:
                    msg = "stdio serves one namespace: give --tenant, --principal and --scope-id"
                    raise ValueError(msg)
                namespace = Namespace(*(p or "" for p in parts)).validated()
                from memory_ledger.commands.secrets import contains_secret

                for label, part in zip(("tenant", "principal", "scope_id"), parts, strict=True):
                    if part and contains_secret(part):
                        msg = f"--{label.replace('_', '-')} holds a secret-shaped value"
                        raise ValueError(msg)
        if http is None:
            asyncio.run(_serve_stdio(store, namespace, config))
            return
        if any(p is not None for p in parts):
            msg = "--http takes the namespace from each request's token, not from --tenant etc."
            raise ValueError(msg)
        from memory_ledger.replay.cli.listen import listen_socket, stopped_by_sigterm

        host, port = _address(http)
        source = tokens or config_file or Path(CONFIG_FILE)
        registry = TokenRegistry.from_toml(source)
        sock = listen_socket(host, port, host_option="--http", port_option="--http")
        with sock, stopped_by_sigterm():  # the store closed on SIGTERM too
            asyncio.run(_serve_http(store, host, sock, registry, config, as_json))


async def _serve_stdio(store: Path, namespace: Namespace, config: MemoryConfig) -> None:
    async with contextlib.AsyncExitStack() as stack:
        with _refusing_initialize():  # the client is waiting for its initialize answer
            from memory_ledger.commands.aio.engine import AsyncMemoryEngine
            from memory_ledger.replay.mcp.server import MemoryMcpServer

            memory = await stack.enter_async_context(AsyncMemoryEngine.open(store, config=config))
            server = MemoryMcpServer(memory, namespace=namespace)
        await server.serve_stdio()


async def _serve_http(
    store: Path,
    host: str,
    sock: socket.socket,
    registry: TokenRegistry,
    config: MemoryConfig,
    as_json: bool,
) -> None:
    from memory_ledger.commands.aio.engine import AsyncMemoryEngine
    from memory_ledger.replay.mcp.server import MemoryMcpServer

    def ready(url: str) -> None:
        count = len(registry.entries)
        if as_json:
            line = json.dumps({"serving": str(store), "url": url, "tokens": count})
        else:
            line = f"memory-ledger mcp: serving {store} at {url} ({count} token(s))"
        print(line, file=sys.stderr, flush=True)

    port = int(sock.getsockname()[1])
    async with AsyncMemoryEngine.open(store, config=config) as memory:
        server = MemoryMcpServer(memory, tokens=registry)
        await server.serve_http(host, port, on_ready=ready, sock=sock)


def mcp_token_command(
    name: Annotated[
        str, typer.Argument(metavar="NAME", help="Who holds the token (e.g. alice-laptop).")
    ],
    tenant: Annotated[str, typer.Option("--tenant", help="Namespace tenant.")],
    principal: Annotated[str, typer.Option("--principal", help="Namespace principal.")],
    scope_id: Annotated[str, typer.Option("--scope-id", help="Namespace scope id.")],
    as_json: Annotated[
        bool, typer.Option("--json", help='Print {"name", "token", "entry"} as JSON on stdout.')
    ] = False,
) -> None:
    r"""Make a bearer token for `mcp --http`: prints the token once (stderr) and the
    \[\[mcp.token]] entry holding only its sha256 (stdout, to append to the token file)."""
    with _one_line_errors():
        token = new_token()
        entry = token_entry_toml(name, token, Namespace(tenant, principal, scope_id))
    if as_json:
        sys.stdout.write(json.dumps({"name": name, "token": token, "entry": entry}) + "\n")
        return
    print(f"token for {name} (shown once, store it in the client): {token}", file=sys.stderr)
    sys.stdout.write(entry)


def register(app: typer.Typer) -> None:
    """Add ``mcp`` and ``mcp-token`` to the ``memory-ledger`` command line."""
    app.command("mcp")(mcp_command)
    app.command("mcp-token")(mcp_token_command)
