"""The README's walkthrough, run inside the checkout, leaves nothing for ``git status`` to
show: every file or folder its commands create relative to the checkout is ignored."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# What creates an output relative to the working folder, in the README's shell and Python.
OUTPUTS = (
    r"--(?:out|store) \./([\w.-]+)",  # export --out ./export, restore ... --store ./restored
    r">>? ?([\w-]+\.\w+)\b",  # > conv26.jsonl, > lineage.md, >> tokens.toml
    r'Path\("([\w.-]+)',  # Path("master.key"), Path("repo/src")
    r'open\("\./([\w.-]+)"',  # memory_ledger.open("./store")
)


def created_by_the_readme() -> set[str]:
    """The first path component of every output the README's code blocks create in the
    working folder."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages)
    found: set[str] = set()
    for block in re.findall(r"^```(?:sh|python)\n(.*?)^```$", text, flags=re.S | re.M):
        for pattern in OUTPUTS:
            found.update(re.findall(pattern, block))
    return found


def test_every_output_of_the_readme_walkthrough_is_ignored() -> None:
    outputs = created_by_the_readme()
    # The walkthrough's outputs, as of this test (a new one is found by the patterns above).
    assert {"store", "export", "backup", "restored", "lineage.md", "conv26.jsonl"} <= outputs
    assert {"tokens.toml", "master.key", "host-a", "host-b", "repo"} <= outputs
    patterns = {
        line.strip().strip("/")
        for line in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert sorted(outputs - patterns) == []
