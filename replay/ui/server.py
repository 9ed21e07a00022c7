"""Opening a store for the debugger and serving it with uvicorn."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memory_ledger.commands.config import MemoryConfig
    from memory_ledger.commands.engine.memory_engine import MemoryEngine

__all__ = ["DEFAULT_HOST", "clear_text_warning", "free_port", "open_read_only", "serve"]

DEFAULT_HOST = "127.0.0.1"
"""Only this machine can connect unless told otherwise."""


def clear_text_warning(host: str) -> str | None:
    """What to tell the user before serving on ``host``: None for a loopback address
    (``127.0.0.0/8``, ``::1``, ``localhost`` and names under ``.localhost``, which RFC 6761
    keeps on this machine), else a warning that the debugger speaks plain HTTP, so the
    token (in the printed address, then in a cookie) and every page cross the network in
    clear to anyone who can watch it. A host name other than those may resolve to any
    address, so it warns too (nothing is looked up).
    """
    name = host.strip().strip("[]").rstrip(".").lower()
    try:
        if ipaddress.ip_address(name).is_loopback:
            return None
    except ValueError:
        if name == "localhost" or name.endswith(".localhost"):
            return None
    return (
        f"warning: --host {host} is not this machine's loopback address: the debugger "
        "serves plain HTTP, so its token and every page it shows cross the network in "
        "clear; anyone who can read that traffic can browse this store. Prefer the default "
        "(127.0.0.1) and an SSH tunnel (ssh -L PORT:127.0.0.1:PORT host)."
    )


def open_read_only(
    store: Path, *, ledger: str | None = None, config: MemoryConfig | None = None
) -> MemoryEngine:
    """The existing store ``store`` opened read-only (``create=False, read_only=True``):
    the ledger with LMDB's read-only flag (or a PostgreSQL ledger that is only read), lexical
    recall only, as the CLI's audit commands open it. Commands on it raise
    ``LedgerReadOnlyError``; the debugger calls none.

    :raises StoreUnavailableError: no store there.
    """
    from memory_ledger.commands.config import MemoryConfig, load_config_from
    from memory_ledger.commands.engine.memory_engine import MemoryEngine

    config = load_config_from(config or MemoryConfig(), embeddings="none")
    return MemoryEngine.open(
        store, ledger=ledger, create=False, read_only=True, config=config, follow=False
    )


def free_port(host: str = DEFAULT_HOST) -> int:
    """A TCP port free on ``host`` now (the system picks it)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


def serve(
    engine: MemoryEngine,
    *,
    host: str = DEFAULT_HOST,
    port: int | None = None,
    token: str | None = None,
    on_ready: Callable[[str], None] | None = None,
    sock: socket.socket | None = None,
) -> None:
    """Serve the debugger over ``engine`` until interrupted; ``on_ready(url)`` gets the
    address with its token once the socket listens. The engine stays open (its opener
    closes it). It speaks plain HTTP: for a ``host`` other than loopback, tell the user
    :func:`clear_text_warning` first (``memory-ledger ui`` prints it on stderr).

    :param port: None or 0: a free port.
    :param token: None: a fresh random one.
    :param sock: a socket already bound (``memory-ledger ui`` binds it first, refusing a bad
        address in words): served on instead of ``port`` (whose number it then gives).
    """
    import uvicorn

    from memory_ledger.replay.ui.app import create_app
    from memory_ledger.replay.ui.security import new_token
    from memory_ledger.replay.ui.state import UiState

    token = token or new_token()
    if sock is not None:
        port = int(sock.getsockname()[1])
    port = port or free_port(host)
    state = UiState(engine, token)
    state.warm()  # each namespace's recall index, for the first recall as of a point
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}/?token={token}"

    class _Server(uvicorn.Server):
        async def startup(self, sockets: object = None) -> None:
            await super().startup(sockets)  # type: ignore[arg-type]
            if on_ready is not None:
                on_ready(url)

    config = uvicorn.Config(
        create_app(state),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        server_header=False,
    )
    try:
        _Server(config).run(sockets=None if sock is None else [sock])
    finally:
        state.close()
