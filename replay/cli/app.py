"""The ``memory-ledger`` command line (typer + rich).

Commands, by module: ``convert-locomo`` and ``run`` (:mod:`.cli_run`), ``recall``
(:mod:`.cli_recall`), ``events``, ``verify``, ``stats`` and ``explain``
(:mod:`.cli_audit`), ``replay``, ``as-of``, ``export``, ``backup``, ``restore`` and
``migrate`` (:mod:`.cli_replay`), ``forget`` (:mod:`.forget_cli`), ``erase`` and ``keys``
(:mod:`.erase_cli`), ``ui`` (:mod:`.ui`); what they share is in :mod:`.cli_common`. Every
command that reads a store takes ``--store DIR`` (default: ``store_dir`` of the settings file) and
``--ledger URL`` (a PostgreSQL ledger shared by several hosts; default: ``ledger`` of the
settings file, else the LMDB ledger in the store folder) and ``--master-key-file FILE`` (the
master key of an encrypted store; default: ``master_key_file`` of the settings file, else
``MEMORY_LEDGER_MASTER_KEY_FILE``);
``--json`` prints machine-readable output. Settings come from ``--config FILE``, else
``./memory-ledger.toml`` when it exists (the CLI looks in the current directory; the
library reads only a file it is given). Exit status: 0 ok, 1 a check failed (``verify``,
``replay --check``, ``restore``) or a turn's extraction failed (``run``), 2 any error (one
line on stderr, never a traceback); a closed output pipe (``| head``) ends quietly with 0
(:class:`~.cli_common.PipeAwareGroup`). Progress bars appear only on a terminal (stderr).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from memory_ledger.commands.config import CONFIG_FILE
from memory_ledger.replay.cli.audit import events, explain_command, stats_command, verify
from memory_ledger.replay.cli.common import NegativeNumberArguments, PipeAwareGroup, out
from memory_ledger.replay.cli.erase import register as register_erase
from memory_ledger.replay.cli.forget import register as register_forget
from memory_ledger.replay.cli.imports import register as register_imports
from memory_ledger.replay.cli.langgraph import register as register_langgraph
from memory_ledger.replay.cli.mcp import register as register_mcp_commands
from memory_ledger.replay.cli.recall import recall
from memory_ledger.replay.cli.receipts import register as register_receipts
from memory_ledger.replay.cli.replay import (
    as_of_command,
    backup_command,
    export_command,
    migrate_command,
    replay_command,
    restore_command,
)
from memory_ledger.replay.cli.run import convert_locomo, run
from memory_ledger.replay.cli.ui import register as register_ui

__all__ = ["COMMANDS", "app", "main"]

app = typer.Typer(
    name="memory-ledger",
    cls=PipeAwareGroup,
    no_args_is_help=True,
    add_completion=False,
)
"""The ``memory-ledger`` typer app: every command below, and the groups ``keys`` and
``langgraph``; the CLI reference of the docs site is written from its command tree."""
COMMANDS = (
    ("convert-locomo", convert_locomo),
    ("run", run),
    ("recall", recall),
    ("events", events),
    ("verify", verify),
    ("replay", replay_command),
    ("as-of", as_of_command),
    ("explain", explain_command),
    ("export", export_command),
    ("backup", backup_command),
    ("restore", restore_command),
    ("migrate", migrate_command),
    ("stats", stats_command),
)
"""Every command by name, in the order ``--help`` lists them."""
for _name, _command in COMMANDS:
    # ``as-of -1``: the negative number is the position (refused in its own words).
    _cls = NegativeNumberArguments if _name == "as-of" else None
    app.command(_name, cls=_cls)(_command)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        out.print(f"memory-ledger {version('memory-ledger')}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            metavar="FILE",
            envvar="MEMORY_LEDGER_CONFIG",
            help=f"Settings file (TOML, its memory table). Default: ./{CONFIG_FILE} when it "
            "exists in the current directory (the CLI looks there; the library reads only a file "
            "it is given). Its recall_k and store_dir are the defaults of -k and --store.",
            show_default=False,
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Event-sourced long-term memory for AI agents: ledger, projections, replay.

    Settings come from --config FILE, else from memory-ledger.toml in the current directory
    when it exists (the CLI looks there). Exit status: 0 ok, 1 a check failed or a turn's
    extraction is pending, 2 an error (one line on stderr, never a traceback).
    """
    ctx.obj = config
    library = logging.getLogger("memory_ledger")
    if not any(isinstance(h, logging.NullHandler) for h in library.handlers):
        # The commands report what matters once, in their own words (e.g. recall's
        # fallback to lexical); the library's retry warnings would repeat it every few s.
        library.addHandler(logging.NullHandler())


register_mcp_commands(app)
register_forget(app)  # ``forget --all`` (replay/cli/forget.py)
register_erase(app)  # ``erase`` and ``keys new|rotate`` (replay/cli/erase.py)
register_receipts(app)  # ``verify-receipt`` (replay/cli/receipts.py)
register_langgraph(app)  # ``langgraph import|export`` (replay/cli/langgraph.py)
register_ui(app)  # ``ui``: the read-only debugger in the browser (replay/ui/)
register_imports(app)  # ``import mem0|interchange`` (replay/cli/imports.py)


def main() -> None:
    """Console-script entry point. A closed output pipe (``| head``) ends quietly."""
    try:
        app()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(0)
