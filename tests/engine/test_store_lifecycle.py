"""Opening and closing a store: no implicit folder, typed errors after close (issue 25)."""

from __future__ import annotations

from pathlib import Path

import pytest

import memory_ledger
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.config import MemoryConfig
from memory_ledger.commands.errors import EngineClosedError
from memory_ledger.ledger.errors import InvalidArgumentError

NS = Namespace("acme", "alice", "assistant")


@pytest.mark.parametrize("opener", [memory_ledger.open, MemoryEngine.open])
@pytest.mark.parametrize(
    ("path", "reason"), [("", "empty_path"), ("  ", "empty_path"), (None, "path_required")]
)
def test_an_empty_or_missing_path_is_refused_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, opener: object, path: str | None, reason: str
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InvalidArgumentError) as raised:
        opener(path, sync=False)  # type: ignore[operator]
    assert raised.value.reason_code == reason and raised.value.parameter == "path"
    assert "path" in str(raised.value)
    assert list(tmp_path.iterdir()) == [], "nothing created in the current directory"


def test_without_a_path_the_given_configuration_names_the_folder(tmp_path: Path) -> None:
    config = MemoryConfig(store_dir=str(tmp_path / "configured"))
    with MemoryEngine.open(config=config, sync=False) as engine:
        engine.remember(NS, "Alice drinks espresso.")
    assert (tmp_path / "configured" / "ledger").is_dir()


def test_every_public_engine_call_after_close_is_an_engine_closed_error(tmp_path: Path) -> None:
    engine = MemoryEngine.open(tmp_path / "store", sync=False)
    engine.remember(NS, "Alice drinks espresso.")
    session = engine.session(NS, "s1")
    engine.close()
    calls = {
        "recall": lambda: engine.recall(NS, "espresso"),
        "remember": lambda: engine.remember(NS, "Bob likes tea."),
        "forget": lambda: engine.forget(NS, "espresso"),
        "session": lambda: engine.session(NS, "s2"),
        "head": lambda: engine.head,
        "read_records": lambda: engine.read_records(0, 10),
        "memory_map": lambda: engine.memory_map(NS),
        "wait_for_vectors": lambda: engine.wait_for_vectors(1),
        "erase": lambda: engine.erase("acme", "alice", "assistant"),
        "read_models": lambda: engine.read_models().__enter__(),
        "session.recall": lambda: session.recall("espresso"),
    }
    for name, call in calls.items():
        with pytest.raises(EngineClosedError) as raised:
            call()
        assert raised.value.reason_code == "engine_closed", name
        assert "closed" in str(raised.value) and str(tmp_path / "store") in str(raised.value)
        assert "LMDB datastore" not in str(raised.value)
    assert engine.closed
    engine.close()  # again: a no-op


def test_an_open_engine_says_it_is_not_closed(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "store", sync=False) as engine:
        assert not engine.closed
    assert engine.closed
