"""Maps that stay true (issue 38 item 3): the README's Layout and ``docs/design.md``'s
"Layers and wings" name every wing of the package the import-layer test knows, so a move
that adds or renames a wing cannot leave them stale."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

from tests.project.test_import_layers import LAYERS

ROOT = Path(__file__).resolve().parents[2]

MAPS = {
    "README.md": "## Layout",
    "docs/design.md": "## Layers and wings",
}
"""Each map: its file and the heading of its section (the section runs to the next ``## ``)."""


def section(path: str, heading: str) -> str:
    """The text of ``path`` from ``heading`` to the next second-level heading."""
    text = (ROOT / path).read_text(encoding="utf-8")
    start = text.index(heading + "\n")
    end = text.find("\n## ", start + len(heading))
    return text[start : end if end >= 0 else len(text)]


def wings() -> list[tuple[str, str]]:
    """Every layer of :data:`LAYERS` below the facade, with the name a map gives it: a
    package as ``name/``, a module as ``name``."""
    named = []
    for layer in LAYERS[1:]:
        leaf = layer.rsplit(".", 1)[-1]
        if leaf == "__main__":
            continue  # ``python -m memory_ledger.replay``: the command line's door, not a wing
        package = hasattr(importlib.import_module(layer), "__path__")
        named.append((layer, f"{leaf}/" if package else leaf))
    return named


def test_the_layer_list_has_every_wing() -> None:
    assert len(wings()) > 20


@pytest.mark.parametrize("path", sorted(MAPS))
def test_every_wing_appears_in_the_map(path: str) -> None:
    text = section(path, MAPS[path])
    missing = [
        layer
        for layer, name in wings()
        if not re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", text)
    ]
    assert missing == [], f"{path} ({MAPS[path]}) does not name {missing}"
