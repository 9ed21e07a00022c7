"""The door told which items a command's validation already put to its questions
(``check_events(..., cleared=...)``, :class:`~memory_ledger.commands.canonical.
explicit_command.CheckedItem`): trusted by identity only, so a secret anywhere else, or in
an equal item that is not the same object, is still refused; and a batch with a secret in
any field of a remember is refused, nothing written."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

import msgspec
import pytest

from memory_ledger.commands import CommandRejectedError, MemoryEngine, Namespace
from memory_ledger.commands.canonical.explicit_command import checked_remember
from memory_ledger.commands.engine import Remember
from memory_ledger.commands.secret_door import SecretRefusedError, check_events
from memory_ledger.ledger.events import ExplicitCommandApplied, ExtractedItem

CANARY = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
PASSWORD = "Zq8!vR2#mK9pL4xW"
NS = Namespace("acme", "alice", "assistant")


def _raw(**fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "kind": "semantic",
        "subject": None,
        "predicate": None,
        "value": None,
        "statement": "Alice likes tea.",
        "source": "fact",
        "scope": "user",
        "reason": "the host asked to remember this",
        "importance": 0.9,
        "confidence": 1.0,
        "tags": [],
    }
    return {**base, **fields}


def _command(item: ExtractedItem, statement: str | None = None) -> ExplicitCommandApplied:
    return ExplicitCommandApplied(
        originator_id=uuid4(),
        originator_version=2,
        recorded_at=datetime.now(UTC),
        namespace=NS,
        session_id="batch-1",
        turn_id=1,
        command_id=uuid4(),
        intent="remember",
        statement=statement if statement is not None else item.statement,
        item=item,
    )


def test_a_cleared_item_is_trusted_by_identity_never_by_value() -> None:
    _, checked = checked_remember(_raw(), "ops[0].statement")
    assert checked.cleared
    check_events([_command(checked.item)], cleared=[checked.item])
    # the same values in another object, with a secret planted in one field: refused
    for field, planted in (("value", CANARY), ("reason", f"token {CANARY}"), ("tags", (CANARY,))):
        other = msgspec.structs.replace(checked.item, **{field: planted})
        with pytest.raises(SecretRefusedError):
            check_events([_command(other)], cleared=[checked.item])
    # a secret in another string of the event (the command's own statement): refused
    with pytest.raises(SecretRefusedError):
        check_events([_command(checked.item, f"my key {CANARY}")], cleared=[checked.item])


def test_an_item_cleaning_changed_is_not_cleared() -> None:
    """Validation asks the door's question of the subject as given; an item whose subject
    cleaning changed is walked by the door as any other."""
    _, kept = checked_remember(_raw(subject="Alice", predicate="likes"), "s")
    _, cleaned = checked_remember(_raw(subject="  Alice   Smith ", predicate="likes"), "s")
    assert kept.cleared
    assert cleaned.item.subject == "Alice Smith"
    assert not cleaned.cleared


@pytest.mark.parametrize(
    "fields",
    [
        {"statement": f"my token is {CANARY}"},
        {"subject": CANARY},
        {"predicate": CANARY},
        {"subject": "Alice", "predicate": "password", "value": PASSWORD},
        {"value": f"token {CANARY}"},
        {"tags": ("fine", CANARY)},
    ],
)
def test_a_secret_in_any_field_of_a_remember_refuses_the_batch(
    tmp_path: Path, fields: dict[str, Any]
) -> None:
    with MemoryEngine.open(tmp_path / "store", index_in_background=False) as engine:
        engine.remember_many(NS, ["Alice likes tea."])
        head = engine.head
        op = Remember(**{"statement": "Alice's note.", **fields})
        with pytest.raises(CommandRejectedError) as refused:
            engine.remember_many(NS, ["Bob likes coffee.", op])
        assert refused.value.reason_code == "secret_detected"
        assert CANARY not in str(refused.value) and PASSWORD not in str(refused.value)
        assert engine.head == head
