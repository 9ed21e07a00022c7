"""Stored text shown on a terminal: invisible and control characters made visible.

Text in the ledger comes from hosts, scripts and models. New text is refused when it holds
control characters, bidirectional overrides or tag characters
(:func:`memory_ledger.ledger.arguments.forbidden_character`), but a store written before that
rule, or a foreign one, may still hold them; printed raw, an escape sequence would drive the
operator's terminal and an override would reorder what they read ("Trojan Source"). The CLI
shows every such character as an escape (``\\x1b``, ``\\u202e``) instead, in tables, trees and
lines alike. JSON output needs none of this: JSON escapes control characters itself.
"""

from __future__ import annotations

import re
from typing import Any

from rich.markup import escape as escape_markup
from rich.table import Table as RichTable

__all__ = ["Table", "escape", "shown"]

_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\U000e0000-\U000e007f]")
"""Control characters except tab and newline, bidirectional controls and tag characters."""


def _visible(found: re.Match[str]) -> str:
    code = ord(found.group())
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def shown(text: str) -> str:
    """``text`` with every control character (but tab and newline), bidirectional control
    and tag character replaced by its escape (``"s\\x1b[31m"`` for ESC ``[31m``)."""
    return _UNSAFE.sub(_visible, text)


def escape(text: str) -> str:
    """:func:`shown`, then rich's markup escape: stored text as a literal inside markup."""
    return escape_markup(shown(text))


class Table(RichTable):
    """A rich table whose plain-text cells go through :func:`shown` (rich renderables, such
    as ``Text`` built by the caller, are left as they are)."""

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        """Add a row; ``str`` cells are shown safely (see :func:`shown`)."""
        super().add_row(
            *(shown(cell) if isinstance(cell, str) else cell for cell in renderables), **kwargs
        )
