"""No side effects on the host process: the engine is a library inside someone else's
process.

- The garbage collector stays on through heavy use (catch-up, rebuild, recall).
- ``os.environ`` is unchanged by opening, using and closing a store.
- A ``memory-ledger.toml`` in the current directory is ignored by the library unless asked
  (``config=PATH`` or ``load_config(search_cwd=True)``); the CLI reads it and says so in
  ``--help``.
- Token estimation is one pluggable function: ``token_counter=`` on the engine (and per
  session) is what the memory map, admissions and context assembly count with.
"""

from __future__ import annotations

import gc
import os
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.commands.config import MemoryConfig, load_config
from memory_ledger.commands.context import ContextAssembler, ContextItem, ContextQuery
from memory_ledger.commands.context.assembler import (
    AssemblyPolicy,
    StaticContextProvider,
    estimate_tokens,
)
from memory_ledger.ledger.events import MemoryAdmitted
from memory_ledger.projections import tokens
from memory_ledger.projections.memory_map import estimate_tokens as map_estimate
from memory_ledger.replay import filter_events, rebuild_projections
from memory_ledger.replay.cli.app import app
from tests.conftest import REPO_ROOT, make_item

NS = Namespace("acme", "alice", "assistant")


def fill(engine: MemoryEngine, turns: int) -> None:
    extractor = RecordedExtractor()
    session = engine.session(NS, "s1", extractor=extractor)
    for turn in range(1, turns + 1):
        extractor.provide(turn, [make_item(f"Alice owns {turn} green teapots.", subject="Alice")])
        session.observe_final_transcript(turn, f"user: I own {turn} teapots")
    session.finish()


def test_the_garbage_collector_stays_on_through_heavy_use(tmp_path: Path) -> None:
    assert gc.isenabled()
    seen: list[bool] = []
    with MemoryEngine.open(tmp_path / "store", sync=False) as engine:
        fill(engine, 60)
    shutil.rmtree(tmp_path / "store" / "projections")  # the next open folds every page
    with MemoryEngine.open(tmp_path / "store", sync=False) as engine:
        engine.runner.on_page = lambda position: seen.append(gc.isenabled())
        engine.runner.page_size = 50
        engine.catch_up()
        assert engine.recall(NS, "teapots").results
        rebuild_projections(engine, on_page=lambda position: seen.append(gc.isenabled()))
    assert len(seen) > 4, "pages were folded while the collector was watched"
    assert all(seen), "the collector was switched off while a page was folded"
    assert gc.isenabled()


def test_the_engine_does_not_switch_off_the_collector_or_touch_the_environment() -> None:
    pattern = re.compile(
        r"gc\.(disable|freeze)\(|os\.environ\[[^]]*\]\s*=|os\.environ\.(setdefault|update|pop)\("
        r"|os\.putenv\(|os\.unsetenv\("
    )
    offenders = [
        f"{path.relative_to(REPO_ROOT)}:{number}"
        for folder in ("ledger", "projections", "commands", "replay")
        for path in sorted((REPO_ROOT / folder).rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if pattern.search(line)
    ]
    assert offenders == []


def test_os_environ_is_unchanged_by_a_store_lifetime(tmp_path: Path) -> None:
    before = dict(os.environ)
    with MemoryEngine.open(tmp_path / "store", sync=False) as engine:
        fill(engine, 3)
        engine.recall(NS, "teapots")
        engine.memory_map(NS)
        list(filter_events(engine))
    with MemoryEngine.open(tmp_path / "store", read_only=True) as engine:
        engine.recall(NS, "teapots")
    assert dict(os.environ) == before


def test_a_toml_in_the_current_directory_is_ignored_by_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toml = tmp_path / "memory-ledger.toml"
    toml.write_text("[memory]\nrecall_k = 1\nactivation_policy = 'manual'\nstore_dir = 'here'\n")
    monkeypatch.chdir(tmp_path)
    assert load_config() == MemoryConfig()
    with MemoryEngine.open(tmp_path / "store", sync=False) as engine:
        assert engine.config == MemoryConfig()
        assert engine.session(NS, "s1").config().activation_policy == "auto"
    assert not (tmp_path / "here").exists()
    # ...and honoured when asked for.
    assert load_config(search_cwd=True).recall_k == 1
    with MemoryEngine.open(tmp_path / "store", sync=False, config=toml) as engine:
        assert engine.config.activation_policy == "manual"
    with MemoryEngine.open(sync=False, config=str(toml)) as engine:
        assert engine.path == tmp_path / "here"


def test_the_cli_says_it_reads_the_toml_of_the_current_directory() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "memory-ledger.toml" in result.stdout
    assert "current directory" in " ".join(result.stdout.split())


def test_token_estimation_is_one_function() -> None:
    assert estimate_tokens is tokens.estimate_tokens is map_estimate


def test_the_token_counter_is_used_by_the_memory_map_admissions_and_context(
    tmp_path: Path,
) -> None:
    counted: list[str] = []

    def counter(text: str) -> int:
        counted.append(text)
        return 50 * len(text.split())

    with MemoryEngine.open(tmp_path / "store", sync=False, token_counter=counter) as engine:
        assert engine.token_counter is counter
        fill(engine, 2)
        session = engine.session(NS, "s2")
        assert session.token_counter is counter
        default_map = engine.memory_map(NS, token_counter=estimate_tokens)
        counted.clear()
        tight = engine.memory_map(NS)
        assert counted, "the memory map counted with the engine's counter"
        assert tight != default_map, "50 tokens a word leaves no room for terms"
        hits = engine.recall(NS, "teapots", k=1).results
        session.admit(1, hits)
        admitted = [e for _, e in filter_events(engine) if isinstance(e, MemoryAdmitted)]
        assert [a.estimated_tokens for a in admitted] == [counter(hits[0].statement)]
        other = engine.session(NS, "s3", token_counter=len)
        assert other.token_counter is len
    item = ContextItem(item_id="a", source="memory", kind="memory", text="one two", relevance=1)
    policy = AssemblyPolicy(
        max_items=5, max_tokens=10, max_items_per_source=5, max_tokens_per_source=10
    )
    query = ContextQuery(session_id="s1", turn_id=1, query="q")
    provider = StaticContextProvider("memory", [item])
    assert ContextAssembler([provider], policy).assemble(query).estimated_tokens == 2
    strict = ContextAssembler([provider], policy, token_counter=counter).assemble(query)
    assert strict.items == () and strict.dropped[0].reason == "over_budget"
