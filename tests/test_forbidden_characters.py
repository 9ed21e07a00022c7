"""NULs, other control characters and bidirectional overrides are refused in statements, in
extracted items and in namespace parts, with a typed error and the reason code
``forbidden_character``; nothing is written. Normal Unicode text (accents, CJK, emoji,
Arabic and Hebrew written normally, direction marks, joiners, tabs and line breaks in a
statement) is accepted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.commands.errors import CommandRejectedError
from memory_ledger.commands.validation import Rejection, validate_item
from memory_ledger.ledger.arguments import BIDI_CONTROLS, forbidden_character
from memory_ledger.ledger.events import CandidateRejected
from memory_ledger.ledger.ids import InvalidNamespaceError
from memory_ledger.replay import filter_events
from tests.conftest import make_item

NS = Namespace("acme", "alice", "assistant")
FORBIDDEN = ["\x00", "\x07", "\x1b", "\x0b", "\x1f", "\x7f", "\x85", *sorted(BIDI_CONTROLS)]
"""NUL, other C0/C1 controls (vertical tab and U+001F/U+0085 are whitespace to str.split:
refused, not silently collapsed) and every bidirectional embedding, override and isolate."""
NORMAL = [
    "Zoë moved to Kraków in März.",
    "爱丽丝喜欢喝绿茶。",
    "アリスは緑茶が好きです。",
    "Alice loves 🍵 and 👩‍👩‍👧 trips.",  # the family emoji holds zero-width joiners
    "أليس تحب الشاي الأخضر.",
    "אליס אוהבת תה ירוק.",
    "Alice wrote \u200fשלום\u200e in her card.",  # direction marks, as RTL text uses them
    "Alice's list:\n- tea\n\t- green\r\n- coffee",
]


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    with MemoryEngine.open(tmp_path / "store", sync=False, index_in_background=False) as opened:
        yield opened


@pytest.mark.parametrize("char", FORBIDDEN)
def test_a_statement_with_a_forbidden_character_is_refused(engine: MemoryEngine, char: str) -> None:
    head = engine.head
    for call in (
        lambda: engine.remember(NS, f"Alice likes {char}green tea."),
        lambda: engine.correct(NS, f"Alice likes green{char} tea."),
    ):
        with pytest.raises(CommandRejectedError) as raised:
            call()
        error = raised.value
        assert error.reason_code == "forbidden_character" and error.parameter == "statement"
        assert f"U+{ord(char):04X}" in str(error) and "index" in str(error)
    assert engine.head == head


def test_a_session_command_with_a_bidi_override_is_refused(engine: MemoryEngine) -> None:
    session = engine.session(NS, "s1")
    head = engine.head
    with pytest.raises(CommandRejectedError) as raised:
        session.apply_explicit_command("remember", "Pay \u202eusd 01\u202c to Bob.", 1)
    assert raised.value.reason_code == "forbidden_character"
    assert "U+202E RIGHT-TO-LEFT OVERRIDE" in str(raised.value)
    assert engine.head == head


@pytest.mark.parametrize("part", ["tenant", "principal", "scope_id"])
@pytest.mark.parametrize("char", ["\x00", "\u202e", "\u2066", "\n", "\x1b"])
def test_a_namespace_part_with_a_forbidden_character_is_refused(
    engine: MemoryEngine, part: str, char: str
) -> None:
    parts = {"tenant": "acme", "principal": "alice", "scope_id": "assistant"}
    parts[part] = f"al{char}ice"
    head = engine.head
    with pytest.raises(InvalidNamespaceError) as raised:
        engine.remember(Namespace(**parts), "Alice likes green tea.")
    assert raised.value.reason_code == "forbidden_character" and raised.value.parameter == part
    assert f"namespace {part} holds U+{ord(char):04X}" in str(raised.value)
    assert engine.head == head


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("statement", "Alice likes \u202egreen tea."),
        ("statement", "Alice likes\x00 green tea."),
        ("subject", "Al\u2067ice"),
        ("reason", "helps\x1b answer"),
        ("tags", ["drinks", "te\u202ba"]),
    ],
)
def test_an_extracted_item_with_a_forbidden_character_is_rejected(
    engine: MemoryEngine, field: str, value: object
) -> None:
    """The model's item is recorded as a rejection with the reason code; its detail names
    the field and the character, never the text."""
    item = {**make_item("Alice likes green tea."), field: value}
    outcome = validate_item(item)
    assert isinstance(outcome, Rejection) and outcome.reason_code == "forbidden_character"
    assert outcome.detail.startswith(f"{field} holds U+") and "Alice" not in outcome.detail
    extractor = RecordedExtractor()
    session = engine.session(NS, "s1", extractor=extractor)
    extractor.provide(1, [item])
    session.observe_final_transcript(1, "user: I like green tea.")
    rejected = [e for _, e in filter_events(engine) if isinstance(e, CandidateRejected)]
    assert [e.reason_code for e in rejected] == ["forbidden_character"]


@pytest.mark.parametrize("statement", NORMAL)
def test_normal_unicode_statements_are_remembered(engine: MemoryEngine, statement: str) -> None:
    done = engine.remember(NS, statement)
    assert done.memory_id is not None
    assert isinstance(validate_item(make_item(statement)), Rejection) is False
    engine.remember(Namespace("ägypten-株式会社", "أليس", "אליס 🍵"), statement)


NORMAL_CHARS = st.one_of(
    st.characters(categories=["L", "M", "N", "P", "S", "Zs"]),
    st.characters(min_codepoint=0x0590, max_codepoint=0x06FF, exclude_categories=["Cc", "Cs"]),
    st.sampled_from(["\u200d", "\u200c", "\u200e", "\u200f", "\u061c", "\ufe0f"]),
)
"""Letters, marks, numbers, punctuation, symbols and spaces of every script (CJK, emoji...),
Hebrew and Arabic blocks, and the joiners and direction marks normal text uses."""


@given(
    text=st.text(NORMAL_CHARS, min_size=1, max_size=60),
    layout=st.lists(st.sampled_from(["\t", "\n", "\r\n", " "]), max_size=3).map("".join),
)
def test_normal_unicode_text_is_never_refused_for_its_characters(text: str, layout: str) -> None:
    """Property: text of normal characters (with tabs and line breaks in a statement) never
    hits ``forbidden_character``, as a statement, an item or a namespace part."""
    statement = f"Alice {text}{layout}{text}"
    assert forbidden_character(statement, line_breaks=True) is None
    outcome = validate_item(make_item(statement))
    assert not (isinstance(outcome, Rejection) and outcome.reason_code == "forbidden_character")
    assert forbidden_character(text) is None
    if text.strip() and len(text.encode("utf-8")) <= 256:
        Namespace(text, text, text).validated()
