"""mkdocs hook: the screenshots under the repository's ``results/`` (written by
``python -m benchmarks.ui_demo``) are part of the site, so a page links them as
``../results/ui-*.png``, which reads right on a checkout and on the site alike."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

RESULTS = Path(__file__).resolve().parents[2] / "results"


def on_files(files: Files, config: Any) -> Files:
    """Add every ``results/*.png`` as ``results/<name>`` of the site."""
    for image in sorted(RESULTS.glob("*.png")):
        files.append(File.generated(config, f"results/{image.name}", abs_src_path=str(image)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """A page's ``../results/`` link names the site's ``results/`` folder."""
    return markdown.replace("](../results/", "](results/")
