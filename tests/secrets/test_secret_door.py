"""One secret scan at the ledger's door (issue 25 item 2): every string field of every event,
on every write path, refused before a byte is written, the field named, the value never
echoed; and a canary secret that never reaches any byte under the store folder."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import memory_ledger
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.aio import AsyncMemoryEngine
from memory_ledger.commands.engine import Remember
from memory_ledger.commands.secret_door import SecretRefusedError, check_event, check_identifiers
from memory_ledger.ledger.events import EVENT_CLASSES, ErasedPayload, ExtractedItem, LedgerEvent
from memory_ledger.ledger.ids import InvalidNamespaceError
from tests.ledger import test_events_mapper as shapes

CANARY = "ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"
"""A GitHub token shape: a secret in any field, whatever the field."""

PASSWORD = "Zq8!vR2#mK9pL4xW"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
NS = Namespace("acme", "alice", "assistant")
STORED = tuple(cls for cls in EVENT_CLASSES if cls is not ErasedPayload)


def _paths(value: Any, path: str = "") -> list[str]:
    """Every string position inside ``value`` (the door's traversal order)."""
    if isinstance(value, str):
        return [path]
    if isinstance(value, msgspec.Struct):
        found: list[str] = []
        for name in value.__struct_fields__:
            found += _paths(getattr(value, name), f"{path}.{name}" if path else name)
        return found
    if isinstance(value, tuple):
        return [p for i, v in enumerate(value) for p in _paths(v, f"{path}[{i}]")]
    return []


def _plant(value: Any, target: str, path: str = "") -> Any:
    """``value`` with the string at ``target`` replaced by :data:`CANARY`."""
    if isinstance(value, str):
        return CANARY if path == target else value
    if isinstance(value, msgspec.Struct):
        changes = {
            name: _plant(getattr(value, name), target, f"{path}.{name}" if path else name)
            for name in value.__struct_fields__
        }
        return msgspec.structs.replace(value, **changes)
    if isinstance(value, tuple):
        return tuple(_plant(v, target, f"{path}[{i}]") for i, v in enumerate(value))
    return value


plain_words = st.sampled_from(["alice", "blue", "Lisbon", "tea", "x"])


@pytest.mark.parametrize("cls", STORED, ids=lambda c: c.__name__)
@settings(max_examples=5, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data())
def test_every_string_field_of_every_event_class_is_scanned(
    cls: type[LedgerEvent], data: st.DataObject
) -> None:
    original = shapes.texts
    shapes.texts = plain_words  # type: ignore[assignment]
    try:
        event = data.draw(shapes.struct_strategy(cls))
    finally:
        shapes.texts = original
    check_event(event)  # plain words pass
    for path in _paths(event):
        planted = _plant(event, path)
        with pytest.raises(SecretRefusedError) as refused:
            check_event(planted)
        where = refused.value.field_path
        assert where.startswith(f"{cls.__name__}.")
        assert path.startswith(where.split(".", 1)[1].split("[")[0]), (path, where)
        assert CANARY not in str(refused.value) and CANARY not in repr(refused.value.args)


def _item(**fields: Any) -> ExtractedItem:
    base: dict[str, Any] = {
        "kind": "semantic",
        "subject": "Alice",
        "statement": "Alice's database login.",
        "source": "fact",
        "scope": "user",
        "reason": "login help",
        "importance": 0.8,
        "confidence": 0.9,
    }
    return ExtractedItem(**{**base, **fields})


def test_a_value_is_judged_with_its_predicate_and_as_a_whole_field() -> None:
    from memory_ledger.commands.secret_door import item_secret_field

    assert item_secret_field(_item(predicate="password", value=PASSWORD)) == "value"
    assert item_secret_field(_item(predicate="lives in", value="Lisbon")) is None
    assert item_secret_field(_item(predicate="favourite sport", value="hunter")) is None


def _store_bytes(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())


@pytest.mark.parametrize(
    "fields",
    [
        {"subject": "Alice", "predicate": "password", "value": PASSWORD},
        {"value": CANARY},
        {"tags": [CANARY]},
        {"subject": CANARY},
        {"predicate": CANARY},
    ],
    ids=["password-value", "value", "tag", "subject", "predicate"],
)
def test_remember_refuses_a_secret_in_any_field_and_writes_nothing(
    tmp_path: Path, fields: dict[str, Any]
) -> None:
    with memory_ledger.open(tmp_path / "store") as engine:
        head = engine.head
        with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
            engine.remember(NS, "Alice's database login.", **fields)
        assert refused.value.reason_code == "secret_detected"
        assert getattr(refused.value, "parameter", None) in fields
        for secret in (PASSWORD, CANARY):
            assert secret not in str(refused.value)
        assert engine.head == head  # nothing written, not even the command's session
    data = _store_bytes(tmp_path / "store")
    assert PASSWORD.encode() not in data and CANARY.encode() not in data


def test_a_statement_that_is_nothing_but_a_password_is_refused(tmp_path: Path) -> None:
    """A bare generated password (or a random 20+ character token) refused as a subject,
    value or tag was stored as a whole statement; now it is refused there too, in the one
    validation every remember and extracted item passes. One-token statements that are no
    secret stay, and a document's statement (a LangGraph value's JSON) is judged by the
    door's scan alone."""
    bare = ["Zq8!xPw3LkV7#mT2", f"  '{PASSWORD}'  ", "a9F3kQ7zL2xW8pR4tY6u"]
    with memory_ledger.open(tmp_path / "store") as engine:
        for statement in bare:
            with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
                engine.remember(NS, statement)
            assert refused.value.reason_code == "secret_detected"
            assert getattr(refused.value, "parameter", None) == "statement"
            with pytest.raises(memory_ledger.MemoryLedgerError):
                engine.remember_many(NS, [statement])
        assert engine.head == 0
        kept = ["Espresso!", "C++/Rust/Go", "v1.2.3-rc1", "https://example.com/a?b=1", "ACME-42"]
        for statement in kept:
            engine.remember(NS, statement)
        # compact JSON is one token shaped like a generated password: a document is not judged
        engine.apply_batch(NS, [Remember(statement='{"Tag":"X=1","n":5,"t":"abc"}', document=True)])
        assert len(engine.retrievable_memories(NS)) == len(kept) + 1
    data = _store_bytes(tmp_path / "store")
    assert not any(secret.strip(" '").encode() in data for secret in bare)


def test_a_prose_passphrase_is_refused_and_a_sentence_about_passwords_is_kept(
    tmp_path: Path,
) -> None:
    """ "My password: correct horse battery staple" was stored as a memory; the door now
    refuses it, while ordinary sentences about passwords are remembered."""
    phrase = "correct horse battery staple"
    with memory_ledger.open(tmp_path / "store") as engine:
        head = engine.head
        with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
            engine.remember(NS, f"My password: {phrase}")
        assert refused.value.reason_code == "secret_detected"
        assert phrase not in str(refused.value)
        assert engine.head == head
        for sentence in (
            "I forgot my password yesterday.",
            "The password policy requires 12 characters.",
        ):
            engine.remember(NS, sentence)
        assert len(engine.retrievable_memories(NS)) == 2
    assert phrase.encode() not in _store_bytes(tmp_path / "store")


def test_the_async_engine_and_sessions_pass_the_same_door(tmp_path: Path) -> None:
    store = tmp_path / "store"

    async def main() -> None:
        async with AsyncMemoryEngine.open(store) as engine:
            with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
                await engine.remember(NS, "Alice's login.", predicate="password", value=PASSWORD)
            assert refused.value.reason_code == "secret_detected"

    asyncio.run(main())
    with MemoryEngine.open(store) as engine:
        with engine.session(NS, "chat-1") as session:
            item = {
                "kind": "semantic",
                "subject": "Alice",
                "predicate": "api key",
                "value": CANARY,
                "statement": "Alice has an API key for the billing service.",
                "source": "fact",
                "scope": "user",
                "reason": "billing help",
                "importance": 0.8,
                "confidence": 0.9,
            }
            with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
                session.apply_explicit_command("remember", item["statement"], 1, item=item)
            assert refused.value.reason_code == "secret_detected"
            session.observe_final_transcript(1, f"user: my token is {CANARY} keep it")
            session.finish()
    data = _store_bytes(store)
    assert CANARY.encode() not in data and PASSWORD.encode() not in data


def test_a_canary_through_a_session_script_never_reaches_the_store(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ns = {"tenant": "acme", "principal": "alice", "scope_id": "assistant"}
    steps = [
        {"op": "open", "session": "s1", "namespace": ns},
        {
            "op": "turn",
            "session": "s1",
            "turn": 1,
            "transcript": f"user: the deploy key is {CANARY}",
            "extracted": [
                {
                    "kind": "semantic",
                    "subject": "Alice",
                    "predicate": "password",
                    "value": PASSWORD,
                    "statement": "Alice set a new database password.",
                    "source": "fact",
                    "scope": "user",
                    "reason": "login help",
                    "importance": 0.8,
                    "confidence": 0.9,
                    "tags": [AWS_SECRET],
                }
            ],
        },
        {"op": "finish", "session": "s1"},
    ]
    script = tmp_path / "script.jsonl"
    script.write_text("".join(json.dumps(step) + "\n" for step in steps))
    cli = [sys.executable, "-m", "memory_ledger.replay"]
    run = subprocess.run(
        [*cli, "run", str(script), "--store", str(store), "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    outputs = run.stdout + run.stderr
    for secret in (CANARY, PASSWORD, AWS_SECRET):
        assert secret not in outputs
    assert "Traceback" not in outputs
    data = _store_bytes(store)
    for secret in (CANARY, PASSWORD, AWS_SECRET):
        assert secret.encode() not in data


def test_erase_with_a_secret_label_is_refused_before_any_key_is_destroyed(tmp_path: Path) -> None:
    """Found by an acceptance check: the keys were destroyed (and the label kept in the key
    store) before the door refused the record, leaving a store that could not be opened."""
    import os

    key = tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    store = tmp_path / "enc"
    with memory_ledger.open(store, master_key=key) as engine:
        engine.remember(NS, "Carol likes tea.")
        with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
            engine.erase(NS.tenant, NS.principal, requested_by=f"ticket 42, password={PASSWORD}")
        assert refused.value.reason_code == "secret_detected"
        assert PASSWORD not in str(refused.value)
    with memory_ledger.open(store, master_key=key) as engine:  # still opens, still readable
        assert [hit.statement for hit in engine.recall(NS, "tea")] == ["Carol likes tea."]
    assert PASSWORD.encode() not in _store_bytes(store)


def test_an_identifier_holding_a_secret_is_refused_by_its_label_never_its_value() -> None:
    """One rule for identifiers (issue 38 item 1): the session and the bulk forget both ask
    :func:`check_identifiers`; a clean or missing identifier passes."""
    check_identifiers((("tenant", "acme"), ("session_id", None), ("scope_id", "")), "stored")
    with pytest.raises(InvalidNamespaceError) as refused:
        check_identifiers((("tenant", "acme"), ("principal", CANARY)), "stored in every event")
    assert refused.value.reason_code == "secret_detected"
    assert refused.value.parameter == "principal"
    assert CANARY not in str(refused.value)
