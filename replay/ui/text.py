"""How every stored string reaches a page: HTML-escaped, with invisible and reordering
characters shown as visible marks.

Autoescaping (Jinja2's, through :func:`show` as the environment's ``finalize``) turns
``<``, ``>``, ``&``, ``"`` and ``'`` into entities, so a stored ``<script>`` or
``"><img onerror=...>`` is text, never markup. That leaves characters the browser does not
parse but does obey: bidirectional overrides and isolates (U+202A..U+202E, U+2066..U+2069,
U+200E/U+200F, U+061C) can make a statement read backwards or hide part of it (the
"Trojan Source" trick), and C0/C1 control characters and zero-width characters are
invisible. In the page's text each of those is replaced by a visible mark
``<span class="ctl">U+202E</span>`` (its code point), so what is stored is what is seen.

A mark is markup, so it is drawn only where markup is text: inside an attribute (a form's
``value``, a link) or an element whose content is a value (``<option>``, ``<title>``,
``<textarea>``) the text must stay exactly what is stored, or a form submits a different
namespace or query (issue 34). There :func:`exact` is used instead: escaped, with the
zero-width and direction characters as numeric character references (``&#x200B;``), which
the browser reads back as the same characters. The templates never choose:
:class:`.places.ExactInAttributes` applies :func:`exact` to every ``{{ ... }}`` in such a
place when a template is compiled.
"""

from __future__ import annotations

import re
from typing import Any

from markupsafe import Markup, escape

__all__ = ["HIDDEN", "exact", "show", "shown_text"]

HIDDEN = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]"
)
"""Characters shown as a mark: C0/C1 controls (not tab or newline), zero-width characters,
bidirectional marks, embeddings, overrides and isolates, the byte-order mark."""


def _mark(match: re.Match[str]) -> str:
    return f'<span class="ctl" title="hidden character">U+{ord(match.group()):04X}</span>'


def shown_text(text: str) -> Markup:
    """``text`` escaped for HTML, each :data:`HIDDEN` character as a visible mark."""
    return Markup(HIDDEN.sub(_mark, str(escape(text))))


def show(value: Any) -> Any:
    """Jinja2 ``finalize``: every ``{{ value }}`` of a template passes here. Text (and
    anything else but already-safe markup and None) becomes :func:`shown_text`; None
    becomes the empty string."""
    if value is None:
        return ""
    if isinstance(value, Markup):
        return value
    return shown_text(value if isinstance(value, str) else str(value))


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _reference(match: re.Match[str]) -> str:
    char = match.group()
    return char if _CONTROL.match(char) else f"&#x{ord(char):X};"


def exact(value: Any) -> Markup:
    """``value`` as an attribute's text: escaped for HTML and otherwise exactly the stored
    text (no mark). Each :data:`HIDDEN` character that is not a control character is written
    as a numeric character reference (``&#x200B;``), so no raw direction character reaches
    the page's source. Control characters stay as they are: HTML reads a reference to
    U+0080..U+009F as another character (windows-1252) and Python's :mod:`html.parser`
    drops a reference to a C0 control, while the raw characters are kept by both. None is
    the empty string.
    """
    if value is None:
        return Markup("")
    if isinstance(value, Markup):
        return value
    text = value if isinstance(value, str) else str(value)
    return Markup(HIDDEN.sub(_reference, str(escape(text))))
