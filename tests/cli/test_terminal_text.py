"""Stored text reaches the operator's terminal with its control characters made visible.

New session ids, statements and namespace parts holding control characters are refused at
the door (tests/engine/test_forbidden_characters.py); a store written before that rule may still
hold them. The CLI must never print them raw.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.ledger.events import SessionOpened
from memory_ledger.ledger.ids import session_stream_id
from memory_ledger.replay.cli.app import app
from memory_ledger.replay.cli.terminal_text import shown

HOSTILE = "s\x1b[31mRED\x1b[0m\x00\u202eevil\U000e0041"


def test_a_stored_escape_sequence_is_shown_escaped_by_events(tmp_path: Path) -> None:
    store = tmp_path / "store"
    ns = Namespace("acme", "alice", "assistant")
    with MemoryEngine.open(store) as engine:
        # Appended as a store written before session ids were checked would hold it.
        engine.append(
            [
                SessionOpened(
                    originator_id=session_stream_id(ns, HOSTILE),
                    originator_version=1,
                    recorded_at=datetime(2024, 1, 1, tzinfo=UTC),
                    namespace=ns,
                    session_id=HOSTILE,
                    activation_policy="auto",
                    extractor_id="test",
                )
            ]
        )
    result = CliRunner().invoke(
        app, ["events", "--store", str(store)], catch_exceptions=False, env={"COLUMNS": "400"}
    )
    assert result.exit_code == 0, result.output
    for raw in ("\x1b", "\x00", "\u202e", "\U000e0041"):
        assert raw not in result.stdout
    assert "\\x1b[31mRED" in result.stdout
    assert "\\u202eevil" in result.stdout


@given(st.text())
def test_shown_text_holds_no_control_override_or_tag_character(text: str) -> None:
    out = shown(text)
    for char in out:
        code = ord(char)
        assert char in "\t\n" or not (code < 0x20 or 0x7F <= code <= 0x9F)
        assert not (0x202A <= code <= 0x202E or 0x2066 <= code <= 0x2069)
        assert not 0xE0000 <= code <= 0xE007F


@given(st.text(alphabet=st.characters(blacklist_categories=("Cc", "Cf", "Cs"))))
def test_ordinary_text_is_shown_unchanged(text: str) -> None:
    assert shown(text) == text
