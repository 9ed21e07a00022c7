"""The local, read-only memory debugger in the browser (``memory-ledger ui``; issue 29).

A Starlette app with server-rendered pages over one store opened read-only: namespaces,
timelines, memories with their lineage, time travel between two points, recall explained,
and integrity. Every request needs the random token of the printed address; every stored
string is escaped. Needs the ``ui`` extra (``pip install 'memory-ledger[ui]'``).

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.replay.ui.app import create_app
    from memory_ledger.replay.ui.security import new_token
    from memory_ledger.replay.ui.server import open_read_only, serve
    from memory_ledger.replay.ui.state import UiState

__all__ = [
    "UiState",
    "create_app",
    "new_token",
    "open_read_only",
    "serve",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "UiState": "memory_ledger.replay.ui.state",
        "create_app": "memory_ledger.replay.ui.app",
        "new_token": "memory_ledger.replay.ui.security",
        "open_read_only": "memory_ledger.replay.ui.server",
        "serve": "memory_ledger.replay.ui.server",
    },
)
