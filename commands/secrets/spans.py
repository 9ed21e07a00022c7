"""What a secret scan returns: :class:`SecretSpan` (one find) and :class:`Redaction`."""

from __future__ import annotations

import msgspec

__all__ = ["Redaction", "SecretSpan"]


class SecretSpan(msgspec.Struct, frozen=True):
    """A secret-shaped span ``text[start:end]`` of the scanned text, named by ``kind``.

    ``kind`` is a snake_case name such as ``aws_access_key``, ``github_token``,
    ``openai_token``, ``slack_token``, ``json_web_token``, ``private_key``,
    ``bearer_token``, ``password`` or ``secret_keyword``.
    """

    start: int
    end: int
    kind: str


class Redaction(msgspec.Struct, frozen=True):
    """The outcome of :func:`~memory_ledger.commands.secrets.redact`.

    ``text`` has each secret span replaced by ``[REDACTED:<kind>]``; ``count`` is the
    number of spans replaced; ``kinds`` the distinct kinds replaced, sorted.
    """

    text: str
    count: int
    kinds: tuple[str, ...]
