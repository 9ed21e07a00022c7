"""Defects an independent acceptance check found after issue 25's first fixes, each with the
reproduction it reported (the trust and bad-input rules: a typed error at the call, nothing
lost, no session left unusable)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest

import memory_ledger
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.secret_door import SecretRefusedError
from memory_ledger.replay.cli.common import describe_error

NS = Namespace("acme", "alice", "assistant")


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    with MemoryEngine.open(tmp_path / "store") as opened:
        yield opened


def test_a_lone_surrogate_in_a_session_recall_is_refused_at_the_call(engine: MemoryEngine) -> None:
    """Before: recall returned, its buffered RecallServed could never be encoded, and every
    later write of the session raised a raw UnicodeEncodeError (finish impossible)."""
    with engine.session(NS, "r1") as session:
        session.observe_final_transcript(1, "user: hi")
        with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
            session.recall("tea \udc80", turn_id=1)
        assert refused.value.reason_code == "not_utf8"
        with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
            session.prepare(2, "user: \udc80")
        assert refused.value.reason_code == "not_utf8"
        session.observe_final_transcript(3, "user: fine")
        assert session.finish().already_reconciled is False


def test_a_read_record_the_door_refuses_never_blocks_the_next_command(
    engine: MemoryEngine,
) -> None:
    from memory_ledger.ledger.events import RecallServed

    with engine.session(NS, "r2") as session:
        session.observe_final_transcript(1, "user: hi")
        bad = RecallServed(
            originator_id=uuid4(),
            originator_version=1,
            recorded_at=datetime.now(UTC),
            namespace=NS,
            session_id="ghp_A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8",
            turn_id=1,
            query="x",
            path="live",
            results=(),
        )
        session.stream._reads.append(bad)
        session.observe_final_transcript(2, "user: still writing")  # not blocked
        assert session.finish().already_reconciled is False


@pytest.mark.parametrize("tags", [None, {"a": 1}, {"a", "b"}, b"ab", 7])
def test_tags_must_be_a_list_or_tuple_of_strings(engine: MemoryEngine, tags: Any) -> None:
    head = engine.head
    with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
        engine.remember(NS, "Alice likes tea.", tags=tags)
    assert refused.value.reason_code == "invalid_tags"
    assert engine.head == head


def test_the_cli_names_a_refusal_instead_of_redacting_the_whole_line() -> None:
    """Before: 'SecretRefusedError: ...' read as a ``secret: value`` assignment and the CLI
    printed 'SecretRefusedError: [REDACTED:secret_keyword]', telling the user nothing."""
    line = describe_error(SecretRefusedError("MemoryActivated", "item.value"))
    assert "item.value" in line and "REDACTED" not in line
    assert "Zq8" not in describe_error(ValueError("password=Zq8!vR2#mK9pL4xW"))


def test_mcp_refuses_a_secret_in_its_namespace_at_start_up(tmp_path: Path) -> None:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "memory_ledger.replay",
            "mcp",
            "--store",
            str(tmp_path / "store"),
            "--tenant",
            "acme",
            "--principal",
            "AKIAZ7QW3RT5YU8IOP2M",
            "--scope-id",
            "chat",
            "--embeddings",
            "none",
        ],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    assert "secret-shaped" in run.stderr and "AKIAZ7QW3RT5YU8IOP2M" not in run.stderr
    assert "Traceback" not in run.stderr


# A newcomer's review ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "parameter"),
    [
        ({"subject": "Al\udcffice", "predicate": "drinks"}, "subject"),
        ({"subject": "Alice", "predicate": "drin\ud800ks"}, "predicate"),
        ({"value": "t\ud800ea"}, "value"),
        ({"tags": ["drin\udcffks"]}, "tags"),
    ],
)
def test_a_lone_surrogate_in_any_item_field_is_refused_with_a_reason_code(
    engine: MemoryEngine, fields: dict[str, Any], parameter: str
) -> None:
    """Before: a lone surrogate in a keyed fact's subject or predicate reached the key's
    uuid5 while the command was planned: a raw UnicodeEncodeError, not a typed error."""
    with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
        engine.remember(NS, "Alice likes tea.", **fields)
    assert refused.value.reason_code == "not_utf8"
    assert getattr(refused.value, "parameter", None) == parameter
    with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
        engine.remember_many(NS, [memory_ledger.Remember(statement="Alice likes tea.", **fields)])
    assert refused.value.reason_code == "not_utf8"
    assert engine.head == 0


@pytest.mark.parametrize("ops", [None, 5, 2.5, object()])
def test_a_batch_that_is_not_a_sequence_is_a_typed_error(engine: MemoryEngine, ops: Any) -> None:
    """Before: ``remember_many(ns, None)`` and ``apply_batch(ns, 5)`` raised a raw
    TypeError ('NoneType' object is not iterable)."""
    for call in (engine.remember_many, engine.apply_batch):
        with pytest.raises(memory_ledger.MemoryLedgerError) as refused:
            call(NS, ops)
        assert getattr(refused.value, "parameter", None) == "ops"
    assert engine.head == 0
