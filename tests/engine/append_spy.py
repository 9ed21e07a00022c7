"""A spy on ``MemoryEngine.append`` shared by the tests of what a command appends."""

from __future__ import annotations

from typing import Any

import pytest

from memory_ledger.commands import MemoryEngine
from memory_ledger.ledger.events import LedgerEvent


def appended(engine: MemoryEngine, monkeypatch: pytest.MonkeyPatch) -> list[list[LedgerEvent]]:
    """Every event list ``engine.append`` is given from now on, in call order (the call
    still appends)."""
    batches: list[list[LedgerEvent]] = []
    original = engine.append

    def counted(events: Any, **kwargs: Any) -> list[int]:
        batches.append(list(events))
        return original(events, **kwargs)

    monkeypatch.setattr(engine, "append", counted)
    return batches
