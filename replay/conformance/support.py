"""What the properties share: a test's namespaces, the settle step, listing everything a
namespace holds, and the generators of keys, labels and values.

Values stay small and plain (a word from a fixed list, an integer) so a store that refuses
large or secret-shaped values (some do, on purpose) is tested on what it accepts.
"""

from __future__ import annotations

import asyncio
import random
import time
import warnings
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from langgraph.store.base import BaseStore, SearchItem

from memory_ledger.replay.conformance.catalog import PROPERTIES

__all__ = [
    "KEYS",
    "LABELS",
    "SETTLE_ROOT",
    "WORDS",
    "asettle",
    "checks",
    "everything",
    "kit_settings",
    "offered",
    "run",
    "settle",
    "values",
    "word_token",
]

T = TypeVar("T")

WORDS = (
    "amber", "basil", "cedar", "delta", "ember", "fjord", "grove", "heron", "iris", "juniper",
    "kelp", "lotus", "maple", "nectar", "olive", "pearl", "quartz", "raven", "sage", "tulip",
)  # fmt: skip
"""Value words: plain dictionary words no secret scanner flags."""

LABELS = st.text("abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=6)
KEYS = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=8)


def values() -> st.SearchStrategy[dict[str, Any]]:
    """A small JSON object: a word, an integer, sometimes a nested list of words."""
    return st.fixed_dictionaries(
        {"word": st.sampled_from(WORDS), "n": st.integers(-50, 50)},
        optional={"tags": st.lists(st.sampled_from(WORDS), max_size=3)},
    )


def checks(name: str) -> pytest.MarkDecorator:
    """The marker of property ``name`` (one of :data:`PROPERTIES`). Made without pytest's
    unknown-marker warning: a session that imports the kit's modules without the plugin
    (a docs or packaging test walking every module) has not registered the markers."""
    assert name in PROPERTIES, name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pytest.PytestUnknownMarkWarning)
        mark: pytest.MarkDecorator = getattr(pytest.mark, name)
    return mark


def word_token(prefix: str) -> str:
    """A fresh value no store holds by chance, of plain words and digits (a random hex
    string would look like a secret to a store that refuses those)."""
    draw = random.SystemRandom()
    return "-".join([prefix, *draw.choices(WORDS, k=6), str(draw.randrange(10**6))])


def kit_settings(examples: int) -> settings:
    """Hypothesis settings for a property: ``examples`` examples, no deadline (stores on a
    busy machine are slow, not wrong), no shrinking (a failing example is reported as
    found: a run's time stays bounded), derandomized (a run is reproducible: the published
    table comes from one), no example database (nothing written to the user's folder)."""
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=True,
        database=None,
        phases=[Phase.explicit, Phase.reuse, Phase.generate],  # no shrinking: bounded runs
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )


SETTLE_ROOT = "conformance-settle"
SETTLE_ROUNDS = 50


def settle(store: BaseStore, root: str) -> None:
    """Wait, by writing, until search shows a fresh token put after the property's writes:
    a store whose search index trails its writes (by a few writes or a little time) has then
    applied them. The token and the nudges live under ``("conformance-settle", root)``, out
    of the test's tree. Gives up quietly after :data:`SETTLE_ROUNDS` nudges (the property
    then fails on its own). How fresh search is right after a put is the
    ``read_your_writes`` property alone."""
    ns, token = (SETTLE_ROOT, root), word_token("settle")
    store.put(ns, "mark", {"mark": token})
    for nudge in range(SETTLE_ROUNDS):
        if any(i.value.get("mark") == token for i in store.search(ns, filter={"mark": token})):
            return
        time.sleep(0.001 * nudge)
        store.put(ns, "nudge", {"n": nudge})


async def asettle(store: BaseStore, root: str) -> None:
    """:func:`settle` through the async API."""
    ns, token = (SETTLE_ROOT, root), word_token("settle")
    await store.aput(ns, "mark", {"mark": token})
    for nudge in range(SETTLE_ROUNDS):
        found = await store.asearch(ns, filter={"mark": token})
        if any(i.value.get("mark") == token for i in found):
            return
        await asyncio.sleep(0.001 * nudge)
        await store.aput(ns, "nudge", {"n": nudge})


def everything(store: BaseStore, prefix: tuple[str, ...], **search: Any) -> list[SearchItem]:
    """Every item search returns under ``prefix`` (pages of 100 until one is short)."""
    found: list[SearchItem] = []
    while True:
        page = store.search(prefix, limit=100, offset=len(found), **search)
        found += page
        if len(page) < 100:
            return found


def offered(awaitable: Awaitable[T]) -> T | None:
    """:func:`run`, or ``None`` when the store does not offer the async API (raises
    ``NotImplementedError``, as ``SqliteStore`` does): a property other than the contract
    then checks the channels the store has; the missing API is the contract's failure."""
    try:
        return run(awaitable)
    except NotImplementedError:
        return None


def run(awaitable: Awaitable[T]) -> T:
    """Run one coroutine of the store's async API to completion on a fresh event loop."""

    async def wrapped() -> T:
        return await awaitable

    return asyncio.run(wrapped())
