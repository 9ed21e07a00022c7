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
from rich.text import Text

__all__ = ["Table", "escape", "literal", "shown"]

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


def literal(text: str) -> Text:
    """``text`` as a rich ``Text`` shown as written: never read as markup (stored text such
    as ``"[/]"`` or ``"[a-z]+"`` stays as it is) and passed through :func:`shown`."""
    return Text(shown(text))


class Table(RichTable):
    """A rich table whose plain-text title, caption and cells are literal text
    (:func:`literal`: no markup, control characters shown); rich renderables, such as
    ``Text`` built by the caller, are left as they are."""

    def __init__(self, *headers: Any, **kwargs: Any) -> None:
        for name in ("title", "caption"):
            if isinstance(kwargs.get(name), str):
                kwargs[name] = literal(kwargs[name])
        super().__init__(*headers, **kwargs)

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        """Add a row; ``str`` cells are literal text (see :func:`literal`)."""
        super().add_row(
            *(literal(cell) if isinstance(cell, str) else cell for cell in renderables), **kwargs
        )
