"""An item refused by an import is refused alone, whatever typed error refuses it (a
secret-shaped value or key, a lone surrogate in its value, key or namespace: the file names
a shell hands over with ``surrogateescape``), and the others are imported; the CLI names a
refused item without printing a secret-shaped label or key. An async put refused for its
own argument fails its own call only, even when a later call of the tick replaces it."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path

import pytest
from langgraph.store.memory import InMemoryStore
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.replay.cli.app import app
from memory_ledger.replay.langgraph_store import LedgerStore, import_store

GITHUB_TOKEN = "ghp_" + "1234567890abcdefghijklmnopqrstuvwxyz12"
OPENAI_KEY = "sk-proj-" + "abcdefghijklmnopqrstuvwxyz0123456789ABCD"


def fresh(engine: MemoryEngine) -> LedgerStore:
    return LedgerStore(engine, Namespace("acme", "import", uuid.uuid4().hex))


@pytest.mark.parametrize("batch", [100, 2])
def test_an_item_holding_a_lone_surrogate_is_refused_alone(
    engine: MemoryEngine, batch: int
) -> None:
    source = InMemoryStore()
    source.put(("users", "alice"), "ok", {"drink": "tea"})
    source.put(("users", "alice"), "fromfs", {"name": "report-\udcff.pdf"})
    source.put(("users", "alice"), "key-\udcff", {"drink": "milk"})
    source.put(("users", "b\udcff"), "k", {"drink": "water"})
    source.put(("users", "alice"), "ok2", {"drink": "coffee"})
    store = fresh(engine)
    report = import_store(source, store, batch=batch)
    assert report.items == 2
    assert sorted((r.key, r.reason_code, r.parameter) for r in report.refused) == [
        ("fromfs", "not_utf8", "value"),
        ("k", "not_utf8", "namespace"),
        ("key-\udcff", "not_utf8", "key"),
    ]
    assert sorted(i.key for i in store.search(("users",))) == ["ok", "ok2"]
    assert store.get(("users", "alice"), "ok2").value == {"drink": "coffee"}  # type: ignore[union-attr]


LEAKY_MODULE = f"""
from langgraph.store.memory import InMemoryStore

source = InMemoryStore()
source.put(("users", "alice"), "ok", {{"drink": "tea"}})
source.put(("users", "alice"), {GITHUB_TOKEN!r}, {{"a": 1}})
source.put(("users", {OPENAI_KEY!r}), "k", {{"a": 1}})
source.put(("users", "alice"), "fromfs", {{"name": "report-\\udcff.pdf"}})
"""


@pytest.mark.parametrize("as_json", [False, True])
def test_the_cli_names_refused_items_with_secret_shapes_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, as_json: bool
) -> None:
    (tmp_path / "lg_secret_keys.py").write_text(LEAKY_MODULE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    ns = ["--tenant", "acme", "--principal", "alice", "--scope-id", "cli"]
    args = ["langgraph", "import", "lg_secret_keys:source", *ns, "--store", str(tmp_path / "s")]
    done = CliRunner().invoke(app, [*args, "--json"] if as_json else args)
    assert done.exit_code == 1, done.output
    assert GITHUB_TOKEN not in done.output and OPENAI_KEY not in done.output
    assert "ghp_" not in done.output and "sk-proj" not in done.output
    if as_json:
        report = json.loads(done.stdout)
        assert report["items"] == 1
        assert sorted((r["namespace"], r["key"], r["reason_code"]) for r in report["refused"]) == [
            (["users", "[REDACTED:openai_token]"], "k", "secret_detected"),
            (["users", "alice"], "[REDACTED:github_token]", "secret_detected"),
            (["users", "alice"], "fromfs", "not_utf8"),
        ]
    else:
        assert "imported 1 items" in done.stdout
        assert "users/alice '[REDACTED:github_token]' (secret_detected)" in done.stdout
        assert "users/[REDACTED:openai_token] 'k' (secret_detected)" in done.stdout
        assert "users/alice 'fromfs' (not_utf8)" in done.stdout


def test_an_async_put_refused_for_its_argument_fails_its_own_call_only(
    engine: MemoryEngine,
) -> None:
    store = fresh(engine)

    async def tick() -> list[object]:
        return await asyncio.gather(
            store.aput(("users",), "a", {"name": "report-\udcff.pdf"}),
            store.aput(("users",), "a", {"name": "report.pdf"}),  # replaces it in the tick
            store.aput(("users",), "b", {"name": "other.pdf"}),
            return_exceptions=True,
        )

    refused, *done = asyncio.run(tick())
    assert isinstance(refused, InvalidArgumentError) and refused.reason_code == "not_utf8"
    assert done == [None, None]
    assert store.get(("users",), "a").value == {"name": "report.pdf"}  # type: ignore[union-attr]
    assert store.get(("users",), "b").value == {"name": "other.pdf"}  # type: ignore[union-attr]
