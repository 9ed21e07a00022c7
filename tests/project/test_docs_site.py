"""The docs build as a static site (issue 26 item 5): ``mkdocs build --strict`` over
``docs/`` with the nav of ``mkdocs.yml``, warnings as errors: a broken link or anchor, or a
page left out of the nav, fails the build (``validation`` in ``mkdocs.yml``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-4000:]
    pages = {path.stem for path in (ROOT / "docs").glob("*.md")}
    assert {path.parent.name for path in tmp_path.glob("*/index.html")} >= pages - {"index"}


def test_every_docs_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    missing = [p.name for p in sorted((ROOT / "docs").glob("*.md")) if f": {p.name}" not in nav]
    assert missing == []
