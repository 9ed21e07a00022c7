"""Opening and closing a store: no implicit folder, typed errors after close (issue 25)."""

from __future__ import annotations

from pathlib import Path

import pytest

import memory_ledger
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.config import MemoryConfig
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
