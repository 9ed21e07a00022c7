"""``memory-ledger langgraph import|export``: move items between any LangGraph store and a
ledger store (``memory_ledger.replay.langgraph_store``; the ``langgraph`` extra).

Registered on the CLI app by :func:`register` (``replay/cli/app.py`` calls it)::

    memory-ledger langgraph import SOURCE --tenant T --principal P --scope-id S [--store DIR]
    memory-ledger langgraph export TARGET --tenant T --principal P --scope-id S [--store DIR]

``SOURCE``/``TARGET`` names the other store: ``module:name`` (a ``BaseStore``, or a callable
of no argument returning one, imported from the current directory's path) or a
``postgresql://`` URL (LangGraph's ``PostgresStore``, from ``langgraph-checkpoint-postgres``;
its tables are set up first). The import keeps each item's ``updated_at`` as the occurred
time of its put; an item the ledger refuses (a secret-shaped value, one over 64 KB, one
holding a lone surrogate) is refused alone, named by namespace, key and reason code (never
its value; a secret-shaped label or key masked as every CLI output masks one:
``[REDACTED:<kind>]``), and the others are imported. LangGraph is imported only when one
of these commands runs (``--help`` stays fast). Exit status 0 done, 1 an import that
refused an item, 2 an error (one line on stderr; a ``STORE`` that names nothing usable is
an ``InvalidArgumentError``).
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import typer

from memory_ledger.commands.errors import StoreUnavailableError
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
    from memory_ledger.replay.langgraph_store.migrate import MigrationReport, RefusedPut

__all__ = ["export_command", "import_command", "register"]

OtherStore = Annotated[
    str,
    typer.Argument(
        metavar="STORE",
        help="The other LangGraph store: module:name (a BaseStore or a factory of one) or a "
        "postgresql:// URL (PostgresStore).",
        show_default=False,
    ),
]


@contextlib.contextmanager
def other_store(spec: str) -> Iterator[Any]:
    """The LangGraph store ``spec`` names (see the module doc), closed afterwards when it was
    opened here.

    :raises InvalidArgumentError: ``spec`` names nothing usable (the message says why;
        ``parameter`` is ``STORE``; ``store_factory_failed`` when the factory it names
        raised).
    :raises StoreUnavailableError: the PostgreSQL store refused the connection, is down,
        or failed a statement (``langgraph_store_unavailable``; the URL and the driver's
        message shown without the password).
    """
    if spec.startswith(("postgresql://", "postgres://")):
        try:
            from langgraph.store.postgres import PostgresStore
        except ImportError:
            msg = "a postgresql:// store needs langgraph-checkpoint-postgres (pip install it)"
            raise InvalidArgumentError(msg, parameter="STORE") from None
        import psycopg

        try:
            with PostgresStore.from_conn_string(spec) as store:
                store.setup()
                yield store
        except psycopg.Error as e:  # the server refused, is down, or failed a statement
            raise _unavailable(spec, e) from None
        return
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        msg = f"STORE must be module:name or a postgresql:// URL, got {spec!r}"
        raise InvalidArgumentError(msg, parameter="STORE")
    if "" not in sys.path:
        sys.path.insert(0, "")
    try:
        found: Any = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as e:
        msg = f"cannot load {spec!r}: {e}"
        raise InvalidArgumentError(msg, parameter="STORE") from None
    from langgraph.store.base import BaseStore

    if not isinstance(found, BaseStore) and callable(found):
        try:
            found = found()
        except Exception as e:  # noqa: BLE001 - whatever it raised, a STORE that builds none
            msg = f"calling {spec!r} to build a store raised {type(e).__name__}: {e}"
            raise InvalidArgumentError(
                msg, parameter="STORE", reason_code="store_factory_failed"
            ) from None
    if not isinstance(found, BaseStore):
        msg = f"{spec!r} is not a LangGraph BaseStore (got {type(found).__name__})"
        raise InvalidArgumentError(msg, parameter="STORE")
    yield found


def _unavailable(spec: str, error: BaseException) -> StoreUnavailableError:
    """The typed error of a PostgreSQL store that failed (``psycopg``'s ``error``): the URL
    and the driver's message without the URL's password, reason code
    ``langgraph_store_unavailable``."""
    import re
    from urllib.parse import unquote

    from memory_ledger.commands.engine.ledger_url import redact
    from memory_ledger.ledger.postgres import strip_password

    shown = strip_password(spec)
    # the password as strip_password finds it (between ``user:`` and the last ``@``: a parse
    # would cut one holding ``#``, ``/`` or ``?``), as written and percent-decoded, and the
    # pieces a driver quotes when such a character cut it (``"1b@host..."``)
    userinfo = spec.partition("://")[2].rpartition("@")[0]
    password = userinfo.split(":", 1)[1] if ":" in userinfo else ""
    pieces = [password, unquote(password), *re.split(r"[#/?&=@:;%]", password)]
    said = " ".join(str(error).split())
    for piece in sorted(pieces, key=len, reverse=True):
        if len(piece) > 1:
            said = redact(said, piece)
    msg = f"the PostgreSQL store {shown} failed ({type(error).__name__}): {said}"
    return StoreUnavailableError(msg, path=shown, reason_code="langgraph_store_unavailable")


def _run(
    ctx: typer.Context,
    direction: str,
    spec: str,
    namespace: Namespace,
    store: Any,
    ledger: str | None,
    as_json: bool,
) -> None:
    from memory_ledger.replay.langgraph_store import LedgerStore, export_store, import_store

    with common.user_errors():
        namespace.validated()
        config = common.audit_config(ctx)
        folder = common.store_folder(store, config)
        with (
            other_store(spec) as other,
            LedgerStore.open(
                folder, namespace, config=config, create=direction == "import"
            ) as ours,
        ):
            if direction == "import":
                report = import_store(other, ours)
            else:
                report = export_store(ours, other)
            head = ours.engine.head
    report = _masked(report)
    if as_json:
        common.print_json({**msgspec.to_builtins(report), "position": head})
    else:
        verb = "imported" if direction == "import" else "exported"
        common.out.print(
            f"{verb} {report.items} items in {report.namespaces} namespaces"
            f"{_refusals(report.refused)} (ledger position {head})",
            highlight=False,
            soft_wrap=True,
            markup=False,
        )
    if report.refused:
        raise typer.Exit(1)


def _masked(report: MigrationReport) -> MigrationReport:
    """``report`` with each secret shape in a refused item's namespace labels and key
    replaced by ``[REDACTED:<kind>]`` (``commands.secrets.redact``, as every error line of
    the CLI is masked): an item refused for a secret-shaped key or label is named without
    it."""
    if not report.refused:
        return report
    from memory_ledger.commands.secrets import redact

    refused = tuple(
        msgspec.structs.replace(
            r,
            namespace=tuple(redact(label).text for label in r.namespace),
            key=redact(r.key).text,
        )
        for r in report.refused
    )
    return msgspec.structs.replace(report, refused=refused)


def _refusals(refused: tuple[RefusedPut, ...]) -> str:
    """``; refused N: ns/key (reason_code), ...`` (empty when none): each refused item by its
    namespace, key and reason code, never its value."""
    if not refused:
        return ""
    named = ", ".join(f"{'/'.join(r.namespace)} {r.key!r} ({r.reason_code})" for r in refused)
    return f"; refused {len(refused)}: {named}"


def import_command(
    ctx: typer.Context,
    source: OtherStore,
    tenant: TenantOption,
    principal: PrincipalOption,
    scope_id: ScopeOption,
    store: StoreOption = None,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Copy every item of another LangGraph store into the ledger store (as puts)."""
    _run(ctx, "import", source, Namespace(tenant, principal, scope_id), store, ledger, as_json)


def export_command(
    ctx: typer.Context,
    target: OtherStore,
    tenant: TenantOption,
    principal: PrincipalOption,
    scope_id: ScopeOption,
    store: StoreOption = None,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Copy every current item of the ledger store into another LangGraph store."""
    _run(ctx, "export", target, Namespace(tenant, principal, scope_id), store, ledger, as_json)


def register(app: typer.Typer) -> None:
    """Add the ``langgraph`` command group (``import``, ``export``) to the app."""
    group = typer.Typer(
        name="langgraph",
        help="Move items between a LangGraph store and the ledger store.",
        no_args_is_help=True,
        subcommand_metavar="import|export STORE [OPTIONS]",
    )
    group.command("import")(import_command)
    group.command("export")(export_command)
    app.add_typer(group, name="langgraph")
