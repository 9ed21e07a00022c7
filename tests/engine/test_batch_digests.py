"""A batch's append tags its events with the digests its decision read under: each key
tag is derived once per batch (the decision reads under it, the activation is tagged with
it), and the tags written are those fresh digests derive. When the keyring reloads between
the decision and the append (another process changed the key store), the append derives
its tags afresh (``Keyring.still_current``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memory_ledger import Remember
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.ledger import digests as digests_module
from memory_ledger.ledger.events import MemoryActivated

NS = Namespace("acme", "alice", "digests")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    with MemoryEngine.open(tmp_path / "store") as opened:
        yield opened


def _items(n: int) -> list[Remember]:
    return [
        Remember(statement=f"Alice owns bicycle number {i}.", subject="Alice", predicate=f"b{i}")
        for i in range(n)
    ]


def _key_derivations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of every key tag derived from now on (keyed ids: one HMAC each)."""
    names: list[str] = []
    original = digests_module.keyed_uuid

    def counted(key: bytes, name: str) -> Any:
        if name.startswith("key\x1f"):
            names.append(name)
        return original(key, name)

    monkeypatch.setattr(digests_module, "keyed_uuid", counted)
    return names


def _tagged_as_fresh_digests_derive(engine: MemoryEngine, n: int) -> None:
    fresh = engine.keyring.digests.for_call()
    for i in range(n):
        tag = fresh.key_tag(NS, ("alice", f"b{i}"))
        found = [e for _, e in engine.read_tagged(tag) if isinstance(e, MemoryActivated)]
        assert [e.item.statement for e in found] == [f"Alice owns bicycle number {i}."]


def test_each_key_tag_of_a_batch_is_derived_once(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.remember(NS, "Alice lives in Lisbon.")  # the namespace's key exists
    assert engine.keyring.digests.keyed
    names = _key_derivations(monkeypatch)
    engine.remember_many(NS, _items(12))
    assert len(names) == 12 and len(set(names)) == 12
    monkeypatch.undo()
    _tagged_as_fresh_digests_derive(engine, 12)


def test_a_keyring_reloaded_before_the_append_tags_with_fresh_digests(
    engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine.remember(NS, "Alice lives in Lisbon.")
    keyring = engine.keyring
    original = keyring.refresh

    def reloading(*, force: bool = False) -> None:
        original(force=True)  # as when another process changed the key store

    names = _key_derivations(monkeypatch)
    monkeypatch.setattr(keyring, "refresh", reloading)
    engine.remember_many(NS, _items(5))
    assert len(names) == 10 and len(set(names)) == 5  # the decision's, then the append's
    monkeypatch.undo()
    _tagged_as_fresh_digests_derive(engine, 5)


def test_only_stamped_digests_of_the_current_state_are_current(engine: MemoryEngine) -> None:
    keyring = engine.keyring
    stamped = keyring.call_digests()
    assert keyring.still_current(stamped)
    assert not keyring.still_current(keyring.digests.for_call())  # not stamped
    assert not keyring.still_current(keyring.digests)
    keyring.refresh(force=True)
    assert not keyring.still_current(stamped)
    assert keyring.still_current(keyring.call_digests())
