"""The properties the kit checks (one pytest marker each) and how a run's test outcomes
add up to one result per property."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["PROPERTIES", "PropertyResult", "summarize"]

PROPERTIES: Mapping[str, str] = {
    "contract": "the BaseStore contract as LangGraph documents it: put/get/search/delete/"
    "list_namespaces, filters, pagination, TTL, batch ordering, namespace rules; sync and async",
    "isolation": "no item, key, id or count of one namespace is reachable from another",
    "delete": "after a delete and a close no byte of the value remains in the store's bytes, "
    "and no search finds it",
    "concurrency": "one value per key, no acknowledged put lost, under concurrent puts from "
    "threads and from processes",
    "durability": "an acknowledged put survives a SIGKILL of its process",
    "read_your_writes": "a get and a search right after a put (or a delete) see it",
}
"""Marker name -> what it checks, in the order of the published table."""


@dataclass(frozen=True)
class PropertyResult:
    """One property's result over its tests: ``outcome`` is ``passed`` (every test passed,
    or some skipped: ``why`` says which), ``failed`` (``why`` is the first failure) or
    ``skipped`` (every test skipped; ``why`` is the first reason)."""

    name: str
    outcome: str
    why: str
    tests: int


def summarize(tests: Iterable[Mapping[str, Any]]) -> list[PropertyResult]:
    """Fold test outcomes (``{"name", "property", "outcome", "why"}`` each, as the plugin's
    ``--conformance-report`` writes them) into one :class:`PropertyResult` per property of
    :data:`PROPERTIES` that had a test."""
    results: list[PropertyResult] = []
    rows = list(tests)
    for name in PROPERTIES:
        mine = [row for row in rows if row["property"] == name]
        if not mine:
            continue
        failed = [row for row in mine if row["outcome"] == "failed"]
        skipped = [row for row in mine if row["outcome"] == "skipped"]
        if failed:
            first = failed[0]
            why = f"{first['name']}: {first['why']}"
            outcome = "failed"
        elif len(skipped) == len(mine):
            outcome, why = "skipped", str(skipped[0]["why"])
        else:
            outcome = "passed"
            why = "; ".join(f"{row['name']} skipped: {row['why']}" for row in skipped)
        results.append(PropertyResult(name, outcome, why, len(mine)))
    return results
