"""griffe extension for the API pages: the docstrings' few reStructuredText habits, read
as Markdown (mkdocstrings renders docstrings as Markdown).

- a role, ``:class:`~memory_ledger.Namespace``` or ``:func:`explain```, becomes inline code
  (the name after ``~`` shortened to its last part, as Sphinx shows it);
- a paragraph ending in ``::`` ends in ``:`` (the indented block after it is code in Markdown
  too).

Loaded by mkdocs.yml (``extensions`` of the mkdocstrings Python handler); it changes the
rendered pages only, never the source.
"""

from __future__ import annotations

import re
from typing import Any

from griffe import Extension

ROLE = re.compile(r":(?:py:)?[a-z]+:`(~?)([^`]+)`")
LITERAL_BLOCK = re.compile(r"::$", re.MULTILINE)


def _role(match: re.Match[str]) -> str:
    short, target = match.group(1), match.group(2).strip()
    if short:
        target = target.rsplit(".", 1)[-1]
    return f"`{target}`"


def markdown(text: str) -> str:
    """``text`` (a docstring) with its roles as inline code and ``::`` as ``:``."""
    return LITERAL_BLOCK.sub(":", ROLE.sub(_role, text))


class RestToMarkdown(Extension):
    """Rewrites every docstring as it is loaded (:func:`markdown`)."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        """Rewrite ``obj``'s docstring, if it has one."""
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
