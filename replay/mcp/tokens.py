"""Bearer tokens of the MCP server's HTTP transport: each maps to exactly one namespace.

Tokens are stored hashed (sha256, hex): the file names each token, its digest and its
namespace, never the token itself. A TOML file, either a token file of its own or the
``[mcp]`` section of ``memory-ledger.toml``::

    [[mcp.token]]                    # or [[token]] in a file of its own
    name = "alice-laptop"            # who holds it (recorded in session ids; not secret)
    sha256 = "9f86d081884c7d65..."   # sha256 of the token, 64 hex digits
    tenant = "acme"
    principal = "alice"
    scope_id = "assistant"

``memory-ledger mcp-token NAME --tenant ... --principal ... --scope-id ...`` makes a new
random token, prints it once and prints the entry to paste. A presented token is hashed and
compared with every digest in constant time; nothing here logs or raises with a token in it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec

from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.ledger.ids import InvalidNamespaceError, Namespace

__all__ = [
    "TokenEntry",
    "TokenFileError",
    "TokenRegistry",
    "hash_token",
    "new_token",
    "token_entry_toml",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_DIGEST = re.compile(r"^[0-9a-f]{64}$")


class TokenFileError(MemoryLedgerError, ValueError):
    """The token file is unreadable, not TOML, or an entry is invalid (the message names the
    entry by its ``name`` or index, never a token)."""


class TokenEntry(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One token: its holder's ``name``, the token's ``sha256`` and its namespace."""

    name: str
    sha256: str
    tenant: str
    principal: str
    scope_id: str

    @property
    def namespace(self) -> Namespace:
        """The one namespace this token opens."""
        return Namespace(self.tenant, self.principal, self.scope_id)


def hash_token(token: str) -> str:
    """The stored form of ``token``: sha256 of its UTF-8 bytes, lowercase hex."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    """A new random bearer token (256 bits, URL-safe text)."""
    return "mlt_" + secrets.token_urlsafe(32)


def token_entry_toml(name: str, token: str, namespace: Namespace) -> str:
    """The ``[[mcp.token]]`` TOML entry for ``token`` (hashed) under ``name``.

    :raises TokenFileError: an invalid name.
    :raises InvalidNamespaceError: an invalid namespace.
    """
    if not _NAME.match(name):
        msg = f"token name {name!r} must be 1-64 letters, digits, '.', '_' or '-'"
        raise TokenFileError(msg)
    namespace.validated()
    enc = msgspec.json.encode
    return (
        "[[mcp.token]]\n"
        f"name = {enc(name).decode()}\n"
        f'sha256 = "{hash_token(token)}"\n'
        f"tenant = {enc(namespace.tenant).decode()}\n"
        f"principal = {enc(namespace.principal).decode()}\n"
        f"scope_id = {enc(namespace.scope_id).decode()}\n"
    )


class TokenRegistry:
    """The tokens a server accepts. :meth:`lookup` maps a presented token to its entry.

    :raises TokenFileError: an entry is invalid, or two entries share a name or a digest.
    """

    def __init__(self, entries: Iterable[TokenEntry]) -> None:
        self.entries: tuple[TokenEntry, ...] = tuple(entries)
        names: set[str] = set()
        digests: set[str] = set()
        for index, entry in enumerate(self.entries):
            label = f"token {index + 1} ({entry.name!r})"
            if not _NAME.match(entry.name):
                msg = f"{label}: name must be 1-64 letters, digits, '.', '_' or '-'"
                raise TokenFileError(msg)
            if not _DIGEST.match(entry.sha256):
                msg = f"{label}: sha256 must be 64 lowercase hex digits (the token's digest)"
                raise TokenFileError(msg)
            try:
                entry.namespace.validated()
            except InvalidNamespaceError as e:
                raise TokenFileError(f"{label}: {e}") from None
            if entry.name in names:
                raise TokenFileError(f"{label}: the name is used twice")
            if entry.sha256 in digests:
                raise TokenFileError(f"{label}: the same token is listed twice")
            names.add(entry.name)
            digests.add(entry.sha256)

    @classmethod
    def from_toml(cls, path: str | Path) -> TokenRegistry:
        """Read ``[[mcp.token]]`` (or top-level ``[[token]]``) entries from a TOML file.

        :raises TokenFileError: unreadable, not UTF-8 (``"not_utf8"``), not TOML, or invalid
            entries (none at all too).
        """
        file = Path(path)
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except OSError as e:
            msg = f"cannot read token file {str(file)!r}: {e.strerror or e}"
            raise TokenFileError(msg) from None
        except UnicodeDecodeError as e:
            msg = f"token file {str(file)!r} is not UTF-8 text (byte offset {e.start})"
            raise TokenFileError(msg, reason_code="not_utf8") from None
        except tomllib.TOMLDecodeError as e:
            msg = f"token file {str(file)!r} is not valid TOML: {e}"
            raise TokenFileError(msg) from None
        section: Any = data.get("mcp", data)
        raw = section.get("token", []) if isinstance(section, Mapping) else []
        if not isinstance(raw, list) or not raw:
            msg = f"{str(file)!r} lists no [[mcp.token]] (or [[token]]) entries"
            raise TokenFileError(msg)
        entries = []
        for index, item in enumerate(raw):
            try:
                entries.append(msgspec.convert(item, TokenEntry))
            except msgspec.ValidationError as e:
                raise TokenFileError(f"token {index + 1} in {str(file)!r}: {e}") from None
        return cls(entries)

    def lookup(self, token: str) -> TokenEntry | None:
        """The entry whose digest is ``token``'s, or None. Every digest is compared (in
        constant time), so timing does not tell how much of a digest matched."""
        digest = hash_token(token)
        found = None
        for entry in self.entries:
            if hmac.compare_digest(entry.sha256, digest):
                found = entry
        return found
