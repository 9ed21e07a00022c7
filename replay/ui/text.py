"""How every stored string reaches a page: HTML-escaped, with invisible and reordering
characters shown as visible marks.

Autoescaping (Jinja2's, through :func:`show` as the environment's ``finalize``) turns
``<``, ``>``, ``&``, ``"`` and ``'`` into entities, so a stored ``<script>`` or
``"><img onerror=...>`` is text, never markup. That leaves characters the browser does not
parse but does obey: bidirectional overrides and isolates (U+202A..U+202E, U+2066..U+2069,
U+200E/U+200F, U+061C) can make a statement read backwards or hide part of it (the
"Trojan Source" trick), and C0/C1 control characters and zero-width characters are
invisible. Each of those is replaced by a visible mark ``<span class="ctl">U+202E</span>``
(its code point), so what is stored is what is seen.
"""

from __future__ import annotations

import re
from typing import Any

from markupsafe import Markup, escape

__all__ = ["HIDDEN", "show", "shown_text"]

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
