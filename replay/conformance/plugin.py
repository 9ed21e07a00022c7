"""The pytest plugin: ``pytest -p memory_ledger.conformance --store-factory mod:factory``.

Options: ``--store-factory`` (required to run; see :mod:`.factory`), ``--store-bytes DIR``
or ``--store-dsn URL`` (where the store's bytes are, for the ``delete`` property),
``--store-examples N`` (examples per property-based test, default 20), and
``--conformance-report FILE`` (each test's property, outcome and reason as JSON).

Loaded with ``-p`` and given a factory but no test paths, pytest collects the kit's
property modules only; loaded without ``--store-factory`` the plugin adds its markers and
options and changes nothing else.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.base import BaseStore

from memory_ledger.replay.conformance.catalog import PROPERTIES
from memory_ledger.replay.conformance.factory import (
    FactoryTraits,
    StoreFactory,
    load_factory,
    open_store,
)
from memory_ledger.replay.conformance.places import StoreBytes

__all__ = [
    "Subject",
    "conformance_bytes",
    "conformance_examples",
    "conformance_root",
    "conformance_store",
    "conformance_subject",
    "kit_paths",
    "pytest_addoption",
    "pytest_collection_modifyitems",
    "pytest_configure",
]


@dataclass(frozen=True)
class Subject:
    """The store under test: the factory, its name (``spec``) and its traits."""

    spec: str
    factory: StoreFactory
    traits: FactoryTraits


def kit_paths() -> list[str]:
    """The kit's property modules, as paths pytest collects."""
    here = Path(__file__).parent
    return [str(here / "contract.py"), str(here / "guarantees.py")]


def pytest_addoption(parser: pytest.Parser) -> None:
    """The kit's options (see the module doc)."""
    group = parser.getgroup("conformance", "memory store conformance kit")
    group.addoption("--store-factory", default=None, help="module:function making the store")
    group.addoption("--store-bytes", default=None, help="the folder holding the store's bytes")
    group.addoption("--store-dsn", default=None, help="postgresql:// URL of the store's database")
    group.addoption("--store-examples", type=int, default=20, help="examples per property test")
    group.addoption("--conformance-report", default=None, help="write outcomes as JSON here")


def pytest_configure(config: pytest.Config) -> None:
    """Register one marker per property; with a factory and no paths, collect the kit."""
    for name, description in PROPERTIES.items():
        config.addinivalue_line("markers", f"{name}: conformance property: {description}")
    if config.getoption("store_factory") and not config.option.file_or_dir:
        config.args[:] = kit_paths()
    report = config.getoption("conformance_report")
    if report:
        config.pluginmanager.register(_Report(Path(report)), "conformance-report")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every kit test carries exactly one property marker (a kit bug otherwise)."""
    for item in items:
        if Path(str(item.path)).parent != Path(__file__).parent:
            continue
        marks = [m.name for m in item.iter_markers() if m.name in PROPERTIES]
        assert len(marks) == 1, f"{item.nodeid} has property markers {marks}"


class _Report:
    """Collects each kit test's outcome; writes them as JSON at the end of the session."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.properties: dict[str, str] = {}
        self.rows: dict[str, dict[str, str]] = {}

    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        for item in items:
            marks = [m.name for m in item.iter_markers() if m.name in PROPERTIES]
            if marks:
                self.properties[item.nodeid] = marks[0]

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        prop = self.properties.get(report.nodeid)
        if prop is None or (report.when != "call" and report.outcome == "passed"):
            return
        row = self.rows.get(report.nodeid)
        if row is not None and row["outcome"] != "passed":
            return  # the first failure (or skip) of a test is its outcome
        self.rows[report.nodeid] = {
            "name": report.nodeid.rpartition("::")[2],
            "property": prop,
            "outcome": report.outcome,
            "why": _why(report),
        }

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        rows = sorted(self.rows.values(), key=lambda row: row["name"])
        factory = session.config.getoption("store_factory")
        self.path.write_text(json.dumps({"factory": factory, "tests": rows}, indent=1))


def _why(report: pytest.TestReport) -> str:
    """One line: a skip's reason, or a failure's message."""
    if report.outcome == "passed":
        return ""
    longrepr: Any = report.longrepr
    if isinstance(longrepr, tuple):
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(longrepr, "reprcrash", None)
    text = str(crash.message) if crash is not None else str(longrepr)
    return " ".join(text.split())[:300]


@pytest.fixture(scope="session")
def conformance_subject(pytestconfig: pytest.Config) -> Subject:
    """The store under test, from ``--store-factory`` (skips without one)."""
    spec = pytestconfig.getoption("store_factory")
    if not spec:
        pytest.skip("no --store-factory given")
    factory, traits = load_factory(str(spec))
    return Subject(str(spec), factory, traits)


@pytest.fixture(scope="session")
def conformance_bytes(pytestconfig: pytest.Config) -> StoreBytes:
    """Where the store's bytes are (``--store-bytes`` / ``--store-dsn``; may be nowhere)."""
    folder = pytestconfig.getoption("store_bytes")
    return StoreBytes(Path(folder) if folder else None, pytestconfig.getoption("store_dsn"))


@pytest.fixture(scope="session")
def conformance_examples(pytestconfig: pytest.Config) -> int:
    """Examples per property-based test (``--store-examples``)."""
    return int(pytestconfig.getoption("store_examples"))


@pytest.fixture
def conformance_root() -> str:
    """A namespace root label no other test (or earlier run) uses."""
    return f"conformance-{uuid.uuid4().hex}"


@pytest.fixture
def conformance_store(conformance_subject: Subject) -> Iterator[BaseStore]:
    """A store from the factory, closed after the test."""
    with open_store(conformance_subject.factory) as store:
        yield store
