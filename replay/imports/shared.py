"""What the importers share: ids shown without echoing data, the refusals a row may meet,
and the session id that makes an imported change idempotent."""

from __future__ import annotations

import hashlib
from uuid import UUID

import msgspec

from memory_ledger.commands.errors import CommandRejectedError
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.key_errors import NamespaceErasedError

__all__ = ["REFUSALS", "RefusedItem", "keyed_session_id", "shown_id"]

REFUSALS: tuple[type[Exception], ...] = (
    CommandRejectedError,  # the secret door, validation, an unknown or superseded target
    InvalidArgumentError,  # not UTF-8, a naive time
    NamespaceErasedError,
)
"""The errors that refuse one imported item (reported with their reason code; the import
goes on). Any other error stops the import: what was written stays, a rerun resumes."""


class RefusedItem(msgspec.Struct, frozen=True, kw_only=True):
    """One item the import refused: where it is in the source (``item``: a mem0 history row
    id, or ``line N`` of an interchange file), what it was about (``memory``: the mem0
    memory id or the interchange key), its ``event`` and the ``reason_code`` (with the
    ``parameter`` that failed, when known). Never the text."""

    item: str
    memory: str
    event: str
    reason_code: str
    parameter: str | None = None


def shown_id(value: str) -> str:
    """An id from imported data as it may be shown: a UUID as itself, anything else as
    ``sha256:<16 hex>`` (an id column may hold any text, a secret included)."""
    try:
        return str(UUID(value))
    except ValueError:
        return "sha256:" + hashlib.sha256(value.encode("utf-8", "replace")).hexdigest()[:16]


def keyed_session_id(prefix: str, *parts: str) -> str:
    """``prefix`` and the first 40 hex digits of the SHA-256 of ``parts``: the session id of
    one imported change, the same on every run (so a rerun finds it and writes nothing)."""
    digest = hashlib.sha256("\x1f".join(parts).encode("utf-8", "replace")).hexdigest()
    return prefix + digest[:40]
