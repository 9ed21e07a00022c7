"""``memory-ledger ui``: the local, read-only memory debugger in the browser
(:mod:`memory_ledger.replay.ui`). Starlette and uvicorn are imported only when the command
runs, so ``--help`` stays as fast as the rest of the CLI."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from memory_ledger.replay.cli.common import (
    LedgerOption,
    MasterKeyFileOption,
    StoreOption,
    audit_config,
    store_folder,
    user_errors,
)

__all__ = ["UI_EXTRA", "register", "ui_command"]

UI_EXTRA = "pip install 'memory-ledger[ui]'"
"""The command that installs the debugger's web server."""

_UI_MODULES = ("starlette", "uvicorn", "jinja2", "markupsafe")


def ui_command(
    ctx: typer.Context,
    store: StoreOption = None,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help=(
                "Address to listen on (default: this machine only). Any other address warns: "
                "the token crosses the network in clear (plain HTTP)."
            ),
            metavar="HOST",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", help="TCP port (default 0: a free one).", metavar="PORT")
    ] = 0,
    as_json: Annotated[
        bool, typer.Option("--json", help='Announce {"url", "store"} as one JSON line on stdout.')
    ] = False,
) -> None:
    """Browse a store in the browser, read-only: namespaces, timelines, memories and their
    lineage, time travel, recall explained, integrity. Prints the address (with its token)."""
    with user_errors():
        try:
            from memory_ledger.replay.ui import server
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] in _UI_MODULES:
                msg = f"the debugger needs the ui extra: {UI_EXTRA}"
                raise RuntimeError(msg) from None
            raise
        from memory_ledger.replay.cli.listen import listen_socket, stopped_by_sigterm

        config = audit_config(ctx)
        folder = store_folder(store, config)
        # Bound first: a bad --host or --port is refused in words before the store opens.
        sock = listen_socket(host, port, host_option="--host", port_option="--port")
        warning = server.clear_text_warning(host)
        if warning is not None:
            print(f"memory-ledger ui: {warning}", file=sys.stderr, flush=True)
        try:
            engine = server.open_read_only(folder, ledger=config.ledger or None, config=config)
        except BaseException:
            sock.close()
            raise

        def ready(url: str) -> None:
            if as_json:
                line = json.dumps({"url": url, "store": str(folder)})
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
            else:
                print(f"memory-ledger ui: {folder} (read-only) at {url}", flush=True)

        from memory_ledger.replay.ui.log import logged_to

        try:
            with sock, logged_to(sys.stderr), stopped_by_sigterm():  # closed on SIGTERM too
                server.serve(engine, host=host, on_ready=ready, sock=sock)
        finally:
            engine.close()


def register(app: typer.Typer) -> None:
    """Add ``ui`` to the ``memory-ledger`` command line."""
    app.command("ui")(ui_command)
