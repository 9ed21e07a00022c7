"""``memory-ledger forget --all``: bulk erasure of one namespace from the command line.

Registered on the CLI app by :func:`register` (``replay/cli.py`` calls it), so the command
lives beside its own option checks::

    memory-ledger forget --all --tenant T --principal P --scope-id S --store DIR [--json]

Forgets every retrievable memory of exactly that namespace in one command
(:meth:`MemoryEngine.forget_all`) and prints how many. All three namespace options are
required and must be non-empty (a missing or empty part is refused, never read as "all");
``--all`` must be given explicitly (the only mode so far: forgetting one memory is the
Python API's ``forget``). Exit status 0 done, 2 a user error (one line on stderr).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import msgspec
import typer
from eventsourcing.persistence import PersistenceError
from rich.console import Console
from rich.markup import escape

from memory_ledger.commands.config import load_config, load_config_from
from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.ledger.ids import InvalidNamespaceError, Namespace

__all__ = ["forget", "register"]

_out = Console()
_err = Console(stderr=True)


def forget(
    store: Annotated[
        Path, typer.Option("--store", help="Store folder (LMDB ledger + DuckDB projections).")
    ],
    tenant: Annotated[str, typer.Option("--tenant", help="Namespace tenant (required).")],
    principal: Annotated[str, typer.Option("--principal", help="Namespace principal (required).")],
    scope_id: Annotated[str, typer.Option("--scope-id", help="Namespace scope id (required).")],
    everything: Annotated[
        bool,
        typer.Option("--all", help="Forget every retrievable memory of the namespace."),
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Forget every memory of ONE namespace (--all), recorded as one auditable command."""
    try:
        if not everything:
            msg = "say --all to forget every memory of the namespace (nothing else is supported)"
            raise ValueError(msg)
        namespace = Namespace(tenant, principal, scope_id).validated()
        config = load_config_from(load_config(), embeddings="none")
        with MemoryEngine.open(store, create=False, config=config) as engine:
            count = engine.forget_all(namespace)
            head = engine.head
    except (MemoryLedgerError, InvalidNamespaceError, PersistenceError, ValueError, OSError) as e:
        message = escape(" ".join(str(e).splitlines()))
        _err.print(
            f"[bold red]error:[/] {type(e).__name__}: {message}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(2) from None
    if as_json:
        payload = {"namespace": msgspec.to_builtins(namespace), "forgotten": count, "head": head}
        _out.print(msgspec.json.encode(payload).decode(), highlight=False, soft_wrap=True)
        return
    _out.print(
        f"forgot {count} memories of {namespace.tenant}/{namespace.principal}/"
        f"{namespace.scope_id} (ledger position {head})",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    """Add the ``forget`` command to the ``memory-ledger`` app."""
    app.command("forget")(forget)
