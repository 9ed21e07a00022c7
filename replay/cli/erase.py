"""``memory-ledger erase`` and ``memory-ledger keys``: erasure by crypto-shredding and the
master key of an encrypted store, from the command line (issue #16).

Registered on the CLI app by :func:`register` (``replay/cli/app.py`` calls it)::

    memory-ledger erase --tenant T [--principal P [--scope-id S]] [--yes]
                        [--requested-by WHO] [--store DIR] [--master-key-file F] [--json]
                        [--signing-key FILE --receipt OUT]
    memory-ledger keys new [--signing] --out FILE
    memory-ledger keys rotate --new-master-key-file FILE [--store DIR] [--master-key-file F]

``erase`` destroys the data keys of every namespace of a tenant, of one principal, or of
exactly one namespace (:meth:`MemoryEngine.erase`): their payloads can never be read again,
a ``NamespaceErased`` record says what was erased, when and at whose request, and their rows
leave this host's projections (other hosts' projection files drop them at their next
catch-up). It asks for confirmation on a terminal; off a terminal (a script, a pipe) it
refuses unless ``--yes`` is given. Nothing matching: exit 0, nothing written.

``keys new`` writes a fresh random 32-byte master key file (mode 0600; an existing file is
never overwritten). ``keys rotate`` re-wraps every live data key of the store under the key
in ``--new-master-key-file`` (events are not touched); the current key comes from
``--master-key-file``, ``master_key_file`` of the settings or
``MEMORY_LEDGER_MASTER_KEY_FILE``, and afterwards only the new key opens the store.

Key bytes are never printed: only key ids (``local:<16 hex digits>``, a fingerprint).
Exit status: 0 done, 1 an erasure declined at the prompt, 2 an error (one line on stderr).
"""

from __future__ import annotations

import contextlib
import getpass
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.replay.audit.errors import (
    ConfirmationRequiredError,
    KeyFileExistsError,
    KeyFileUnwritableError,
    OutputExistsError,
)
from memory_ledger.replay.cli import common
from memory_ledger.replay.cli.common import (
    JsonOption,
    LedgerOption,
    MasterKeyFileOption,
    StoreOption,
)

if TYPE_CHECKING:
    from memory_ledger.ledger.keyring import NamespaceMatch

__all__ = ["erase", "keys_app", "keys_new", "keys_rotate", "register", "write_master_key_file"]


def _requester() -> str:
    """Who asked, for the audit record: ``cli:<login name>`` (``cli`` when unknown)."""
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):  # no login name (a container without a passwd entry)
        return "cli"


def _on_terminal() -> bool:
    """Whether a person can answer a question (stdin is a terminal)."""
    return sys.stdin.isatty()


def _what(match: NamespaceMatch) -> str:
    if match.scope_id is not None:
        return f"the namespace {match.tenant}/{match.principal}/{match.scope_id}"
    if match.principal is not None:
        return f"every namespace of principal {match.principal} of tenant {match.tenant}"
    return f"every namespace of tenant {match.tenant}"


def erase(
    ctx: typer.Context,
    tenant: Annotated[
        str, typer.Option("--tenant", metavar="TENANT", help="Tenant whose namespaces to erase.")
    ],
    principal: Annotated[
        str | None,
        typer.Option("--principal", metavar="PRINCIPAL", help="Only this principal's."),
    ] = None,
    scope_id: Annotated[
        str | None,
        typer.Option(
            "--scope-id", metavar="SCOPE", help="Only this namespace (needs --principal)."
        ),
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", help="Do not ask (needed off a terminal, e.g. in scripts).")
    ] = False,
    requested_by: Annotated[
        str | None,
        typer.Option(
            "--requested-by",
            metavar="WHO",
            help="Who asked, for the audit record (default: cli:<login name>).",
        ),
    ] = None,
    signing_key: Annotated[
        Path | None,
        typer.Option(
            "--signing-key",
            metavar="FILE",
            help="Sign a receipt with this Ed25519 key (keys new --signing); needs --receipt.",
        ),
    ] = None,
    receipt: Annotated[
        Path | None,
        typer.Option("--receipt", metavar="OUT", help="Write the signed receipt here (new)."),
    ] = None,
    store: StoreOption = None,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Erase namespaces for good: destroy their data keys (crypto-shredding), record it."""
    from memory_ledger.commands.engine.memory_engine import (
        MemoryEngine,  # the engine's imports: on use
    )
    from memory_ledger.ledger.keyring import NamespaceMatch

    with common.user_errors():
        match = NamespaceMatch(tenant=tenant, principal=principal, scope_id=scope_id).validated()
        if not yes and not _on_terminal():
            msg = (
                "erase destroys data keys for good: confirm on a terminal, or pass --yes "
                "(nothing was erased)"
            )
            raise ConfirmationRequiredError(msg, parameter="--yes")
        if (signing_key is None) != (receipt is None):
            msg = "--signing-key and --receipt go together (nothing was erased)"
            raise InvalidArgumentError(msg, parameter="--receipt")
        if receipt is not None and receipt.exists():
            msg = f"{str(receipt)!r} exists; a receipt is never overwritten (nothing was erased)"
            raise OutputExistsError(msg, path=str(receipt))
        config = common.audit_config(ctx)
        folder = common.store_folder(store, config)
        with MemoryEngine.open(folder, create=False, config=config) as engine:
            matching = sum(
                1
                for r in engine.keyring.records()
                if not r.erased and match.matches(r, engine.keyring.digests)
            )
            if matching and not yes:
                question = (
                    f"Erase {_what(match)} ({matching} namespace(s) with data) in "
                    f"{engine.path}? Their content can never be read again"
                )
                if not typer.confirm(question, default=False, err=True):
                    common.err.print("nothing erased", highlight=False)
                    raise typer.Exit(1)
            report = engine.erase(
                tenant,
                principal,
                scope_id,
                requested_by=requested_by if requested_by is not None else _requester(),
                signing_key=signing_key,
            )
            head = engine.head
        if receipt is not None and report.receipt is not None:
            from memory_ledger.replay.audit.receipts import write_receipt

            write_receipt(receipt, report.receipt)
    if as_json:
        common.print_json(
            {
                "tenant": tenant,
                "principal": principal,
                "scope_id": scope_id,
                "namespaces": report.namespaces,
                "command_id": report.command_id,
                "position": report.position,
                "erased_at": report.erased_at,
                "ledger_head": head,
                "receipt": str(receipt) if report.receipt is not None else None,
            }
        )
        return
    if not report.namespaces:
        common.out.print(
            f"nothing to erase: no namespace with data matches ({_what(match)}), or it was "
            "erased already",
            highlight=False,
            markup=False,
        )
        return
    held = (
        f"; {report.busy_projections} projection file(s) held by other running processes "
        "(a debugger, an MCP server) keep them until those processes next read or close"
        if report.busy_projections
        else ""
    )
    common.out.print(
        f"erased {report.namespaces} namespace(s): {_what(match)}; command "
        f"{report.command_id}, recorded at ledger position {report.position}. Their rows "
        f"left this process's projections{held}. Backups taken before now still hold their "
        "wrapped keys (see the README's Erasure section).",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    if receipt is not None and report.receipt is not None:
        common.out.print(f"signed receipt written to {receipt}", highlight=False)


def _make_private_folders(folder: Path) -> None:
    """Create ``folder`` and its missing parents, each with mode 0700.

    :raises OSError: one cannot be created.
    """
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for created in reversed(missing):
        with contextlib.suppress(FileExistsError):  # made meanwhile: kept as it is
            os.mkdir(created, 0o700)
            os.chmod(created, 0o700)  # whatever the umask


def write_master_key_file(path: Path) -> str:
    """Write 32 random bytes (``os.urandom``) to the NEW file ``path`` with mode 0600,
    fsynced with its folder; return the key's id (never the key). Missing folders of
    ``path`` are created owner-only (mode 0700, whatever the umask).

    :raises KeyFileExistsError: ``path`` exists (never overwritten).
    :raises KeyFileUnwritableError: the file or a missing folder cannot be created (an
        ``OSError``).
    """
    from memory_ledger.ledger.master_key import KEY_SIZE, LocalMasterKey

    key = os.urandom(KEY_SIZE)
    try:
        _make_private_folders(path.absolute().parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # os.open's: the folders exist (or were just made)
        msg = f"{str(path)!r} exists; a key file is never overwritten (choose another name)"
        raise KeyFileExistsError(msg, path=str(path)) from None
    except OSError as e:
        msg = f"cannot create the key file {str(path)!r}: {e.strerror or type(e).__name__}"
        raise KeyFileUnwritableError(msg) from None
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        with open(fd, "wb", closefd=False) as handle:
            handle.write(key)
            handle.flush()
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    os.close(fd)
    folder = os.open(path.absolute().parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)
    return LocalMasterKey(key).key_id


keys_app = typer.Typer(
    name="keys",
    help="Master keys of encrypted stores: make a new key file, rotate a store's key.",
    no_args_is_help=True,
    subcommand_metavar="new|rotate [OPTIONS]",
)


@keys_app.command("new")
def keys_new(
    out: Annotated[
        Path,
        typer.Option(
            "--out", metavar="FILE", help="Key file to create (never overwritten; mode 0600)."
        ),
    ],
    signing: Annotated[
        bool,
        typer.Option(
            "--signing",
            help="An Ed25519 key pair to sign erasure receipts: FILE (private) and FILE.pub.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Write a new random 32-byte master key file (keep it out of the store and its backups)."""
    if signing:
        from memory_ledger.replay.cli.receipts import write_signing_key_files

        with common.user_errors():
            signer = write_signing_key_files(out)
        if as_json:
            common.print_json({"out": str(out), "public": f"{out}.pub", "signer": signer})
            return
        common.out.print(
            f"wrote a new Ed25519 signing key to {out} (mode 0600) and its public key to "
            f"{out}.pub, signer {signer}. Keep the private key out of the store folder and "
            "its backups; hand out the public key.",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        return
    with common.user_errors():
        key_id = write_master_key_file(out)
    if as_json:
        common.print_json({"out": str(out), "key_id": key_id})
        return
    common.out.print(
        f"wrote a new 32-byte master key to {out} (mode 0600), key id {key_id}. Keep it out "
        "of the store folder and its backups.",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


@keys_app.command("rotate")
def keys_rotate(
    ctx: typer.Context,
    new_master_key_file: Annotated[
        Path,
        typer.Option(
            "--new-master-key-file",
            metavar="FILE",
            help="The new master key file (see keys new).",
        ),
    ],
    store: StoreOption = None,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Re-wrap every data key of the store under a new master key (events are untouched)."""
    from memory_ledger.commands.engine.memory_engine import (
        MemoryEngine,  # the engine's imports: on use
    )
    from memory_ledger.ledger.master_key import read_master_key_file

    with common.user_errors():
        new = read_master_key_file(new_master_key_file)
        config = common.audit_config(ctx)
        folder = common.store_folder(store, config)
        with MemoryEngine.open(folder, create=False, config=config) as engine:
            old_id = engine.keyring.status().master_key_id
            count = engine.rotate_master_key(new)
            status = engine.keyring.status()
    if as_json:
        common.print_json(
            {
                "store": str(folder),
                "rewrapped": count,
                "old_master_key_id": old_id,
                "master_key_id": status.master_key_id,
                "erased_keys": status.erased_keys,
            }
        )
        return
    common.out.print(
        f"re-wrapped {count} data key(s) of {folder} under master key {status.master_key_id} "
        f"(was {old_id}). Configure the new key file now (--master-key-file, master_key_file "
        "or MEMORY_LEDGER_MASTER_KEY_FILE): the old one no longer opens this store. Destroy "
        "the old key once no backup taken before this rotation is needed.",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    """Add ``erase`` and the ``keys`` group to the ``memory-ledger`` app."""
    app.command("erase")(erase)
    app.add_typer(keys_app)
