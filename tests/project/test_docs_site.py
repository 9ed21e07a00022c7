"""The docs build as a static site (issue 26 item 5): ``mkdocs build --strict`` over
``docs/`` with the nav of ``mkdocs.yml``, warnings as errors: a broken link or anchor, or a
page left out of the nav, fails the build (``validation`` in ``mkdocs.yml``).

The site carries the generated references (issue 38 item 4, ``docs/_hooks/reference.py``):
an API page per face, rendered by mkdocstrings from the docstrings, naming every name of the
face's ``__all__``; and a CLI page written from the typer app's command tree, naming every
command. The site is built once for the module (a few seconds)."""

from __future__ import annotations

import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main

from memory_ledger.replay.cli.app import app
from tests.project.test_import_layers import FACES

ROOT = Path(__file__).resolve().parents[2]
NAV = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
API_FACES = re.findall(r": api/([\w.]+)\.md$", NAV, flags=re.M)
"""The faces the nav gives an API page, in nav order."""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    return folder


def test_the_site_builds_with_warnings_as_errors(site: Path) -> None:
    pages = {path.stem for path in (ROOT / "docs").glob("*.md")}
    assert {path.parent.name for path in site.glob("*/index.html")} >= pages - {"index"}


def test_every_docs_page_is_in_the_nav() -> None:
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f": {p.name}" not in NAV]
    assert missing == []


def test_every_face_has_an_api_page_in_the_nav() -> None:
    assert set(FACES) <= set(API_FACES)
    assert {"memory_ledger.replay", "memory_ledger.projections"} <= set(API_FACES)
    assert len(API_FACES) == len(set(API_FACES))


@pytest.mark.parametrize("face", API_FACES)
def test_an_api_page_documents_every_name_of_its_face(site: Path, face: str) -> None:
    page = (site / "api" / face / "index.html").read_text(encoding="utf-8")
    names = importlib.import_module(face).__dict__.get("__all__", [])
    missing = [name for name in names if f'id="{face}.{name}"' not in page]
    assert missing == [], f"{face}: no docstring rendered for {missing}"


def test_the_cli_page_names_every_command(site: Path) -> None:
    page = (site / "cli" / "index.html").read_text(encoding="utf-8")
    root = typer.main.get_command(app)
    ctx = root.context_class(root, info_name="memory-ledger")
    paths = []
    for name in root.list_commands(ctx):  # type: ignore[attr-defined]
        command = root.get_command(ctx, name)  # type: ignore[attr-defined]
        paths.append(f"memory-ledger {name}")
        if hasattr(command, "list_commands"):
            paths += [f"memory-ledger {name} {sub}" for sub in command.list_commands(ctx)]
    assert len(paths) > 20 and "memory-ledger keys rotate" in paths
    missing = [path for path in paths if f"<code>{path}</code>" not in page]
    assert missing == []
    assert "--master-key-file" in page and "OPENAI_API_KEY" in page  # options and defaults
