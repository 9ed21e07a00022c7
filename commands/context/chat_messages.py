"""A host's conversation history as the engine sees it, and its token accounting.

Compaction (:mod:`commands.context.compaction`) works on a list of :class:`ChatMessage` (the
OpenAI chat shape: ``system``, ``user``, ``assistant``, ``tool``; a host serializes an
assistant's tool calls into ``content``). Tokens are counted with the engine's token
counter (:data:`projections.tokens.TokenCounter`, by default
:func:`projections.tokens.estimate_tokens`; a session passes its own), plus
:data:`MESSAGE_OVERHEAD_TOKENS` per message for the chat framing.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

import msgspec

from memory_ledger.commands.extraction.validation import schema_detail
from memory_ledger.ledger.errors import InvalidArgumentError, InvalidArgumentTypeError
from memory_ledger.projections.tokens import TokenCounter, estimate_tokens

__all__ = [
    "MESSAGE_OVERHEAD_TOKENS",
    "ChatMessage",
    "Role",
    "as_messages",
    "history_tokens",
    "message_tokens",
]

Role = Literal["system", "user", "assistant", "tool"]

MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens counted for each message's framing (role, separators), as chat formats spend."""


class ChatMessage(msgspec.Struct, frozen=True, kw_only=True):
    """One message of a conversation: ``role``, ``content`` text, optional ``name`` and, for
    a ``tool`` message, the ``tool_call_id`` it answers.

    :raises InvalidArgumentError: (a ``ValueError``) an unknown role or a non-string content.
    """

    role: Role
    content: str
    name: str | None = None
    tool_call_id: str | None = None

    def __post_init__(self) -> None:
        if self.role not in ("system", "user", "assistant", "tool"):
            msg = f"unknown message role {self.role!r}; use system, user, assistant or tool"
            raise InvalidArgumentError(msg, parameter="role")
        if not isinstance(self.content, str):
            msg = f"message content must be a string, got {type(self.content).__name__}"
            raise InvalidArgumentTypeError(msg, parameter="content")


def message_tokens(message: ChatMessage, counter: TokenCounter = estimate_tokens) -> int:
    """Tokens of one message by ``counter``: its content and name, plus the framing
    overhead."""
    tokens = MESSAGE_OVERHEAD_TOKENS + counter(message.content)
    if message.name:
        tokens += counter(message.name)
    return tokens


def history_tokens(
    messages: Iterable[ChatMessage], fixed_tokens: int = 0, counter: TokenCounter = estimate_tokens
) -> int:
    """Tokens of a request by ``counter``: ``fixed_tokens`` (system prompt and tool schemas
    the host sends beside the history) plus every message."""
    return fixed_tokens + sum(message_tokens(m, counter) for m in messages)


def as_messages(items: Sequence[ChatMessage | dict[str, object]]) -> list[ChatMessage]:
    """``items`` as :class:`ChatMessage` (mappings are converted, strictly).

    :raises InvalidArgumentError: a mapping is not a valid message.
    """
    out = []
    for item in items:
        if isinstance(item, ChatMessage):
            out.append(item)
        else:
            try:
                out.append(msgspec.convert(item, ChatMessage))
            except msgspec.ValidationError as e:
                raise InvalidArgumentError(
                    f"not a chat message: {schema_detail(str(e))}", parameter="messages"
                ) from None
    return out
