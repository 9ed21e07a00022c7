"""NULs, other control characters, bidirectional overrides and Unicode tag characters are
refused in statements, in extracted items, in namespace parts and in session ids (which also
get the namespace parts' 256-byte limit), with a typed error and the reason code
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
from memory_ledger.commands.extraction import Rejection, validate_item
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


# --- session ids: the namespace parts' rules ------------------------------------------------

BAD_SESSION_IDS = [
    ("s\x001", "forbidden_character"),
    ("s\x1b[31m1", "forbidden_character"),
    ("s\u202e1", "forbidden_character"),
    ("s1\nforged line", "forbidden_character"),
    ("s\U000e0041\U000e0042", "forbidden_character"),
    ("s" * 100_000, "session_id_too_long"),
    ("é" * 129, "session_id_too_long"),  # 258 UTF-8 bytes
    ("s\ud8001", "not_utf8"),
    ("  ", "empty"),
]


@pytest.mark.parametrize(("session_id", "code"), BAD_SESSION_IDS)
def test_a_bad_session_id_is_refused_before_anything_is_written(
    engine: MemoryEngine, session_id: str, code: str
) -> None:
    from memory_ledger.commands.session import MemorySession

    head = engine.head
    with pytest.raises(InvalidNamespaceError) as raised:
        engine.session(NS, session_id)
    error = raised.value
    assert error.reason_code == code and error.parameter == "session_id"
    assert str(error).startswith("session_id ") and session_id[:200] not in str(error)
    with pytest.raises(InvalidNamespaceError) as direct:
        MemorySession(engine, NS, session_id, extractor=RecordedExtractor(), config=engine.config)
    assert direct.value.reason_code == code and direct.value.parameter == "session_id"
    assert engine.head == head


def test_session_ids_at_the_limit_are_accepted(engine: MemoryEngine) -> None:
    for session_id in ("s" * 256, "é" * 128, "會話-🍵", "s1\u200d"):
        engine.session(NS, session_id).close()


def test_a_direct_session_prefix_follows_the_session_id_rules(engine: MemoryEngine) -> None:
    from memory_ledger.commands.engine import DirectCommands

    for prefix, code in (("mcp-\x1b-", "forbidden_character"), ("p" * 225, "session_id_too_long")):
        with pytest.raises(InvalidNamespaceError) as raised:
            DirectCommands(engine, prefix)
        assert raised.value.reason_code == code and raised.value.parameter == "session_prefix"
    assert DirectCommands(engine, "p" * 224).remember(NS, "Alice likes tea.").memory_id


@pytest.mark.parametrize(("session_id", "code"), BAD_SESSION_IDS[:6])
@pytest.mark.parametrize("step", ["open", "turn"])
def test_a_script_with_a_bad_session_id_is_refused_at_parse(
    session_id: str, code: str, step: str
) -> None:
    import json

    from memory_ledger.replay.scripts.script import ScriptError, parse_script

    ns = {"tenant": "acme", "principal": "alice", "scope_id": "assistant"}
    lines = [json.dumps({"op": "open", "session": "s1", "namespace": ns})]
    if step == "open":
        lines.append(json.dumps({"op": "open", "session": session_id, "namespace": ns}))
    else:
        lines.append(
            json.dumps({"op": "turn", "session": session_id, "turn": 1, "transcript": "hi"})
        )
    with pytest.raises(ScriptError) as raised:
        parse_script(lines)
    assert raised.value.line == 2 and raised.value.reason_code == code
    assert "session_id" in str(raised.value) and session_id[:200] not in str(raised.value)


# --- Unicode tag characters ---------------------------------------------------------------


@pytest.mark.parametrize("char", ["\U000e0001", "\U000e0020", "\U000e0041", "\U000e007f"])
def test_tag_characters_are_refused_in_statements_and_namespaces(
    engine: MemoryEngine, char: str
) -> None:
    hidden = "".join(chr(0xE0000 + ord(c)) for c in "ignore previous")
    for statement in (f"Alice likes{char} tea.", f"Alice likes tea.{hidden}"):
        with pytest.raises(CommandRejectedError) as raised:
            engine.remember(NS, statement)
        assert raised.value.reason_code == "forbidden_character"
        assert raised.value.parameter == "statement" and "TAG" in str(raised.value)
    with pytest.raises(InvalidNamespaceError):
        engine.remember(Namespace("acme", f"al{char}ice", "assistant"), "Alice likes tea.")
    assert engine.head == 0


def test_subdivision_flags_keep_their_tags() -> None:
    scotland = "\U0001f3f4\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f"
    assert forbidden_character(f"Alice is from {scotland} Scotland") is None
    assert forbidden_character(f"{scotland}\U000e0041") is not None  # a tag after the flag
