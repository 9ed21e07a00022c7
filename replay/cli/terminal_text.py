"""Stored text shown on a terminal: invisible and control characters made visible.

Text in the ledger comes from hosts, scripts and models. New text is refused when it holds
control characters, bidirectional overrides or tag characters
(:func:`memory_ledger.ledger.arguments.forbidden_character`), but a store written before that
rule, or a foreign one, may still hold them; printed raw, an escape sequence would drive the
operator's terminal and an override would reorder what they read ("Trojan Source"). The CLI
shows every such character as an escape (``\\x1b``, ``\\u202e``) instead, in tables, trees and
lines alike. JSON output needs none of this: JSON escapes control characters itself.

What the CLI echoes of the user's input (a recall query in a table's title, a path or a
namespace in a line) has each secret-shaped span replaced by ``[REDACTED:<kind>]``
(:func:`echoed`, ``commands.secrets.redact``, as every error line is): every table title,
caption and text cell (:class:`Table`: a cell may hold a path the user gave, as the store's
files in ``stats``) and every line printed as text through :class:`RedactingConsole` (the
CLI's stdout and stderr consoles). Stored text passed the secret door, so only text stored
before a detector existed changes. Other renderables (trees, ``Text``) are shown as built.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.markup import escape as escape_markup
from rich.table import Table as RichTable
from rich.text import Text

__all__ = ["RedactingConsole", "Table", "echoed", "escape", "literal", "shown"]

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


def echoed(text: str) -> str:
    """``text`` of the user's input as the CLI echoes it: each secret-shaped span replaced by
    ``[REDACTED:<kind>]`` (``commands.secrets.redact``); text without one is unchanged.
    Text the quick check clears (``commands.secrets.quick_check``) is returned without
    loading the detectors (a few hundred milliseconds of import for a lexical recall)."""
    from memory_ledger.commands.secrets.quick_check import may_hold_secret

    if not may_hold_secret(text):
        return text
    from memory_ledger.commands.secrets import redact

    return redact(text).text


_BARE_MARKER = re.compile(r"(?<!\\)\[REDACTED:")
"""A redaction marker not escaped for rich's markup (rich would read it as a style tag)."""


def escape(text: str) -> str:
    """:func:`shown`, then rich's markup escape: stored text as a literal inside markup."""
    return escape_markup(shown(text))


def literal(text: str) -> Text:
    """``text`` as a rich ``Text`` shown as written: never read as markup (stored text such
    as ``"[/]"`` or ``"[a-z]+"`` stays as it is) and passed through :func:`shown`."""
    return Text(shown(text))


class Table(RichTable):
    """A rich table whose plain-text title, caption and cells are literal text
    (:func:`literal`: no markup, control characters shown) with secret-shaped spans
    redacted (:func:`echoed`); rich renderables, such as ``Text`` built by the caller, are
    left as they are."""

    def __init__(self, *headers: Any, **kwargs: Any) -> None:
        for name in ("title", "caption"):
            if isinstance(kwargs.get(name), str):
                kwargs[name] = literal(echoed(kwargs[name]))
        super().__init__(*headers, **kwargs)

    def add_row(self, *renderables: Any, **kwargs: Any) -> None:
        """Add a row; ``str`` cells are literal text, redacted (see :func:`literal`,
        :func:`echoed`)."""
        super().add_row(
            *(literal(echoed(cell)) if isinstance(cell, str) else cell for cell in renderables),
            **kwargs,
        )


class RedactingConsole(Console):
    """A rich console whose ``print`` shows each ``str`` it is given through :func:`echoed`
    (the CLI's lines echo the user's input: a query, a path, a namespace); with markup on,
    the ``[REDACTED:<kind>]`` markers are escaped so they show as written. Other
    renderables (tables, trees, ``Text``) are printed as they are."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        """``Console.print`` with every ``str`` of ``objects`` redacted (see the class)."""
        markup = kwargs.get("markup") is not False
        shown_objects = []
        for thing in objects:
            if isinstance(thing, str):
                redacted = echoed(thing)
                if markup and redacted != thing:
                    redacted = _BARE_MARKER.sub(r"\\[REDACTED:", redacted)
                thing = redacted
            shown_objects.append(thing)
        super().print(*shown_objects, **kwargs)
