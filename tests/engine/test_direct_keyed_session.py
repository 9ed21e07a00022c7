"""``DirectCommands.run_many(..., session_id=...)``: a caller-derived session id makes a
command idempotent (the imports' rerun rule): the same id again writes nothing."""

from __future__ import annotations

import pytest

from memory_ledger.commands.canonical import CommandSpec
from memory_ledger.commands.engine import DirectCommands, MemoryEngine
from memory_ledger.commands.errors import CommandRejectedError
from memory_ledger.ledger.ids import Namespace


def test_a_session_id_already_in_the_ledger_is_refused(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    direct = DirectCommands(engine, "import-")
    spec = CommandSpec(intent="remember", text="Alice likes tea.")
    session_id, _, _ = direct.run_many(namespace, [spec], session_id="import-abc")
    assert session_id == "import-abc"
    head = engine.head
    with pytest.raises(CommandRejectedError) as caught:
        direct.run_many(namespace, [spec], session_id="import-abc")
    assert caught.value.reason_code == "session_exists"
    assert engine.head == head
    # The same id in another namespace is another session.
    other = Namespace("acme", "bob", "assistant")
    direct.run_many(other, [spec], session_id="import-abc")
    assert engine.head > head


def test_a_session_id_must_start_with_the_prefix(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    direct = DirectCommands(engine, "import-")
    spec = CommandSpec(intent="remember", text="Alice likes tea.")
    with pytest.raises(CommandRejectedError) as caught:
        direct.run_many(namespace, [spec], session_id="direct-abc")
    assert caught.value.reason_code == "invalid_session_id"
    assert engine.head == 0
