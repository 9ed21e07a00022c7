"""Derived ids stay the RFC 4122 uuid5 of their natural keys (the fast derivation in
``ledger.ids`` must never change an id: every stored stream is addressed by one)."""

from __future__ import annotations

import pickle
from uuid import UUID, uuid5

from hypothesis import given
from hypothesis import strategies as st

from memory_ledger.ledger.ids import (
    ID_ROOT,
    Namespace,
    command_id,
    memory_id,
    normalize_statement,
    session_stream_id,
)

_TEXT = st.text(st.characters(codec="utf-8"), max_size=80)
_PART = st.text(st.characters(min_codepoint=33, max_codepoint=0x2FFF), min_size=1, max_size=12)


@given(_PART, _PART, _PART, _TEXT)
def test_memory_id_is_the_uuid5_of_its_key(
    tenant: str, principal: str, scope: str, text: str
) -> None:
    namespace = Namespace(tenant, principal, scope)
    derived = memory_id(namespace, text)
    expected = uuid5(ID_ROOT, "memory\x1f" + namespace.key() + "\x1f" + text)
    assert derived == expected
    assert (str(derived), hash(derived), derived.version, derived.variant) == (
        str(expected),
        hash(expected),
        5,
        expected.variant,
    )
    assert derived.is_safe == expected.is_safe
    assert pickle.loads(pickle.dumps(derived)) == expected


@given(_TEXT, st.integers(min_value=0, max_value=10**6), st.sampled_from(["remember", "forget"]))
def test_command_and_session_ids_are_uuid5(text: str, turn: int, intent: str) -> None:
    namespace = Namespace("t", "p", "s")
    stream = session_stream_id(namespace, "direct-" + text.replace("\x1f", ""))
    assert stream == uuid5(
        ID_ROOT, "session\x1f" + namespace.key() + "\x1f" + "direct-" + text.replace("\x1f", "")
    )
    key = f"command\x1f{stream}\x1f{turn}\x1f{intent}\x1f" + normalize_statement(text)
    assert command_id(stream, turn, intent, text) == uuid5(ID_ROOT, key)
    assert isinstance(command_id(stream, turn, intent, text), UUID)


def _general_key(statement: str) -> str:
    """normalize_statement's general path, written out (the ASCII shortcut must equal it)."""
    import re
    import unicodedata

    from memory_ledger.ledger.ids import drop_invisible

    text = unicodedata.normalize("NFKC", drop_invisible(statement)).casefold()
    text = re.sub(r"\s+", " ", text).strip()
    return re.sub(r"[\s.!?。！？]+$", "", text)


@given(
    st.text(st.characters(max_codepoint=127), max_size=60)
    | st.text(st.sampled_from(" \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f.!?aZ9"), max_size=30)
)
def test_the_ascii_key_is_the_general_key(statement: str) -> None:
    """An ASCII statement's exact-duplicate key (the memory id's input) is the one the
    general path (invisible characters, NFKC, casefold, whitespace, trailing punctuation)
    gives: the shortcut never changes a memory id."""
    normalize_statement.cache_clear()
    assert normalize_statement(statement) == _general_key(statement)
