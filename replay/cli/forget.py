"""``memory-ledger forget --all``: bulk erasure of one namespace from the command line.

Registered on the CLI app by :func:`register` (``replay/cli/app.py`` calls it)::

    memory-ledger forget --all --tenant T --principal P --scope-id S [--store DIR] [--json]

Forgets every retrievable memory of exactly that namespace in one command
(:meth:`MemoryEngine.forget_all`, issue 13 item 6) and prints how many. All three namespace
options are required and must be non-empty (a missing or empty part is refused, never read
as "all"); ``--all`` must be given explicitly (the only mode: forgetting one memory is the
Python API's ``forget``). The ledger records the command and every memory it forgot. Exit
status 0 done, 2 an error (one line on stderr).
"""

from __future__ import annotations

from typing import Annotated

import msgspec
import typer

from memory_ledger.ledger.ids import Namespace
from memory_ledger.replay.cli import common
from memory_ledger.replay.cli.common import (
    JsonOption,
    LedgerOption,
    MasterKeyFileOption,
    PrincipalOption,
    ScopeOption,
    StoreOption,
    TenantOption,
)

__all__ = ["forget", "register"]


def forget(
    ctx: typer.Context,
    tenant: TenantOption,
    principal: PrincipalOption,
    scope_id: ScopeOption,
    everything: Annotated[
        bool,
        typer.Option("--all", help="Forget every retrievable memory of the namespace (required)."),
    ] = False,
    store: StoreOption = None,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Forget every memory of ONE namespace (--all), recorded as one auditable command."""
    from memory_ledger.commands.engine.memory_engine import (
        MemoryEngine,  # the engine's imports: on use
    )
    from memory_ledger.replay.audit.errors import ConfirmationRequiredError

    with common.user_errors():
        if not everything:
            msg = "say --all to forget every memory of the namespace (nothing else is supported)"
            raise ConfirmationRequiredError(msg, parameter="--all")
        namespace = Namespace(tenant, principal, scope_id).validated()
        config = common.audit_config(ctx)
        folder = common.store_folder(store, config)
        with MemoryEngine.open(folder, create=False, config=config) as engine:
            count = engine.forget_all(namespace)
            head = engine.head
    if as_json:
        common.print_json(
            {"namespace": msgspec.to_builtins(namespace), "forgotten": count, "position": head}
        )
        return
    if not count:
        common.out.print(
            f"nothing to forget in {namespace.tenant}/{namespace.principal}/"
            f"{namespace.scope_id}: it holds no retrievable memory; nothing was written "
            f"(ledger position {head})",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        return
    common.out.print(
        f"forgot {count} memories of {namespace.tenant}/{namespace.principal}/"
        f"{namespace.scope_id} (ledger position {head})",
        highlight=False,
        markup=False,
    )


def register(app: typer.Typer) -> None:
    """Add the ``forget`` command to the ``memory-ledger`` app."""
    app.command("forget")(forget)
