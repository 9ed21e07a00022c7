"""Shared fixtures: a fresh store folder, item factories, the LoCoMo data file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from benchmarks.locomo import source as locomo_source
from memory_ledger.commands import MemoryEngine, Namespace
from tests.pg import pg_schema, pg_url  # noqa: F401 (fixtures for the PostgreSQL tests)
from tests.scripted_server import ScriptedServer

REPO_ROOT = Path(__file__).resolve().parents[1]


def locomo_path() -> Path | None:
    """The LoCoMo file: $LOCOMO_PATH, else ../shared/data/locomo/locomo7.json beside the
    checkout, nothing else (``benchmarks.locomo.source``); None when it is absent."""
    return locomo_source.locomo_path()


def skip_without_locomo() -> Path:
    """The LoCoMo file, or skip the calling test saying where it was looked for."""
    path = locomo_path()
    if path is None:
        pytest.skip(locomo_source.missing())
    return path


@pytest.fixture
def locomo_file() -> Path:
    """The LoCoMo file; the test is skipped, saying so, where it is absent."""
    return skip_without_locomo()


def make_item(statement: str, **overrides: Any) -> dict[str, Any]:
    """A valid raw item (as an extractor returns it) with ``overrides`` applied."""
    item: dict[str, Any] = {
        "kind": "semantic",
        "subject": "Alice",
        "predicate": None,
        "value": None,
        "statement": statement,
        "source": "fact",
        "scope": "user",
        "reason": "helps answer future questions",
        "importance": 0.8,
        "confidence": 0.9,
        "tags": [],
        "supersedes": None,
        "conflicts_with": [],
        "evidence": [],
    }
    item.update(overrides)
    return item


@pytest.fixture
def namespace() -> Namespace:
    return Namespace("acme", "alice", "assistant")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    with MemoryEngine.open(tmp_path / "store") as opened:
        yield opened


# Hypothesis profiles: ``busy`` (the default: 50 examples where a test names no count, to
# keep CI under its limit on a slow machine) runs in CI; ``pytest --hypothesis-profile=long
# --timeout=0`` (past the per-test timeout of pyproject.toml) runs the crash property test
# (tests/crash/test_crash_property.py) with thousands of crash points. Neither fails on
# Hypothesis's timing health check (``too_slow``): on a shared 2-core machine input generation
# may be slow for reasons that are not the test's; every other health check still applies.
settings.register_profile(
    "busy", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("long", max_examples=1000, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("busy")


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    """A scripted OpenAI-compatible HTTP server on 127.0.0.1 (closed after the test)."""
    srv = ScriptedServer()
    try:
        yield srv
    finally:
        srv.close()
