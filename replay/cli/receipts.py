"""Erasure receipts on the command line (issue 36 item 1; docs/erasure.md, "Receipts")::

    memory-ledger keys new --signing --out FILE      # FILE (private, 0600) and FILE.pub
    memory-ledger erase ... --signing-key FILE --receipt OUT
    memory-ledger verify-receipt RECEIPT --public-key FILE.pub
                                 [--store DIR | --ledger URL] [--namespace T P S] [--json]

``verify-receipt`` exits 0 when every check it was given passed, 1 when one failed (one line
on stderr naming the failed check's reason code), 2 on an error (no such file or store).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Annotated

import typer

from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.replay.audit.errors import KeyFileExistsError, KeyFileUnwritableError
from memory_ledger.replay.cli import common
from memory_ledger.replay.cli.common import JsonOption, LedgerOption, StoreOption

__all__ = ["register", "verify_receipt_command", "write_signing_key_files"]


def _create(path: Path, data: bytes, mode: int) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except FileExistsError:
        msg = f"{str(path)!r} exists; a key file is never overwritten (choose another name)"
        raise KeyFileExistsError(msg, path=str(path)) from None
    except OSError as e:
        msg = f"cannot create the key file {str(path)!r}: {e.strerror or type(e).__name__}"
        raise KeyFileUnwritableError(msg) from None
    try:
        os.fchmod(fd, mode)
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_signing_key_files(path: Path) -> str:
    """Write a new Ed25519 private key to the NEW file ``path`` (PEM PKCS#8, mode 0600) and
    its public key to ``path.pub`` (PEM, mode 0644); return the key's signer id (sha256 hex
    of the raw public key).

    :raises KeyFileExistsError: ``path`` or ``path.pub`` exists (never overwritten).
    :raises KeyFileUnwritableError: a file cannot be created.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from memory_ledger.commands.engine.receipt import signer_id

    public_path = Path(f"{path}.pub")
    if public_path.exists():
        msg = f"{str(public_path)!r} exists; a key file is never overwritten"
        raise KeyFileExistsError(msg, path=str(public_path))
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    _create(path, private, 0o600)
    try:
        _create(public_path, public, 0o644)
    except BaseException:
        with contextlib.suppress(OSError):
            path.unlink()
        raise
    return signer_id(key.public_key())


def verify_receipt_command(
    ctx: typer.Context,
    receipt: Annotated[Path, typer.Argument(metavar="RECEIPT", help="The receipt file.")],
    public_key: Annotated[
        Path,
        typer.Option("--public-key", metavar="FILE", help="The signer's public key (PEM)."),
    ],
    namespace: Annotated[
        tuple[str, str, str] | None,
        typer.Option(
            "--namespace",
            metavar="T P S",
            help="Names of one erased namespace (tenant principal scope): check that no "
            "file of the store holds them in clear (needs --store or --ledger).",
        ),
    ] = None,
    store: StoreOption = None,
    ledger: LedgerOption = None,
    as_json: JsonOption = False,
) -> None:
    """Verify an erasure receipt: its signature; with the store, that it holds that erasure."""
    from memory_ledger.replay.audit.receipts import (
        ReceiptVerificationError,
        load_public_key,
        verify_receipt,
    )

    with common.user_errors():
        data = receipt.read_bytes()
        key = load_public_key(public_key)
        config = common.audit_config(ctx)
        folder: Path | None = None
        if store is not None or config.ledger:
            folder = common.store_folder(store, config)
        elif namespace is not None:
            msg = "--namespace needs the store: --store DIR or --ledger URL"
            raise InvalidArgumentError(msg, parameter="--namespace")
        try:
            check = verify_receipt(
                data,
                key,
                store=folder,
                ledger=config.ledger or None,
                namespace=namespace,
            )
        except ReceiptVerificationError as e:
            if as_json:
                common.print_json({"ok": False, "reason_code": e.reason_code, "problem": str(e)})
            common.err.print(
                f"receipt NOT verified ({e.reason_code}): {e}",
                highlight=False,
                soft_wrap=True,
                markup=False,
            )
            raise typer.Exit(1) from None
    if as_json:
        common.print_json(
            {"ok": True, "signature": True, "store": check.store, "names": check.names}
        )
        return
    done = ["signature"]
    if check.store:
        done.append("store (chain, erasure record, no live data key)")
    if check.names:
        done.append("names (not in clear in any file or table)")
    common.out.print(
        f"receipt verified: {', '.join(done)}; erasure of {check.receipt['namespaces']} "
        f"namespace(s) at ledger position {check.receipt['erasure']['position']}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    """Add ``verify-receipt`` to the ``memory-ledger`` app."""
    app.command("verify-receipt")(verify_receipt_command)
