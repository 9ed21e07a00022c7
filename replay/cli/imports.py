"""``memory-ledger import mem0|interchange``: bring memories in with their history
(``memory_ledger.replay.imports``).

Registered on the CLI app by :func:`register` (``replay/cli/app.py`` calls it)::

    memory-ledger import mem0 --history-db FILE (--tenant T --principal P --scope-id S |
        --map-user USER_ID=TENANT/PRINCIPAL/SCOPE ... --qdrant-path DIR) [--store DIR]
    memory-ledger import interchange FILE --tenant T --principal P --scope-id S [--store DIR]

The namespace always comes from these options, never from the imported data. A rerun writes
nothing again and an interrupted import resumes. Progress shows on a terminal; the summary
says what was imported, what was already there and what was refused, by reason code (never
the refused text). Exit status 0 done (for ``mem0``, refused rows included), 1 an
``interchange`` import that refused a line (the others imported; the summary names it), 2 an
error (one line on stderr). ``memory-ledger export --format interchange`` writes the
interchange file.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import msgspec
import typer

from memory_ledger.ledger.errors import InvalidArgumentError
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

if TYPE_CHECKING:
    from memory_ledger.replay.imports.interchange_import import InterchangeImportReport

__all__ = [
    "export_interchange_file",
    "import_interchange_command",
    "import_mem0_command",
    "parse_user_map",
    "register",
]

OptionalTenant = Annotated[
    str | None,
    typer.Option("--tenant", metavar="TENANT", help="Namespace tenant of every memory."),
]
OptionalPrincipal = Annotated[
    str | None,
    typer.Option("--principal", metavar="PRINCIPAL", help="Namespace principal (the user)."),
]
OptionalScope = Annotated[
    str | None,
    typer.Option("--scope-id", metavar="SCOPE", help="Namespace scope id (the agent or app)."),
]


def parse_user_map(values: list[str]) -> dict[str, Namespace]:
    """``USER_ID=TENANT/PRINCIPAL/SCOPE`` options as a mapping (the last ``=`` splits).

    :raises InvalidArgumentError: a value of another shape, or a user id given twice.
    :raises InvalidNamespaceError: an empty or invalid namespace part.
    """
    mapping: dict[str, Namespace] = {}
    for value in values:
        user, sep, target = value.rpartition("=")
        parts = target.split("/")
        if not sep or not user or len(parts) != 3:
            msg = "--map-user takes USER_ID=TENANT/PRINCIPAL/SCOPE"
            raise InvalidArgumentError(msg, parameter="--map-user")
        if user in mapping:
            msg = "--map-user names one mem0 user id twice"
            raise InvalidArgumentError(msg, parameter="--map-user")
        mapping[user] = Namespace(parts[0], parts[1], parts[2]).validated()
    return mapping


def _refusals(refused: tuple[object, ...]) -> str:
    counts = Counter(str(getattr(item, "reason_code", "refused")) for item in refused)
    return ", ".join(f"{code} {count}" for code, count in sorted(counts.items()))


def import_mem0_command(
    ctx: typer.Context,
    history_db: Annotated[
        Path,
        typer.Option(
            "--history-db",
            metavar="FILE",
            help="mem0's SQLite history database (history.db; read-only).",
        ),
    ],
    tenant: OptionalTenant = None,
    principal: OptionalPrincipal = None,
    scope_id: OptionalScope = None,
    map_user: Annotated[
        list[str] | None,
        typer.Option(
            "--map-user",
            metavar="USER_ID=TENANT/PRINCIPAL/SCOPE",
            help="Put the memories of this mem0 user id in this namespace (repeat it); "
            "needs --qdrant-path. Others go to --tenant/--principal/--scope-id, else are "
            "refused.",
        ),
    ] = None,
    qdrant_path: Annotated[
        Path | None,
        typer.Option(
            "--qdrant-path",
            metavar="DIR",
            help="mem0's local Qdrant vector store (whose user each memory is; the mem0 extra).",
        ),
    ] = None,
    collection: Annotated[
        str, typer.Option("--collection", help="The Qdrant collection mem0 wrote.")
    ] = "mem0",
    store: StoreOption = None,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import a mem0 store with its history: every ADD, UPDATE and DELETE at its own time."""
    from memory_ledger.commands.engine.memory_engine import MemoryEngine
    from memory_ledger.replay.imports.mem0 import import_mem0
    from memory_ledger.replay.imports.mem0_history import count_history
    from memory_ledger.replay.imports.mem0_owners import read_qdrant_owners

    with common.user_errors():
        namespace = common.optional_namespace(tenant, principal, scope_id)
        users = parse_user_map(map_user or [])
        if users and qdrant_path is None:
            msg = "--map-user needs --qdrant-path (mem0's vector store says whose a memory is)"
            raise InvalidArgumentError(msg, parameter="--qdrant-path")
        if namespace is None and not users:
            msg = "say where the memories go: --tenant/--principal/--scope-id or --map-user"
            raise InvalidArgumentError(msg, parameter="--tenant")
        owners = read_qdrant_owners(qdrant_path, collection) if qdrant_path else None
        total = count_history(history_db)
        config = common.audit_config(ctx)
        folder = common.store_folder(store, config)
        with (
            MemoryEngine.open(folder, create=True, config=config) as engine,
            common.progress("importing mem0 history", total, unit="rows") as advance,
        ):
            report = import_mem0(
                engine,
                history_db,
                namespace=namespace,
                user_map=users,
                owners=owners,
                progress=lambda done, _total: advance(done),
            )
    if as_json:
        common.print_json(msgspec.to_builtins(report))
        return
    refused = f"; refused {len(report.refused)} ({_refusals(report.refused)})"
    common.out.print(
        f"mem0 history: {report.rows} rows: imported {report.imported}, already there "
        f"{report.already}, unchanged {report.unchanged}"
        f"{refused if report.refused else ', refused 0'} "
        f"(ledger position {report.position})",
        highlight=False,
        soft_wrap=True,
    )


def import_interchange_command(
    ctx: typer.Context,
    source: Annotated[
        Path,
        typer.Argument(metavar="FILE", help="An interchange file (export --format interchange)."),
    ],
    tenant: TenantOption,
    principal: PrincipalOption,
    scope_id: ScopeOption,
    store: StoreOption = None,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Import an interchange file's memories, versions and times into one namespace."""
    from memory_ledger.commands.engine.memory_engine import MemoryEngine
    from memory_ledger.replay.imports.interchange_import import import_interchange

    with common.user_errors():
        namespace = Namespace(tenant, principal, scope_id).validated()
        config = common.audit_config(ctx)
        folder = common.store_folder(store, config)
        with MemoryEngine.open(folder, create=True, config=config) as engine:
            report = import_interchange(engine, namespace, source)
    if as_json:
        common.print_json(msgspec.to_builtins(report))
    else:
        _interchange_summary(report)
    if report.refused:  # an interchange file is one store's export: every line should fit
        raise typer.Exit(1)


def _interchange_summary(report: InterchangeImportReport) -> None:
    """Print what an interchange import did (a warning on stderr when the digest differs)."""
    if not report.digest_matches:
        common.err.print(
            "warning: the memories read do not match the file's digest (changed after its "
            "export, or cut short)",
            highlight=False,
        )
    refused = f"; refused {len(report.refused)} ({_refusals(report.refused)})"
    common.out.print(
        f"interchange: {report.lines} memories: imported {report.imported}, already there "
        f"{report.already}, approximated {report.approximated}"
        f"{refused if report.refused else ', refused 0'} "
        f"(ledger position {report.position})",
        highlight=False,
        soft_wrap=True,
    )


def export_interchange_file(
    ctx: typer.Context,
    out: Path,
    store: Path | None,
    to: int | None,
    force: bool,
    parts: tuple[str | None, str | None, str | None],
    as_json: bool,
) -> None:
    """``export --format interchange``: write one namespace's memories to the file ``out``
    (:func:`~memory_ledger.replay.imports.interchange.export_interchange`)."""
    from memory_ledger.replay.audit.errors import OutputExistsError, unwritable_output
    from memory_ledger.replay.imports.interchange import export_interchange

    with common.user_errors():
        namespace = common.optional_namespace(*parts)
        if namespace is None:
            msg = (
                "--format interchange exports one namespace: give --tenant, --principal, --scope-id"
            )
            raise InvalidArgumentError(msg, parameter="--tenant")
        if to is not None:
            msg = "--format interchange exports the current state; --to is not supported"
            raise InvalidArgumentError(msg, parameter="--to")
        if out.exists() and (out.is_dir() or not force):
            msg = f"{str(out)!r} exists; choose a new file or pass --force"
            raise OutputExistsError(msg, path=str(out))
        with common.open_for_audit(ctx, store) as engine:
            try:
                report = export_interchange(engine, namespace, out)
            except OSError as e:
                raise unwritable_output(e, out, "interchange file") from e
    if as_json:
        common.print_json(msgspec.to_builtins(report))
        return
    common.out.print(
        f"exported {report.memories} memories ({report.versions} versions) of "
        f"{namespace.tenant}/{namespace.principal}/{namespace.scope_id} to {report.path} "
        f"at position {report.position}; digest {report.digest}",
        highlight=False,
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    """Add the ``import`` command group (``mem0``, ``interchange``) to the app."""
    group = typer.Typer(
        name="import",
        help="Import memories with their history: from mem0, or an interchange file.",
        no_args_is_help=True,
        subcommand_metavar="mem0|interchange [OPTIONS]",
    )
    group.command("mem0")(import_mem0_command)
    group.command("interchange")(import_interchange_command)
    app.add_typer(group, name="import")
