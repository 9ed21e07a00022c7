"""The MCP server (stdio and streamable HTTP) and its bearer tokens.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.replay.mcp.tokens import new_token

__all__ = [
    "new_token",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "new_token": "memory_ledger.replay.mcp.tokens",
    },
)
