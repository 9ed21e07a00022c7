"""The conformance kit holds stores to what it claims (issue 36 items 3 and 4).

Each deliberately broken store of :mod:`memory_ledger.replay.conformance.mutants` fails
the property it breaks and only that one; their unbroken reference passes every one;
LangGraph's ``InMemoryStore`` passes every property it can be checked on; ``LedgerStore``
passes all but ``delete``'s bytes check (a delete is a recorded forget: the ledger keeps
history; erasure is what removes bytes, see docs/conformance.md), and so does the engine's
own API through its thin adapter. Each store is run by the
kit in a pytest process of its own, several at once, at 8 examples a property test.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from memory_ledger.replay.conformance import PROPERTIES, KitRun, run_kit, summarize

MUTANTS = "memory_ledger.replay.conformance.mutants"
EXPECTED_FAILURE = {
    "leaking_namespace_store": "isolation",
    "soft_delete_store": "delete",
    "lost_update_store": "concurrency",
    "lagging_index_store": "read_your_writes",
}
EXAMPLES = 8


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, KitRun]]:
    """Every store's run, keyed by factory name (three kit processes at a time)."""
    jobs: dict[str, tuple[str, dict[str, str], Path]] = {}
    for name in ["reference_store", *EXPECTED_FAILURE]:
        folder = tmp_path_factory.mktemp(name)
        jobs[name] = (f"{MUTANTS}:{name}", {"MEMORY_LEDGER_MUTANT_DIR": str(folder)}, folder)
    folder = tmp_path_factory.mktemp("ledger")
    jobs["ledger"] = (
        "benchmarks.conformance_stores:ledger_store",
        {"CONFORMANCE_LEDGER_DIR": str(folder)},
        folder,
    )
    folder = tmp_path_factory.mktemp("engine")
    jobs["engine"] = (
        "benchmarks.conformance_engine:engine_store",
        {"CONFORMANCE_ENGINE_DIR": str(folder)},
        folder,
    )
    with ThreadPoolExecutor(3) as pool:
        futures = {
            name: pool.submit(run_kit, spec, folder=folder, examples=EXAMPLES, env=env)
            for name, (spec, env, folder) in jobs.items()
        }
        in_memory = run_kit("langgraph.store.memory:InMemoryStore", examples=EXAMPLES)
        yield {"in_memory": in_memory, **{name: f.result() for name, f in futures.items()}}


def failed(run: KitRun) -> set[str]:
    return {name for name, outcome in run.outcomes().items() if outcome == "failed"}


def test_the_reference_store_passes_every_property(runs: dict[str, KitRun]) -> None:
    run = runs["reference_store"]
    assert run.outcomes() == dict.fromkeys(PROPERTIES, "passed"), run.output


@pytest.mark.parametrize("mutant", sorted(EXPECTED_FAILURE))
def test_each_mutant_fails_its_property_and_only_that_one(
    runs: dict[str, KitRun], mutant: str
) -> None:
    run = runs[mutant]
    assert failed(run) == {EXPECTED_FAILURE[mutant]}, run.output
    assert set(run.outcomes()) == set(PROPERTIES)


def test_in_memory_store_passes_what_it_can_be_checked_on(runs: dict[str, KitRun]) -> None:
    """No bytes to read, nothing that persists: those checks skip, saying so."""
    run = runs["in_memory"]
    assert failed(run) == set(), run.output
    assert run.outcomes()["durability"] == "skipped"
    skipped = {row["name"]: row["why"] for row in run.tests if row["outcome"] == "skipped"}
    assert "where the store's bytes are" in skipped["test_deleted_value_leaves_no_bytes"]


def test_ledger_store_keeps_deleted_values_in_its_history(runs: dict[str, KitRun]) -> None:
    """LedgerStore's only failure: a delete is a forget, recorded; the ledger and the
    projection keep the value (documented in docs/conformance.md)."""
    run = runs["ledger"]
    assert failed(run) == {"delete"}, run.output
    rows = {row["name"]: row for row in run.tests}
    assert rows["test_deleted_value_leaves_no_bytes"]["outcome"] == "failed"
    assert "data.mdb" in rows["test_deleted_value_leaves_no_bytes"]["why"]
    assert rows["test_deleted_value_is_not_found"]["outcome"] == "passed"
    assert all(row["outcome"] == "passed" for row in run.tests if row["property"] != "delete")


def test_the_engine_api_keeps_forgotten_values_in_its_history(runs: dict[str, KitRun]) -> None:
    """The engine's own API (remember/forget/retrievable_memories/recall through the thin
    adapter ``benchmarks/conformance_engine.py``) holds every property but ``delete``'s
    bytes check, for the reason LedgerStore does not: a forget is recorded."""
    run = runs["engine"]
    assert failed(run) == {"delete"}, run.output
    rows = {row["name"]: row for row in run.tests}
    assert "data.mdb" in rows["test_deleted_value_leaves_no_bytes"]["why"]
    assert rows["test_deleted_value_is_not_found"]["outcome"] == "passed"
    assert all(row["outcome"] == "passed" for row in run.tests if row["property"] != "delete")


def test_summaries_fold_tests_into_properties() -> None:
    rows = [
        {"name": "a", "property": "delete", "outcome": "passed", "why": ""},
        {"name": "b", "property": "delete", "outcome": "skipped", "why": "no bytes"},
        {"name": "c", "property": "durability", "outcome": "skipped", "why": "in memory"},
        {"name": "d", "property": "isolation", "outcome": "failed", "why": "leak"},
        {"name": "e", "property": "isolation", "outcome": "passed", "why": ""},
    ]
    got = {r.name: (r.outcome, r.why, r.tests) for r in summarize(rows)}
    assert got == {
        "delete": ("passed", "b skipped: no bytes", 2),
        "durability": ("skipped", "in memory", 1),
        "isolation": ("failed", "d: leak", 2),
    }


def test_the_plugin_changes_nothing_without_a_factory(tmp_path: Path) -> None:
    """Loaded with ``-p`` but no ``--store-factory``, pytest runs the user's tests only."""
    (tmp_path / "test_mine.py").write_text("def test_mine():\n    assert 1 + 1 == 2\n")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "memory_ledger.conformance", "-q", "-p",
         "no:cacheprovider", f"--rootdir={tmp_path}", str(tmp_path)],
        cwd=tmp_path, capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout


def test_the_published_table_covers_every_store_and_property() -> None:
    """docs/conformance.md holds the table ``python -m benchmarks conformance`` wrote: a
    row per store and property, InMemoryStore and LedgerStore at least, and the load."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "conformance.md").read_text()
    begin, end = "<!-- conformance-table:begin -->", "<!-- conformance-table:end -->"
    table = page[page.index(begin) : page.index(end)]
    assert "python -m benchmarks conformance" in table and "load" in table
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ")]
    cells = {(row[0].removeprefix("| "), row[2]): row[3] for row in rows[1:]}
    for store in ("InMemoryStore", "LedgerStore", "MemoryEngine API"):
        assert {prop for (name, prop) in cells if name == store} == set(PROPERTIES)
    assert cells[("LedgerStore", "delete")] == "failed"
