"""The whole-field judge's shortcuts (``secrets.fields``) answer as the general code did:
the whitespace test is ``str.isspace`` over every character, a label's credential kind is
the label pattern's groups, a credential value judged through the cached kind equals the
uncached judgement; and the caches keyed by scanned text empty with the scan cache."""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_ledger.commands.secrets import clear_scan_cache, fields
from tests.secrets.test_secrets import FIELD_SECRETS, GITHUB_TOKEN, ORDINARY_FIELDS

LABELS = [
    "password", "db password", "dbPassword", "API_KEY", "api key", "access key", "pin",
    "pin code", "wifi pass", "password for the NAS", "password hint", "token count",
    "secret ingredient", "house key", "key", "favourite sport", "Passwort", "credentials",
    "client secret", "langgraph-item", "ssh key", "PIN number", "lives in", "",
]  # fmt: skip


def _reference_credential_value(label: str, token: str) -> bool:
    """``_credential_value`` as it was before the label's kind was cached."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", unicodedata.normalize("NFKC", label))
    words = " ".join(re.sub(r"[_\-.:/]+", " ", words).lower().split())
    match = fields._P_CREDENTIAL_LABEL.search(words)
    if match is None or not token or any(c.isspace() for c in token):
        return False
    if (
        fields.value_is_reference(token)
        or fields.names_no_secret(token)
        or fields._address_like(token)
    ):
        return False
    if token.lower() in fields._NOT_A_VALUE or any(c in "()[]{}" for c in token):
        return False
    if match.group(1):
        return fields.P_PIN.fullmatch(token) is not None or fields.short_password_value(
            "pass", token
        )
    if match.group(2):
        return len(token) >= 4
    return fields.short_password_value("pass", token)


_TEXT = st.text(
    alphabet=st.one_of(
        st.characters(),
        st.sampled_from(" \t\n\x0b\x0c\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u2000\u2028\u3000"),
        st.sampled_from("aZ9!#@_-./:=+~"),
    ),
    max_size=40,
)


@given(_TEXT)
@settings(max_examples=500)
def test_the_whitespace_test_is_isspace_over_every_character(text: str) -> None:
    assert fields._has_space(text) == any(c.isspace() for c in text)


def test_every_code_point_is_whitespace_alike() -> None:
    for code in range(0x110000):
        char = chr(code)
        assert fields._has_space(char) == char.isspace(), hex(code)


_TOKENS = st.one_of(
    _TEXT,
    st.sampled_from(
        [
            *(text for text, _ in FIELD_SECRETS),
            *ORDINARY_FIELDS,
            "1234",
            "hunter2",
            "Zq8!vR2#mK9pL4xW",
            "forgotten",
        ]
    ),
)


@given(st.one_of(st.sampled_from(LABELS + [lb for _, lb in FIELD_SECRETS if lb]), _TEXT), _TOKENS)
@settings(max_examples=800)
def test_a_credential_value_is_judged_as_before(label: str, token: str) -> None:
    assert fields._credential_value(label, token) == _reference_credential_value(label, token)


def test_the_label_cache_empties_with_the_scan_cache() -> None:
    fields._credential_label("db password")
    assert fields._credential_label.cache_info().currsize > 0
    clear_scan_cache()
    assert fields._credential_label.cache_info().currsize == 0


def test_the_doors_caches_empty_with_the_scan_cache() -> None:
    from memory_ledger.commands import secret_door

    secret_door._text_secret("a statement the door answered")
    secret_door._field("Lisbon", "lives in")
    clear_scan_cache()
    assert secret_door._cached.cache_info().currsize == 0
    assert secret_door._field.cache_info().currsize == 0


def _reference_item_secret_field(item: Any) -> str | None:
    """``item_secret_field`` as it was: every field also scanned whole after its judge."""
    from memory_ledger.commands.secret_door import _field, _text_secret

    if _text_secret(item.statement):
        return "statement"
    if _text_secret(item.reason):
        return "reason"
    for name, text in (("subject", item.subject), ("predicate", item.predicate)):
        if text and (_field(text[:512], None) or _text_secret(text)):
            return name
    if item.value and (_field(item.value[:512], item.predicate) or _text_secret(item.value)):
        return "value"
    for name in ("tags", "evidence", "supersedes", "conflicts_with"):
        for text in getattr(item, name):
            if _field(text[:512], None) or _text_secret(text):
                return name
    return None


_PIECES = st.sampled_from(
    ["tea with milk ", "x" * 300, " ", "Lisbon", GITHUB_TOKEN, "password = hunter2 ", "a\u200b"]
)
_FIELD = st.lists(_PIECES, max_size=4).map("".join)


@given(
    subject=_FIELD,
    predicate=st.one_of(st.none(), st.sampled_from(["password", "lives in", "api key"])),
    value=_FIELD,
    tags=st.lists(_FIELD, max_size=2),
)
@settings(max_examples=300)
def test_an_items_secret_field_is_named_as_before(
    subject: str, predicate: str | None, value: str, tags: list[str]
) -> None:
    """A field the whole-field judge found clean is scanned whole again only when it is
    longer than the judge's 512 characters (a secret past them still refuses)."""
    from memory_ledger.commands.secret_door import item_secret_field
    from memory_ledger.ledger.events import ExtractedItem

    item = ExtractedItem(
        kind="semantic",
        subject=subject or None,
        predicate=predicate,
        value=value or None,
        statement="A note about the item.",
        source="fact",
        scope="user",
        reason="help",
        importance=0.8,
        confidence=0.9,
        tags=tuple(tags),
    )
    assert item_secret_field(item) == _reference_item_secret_field(item)


def test_a_secret_past_the_judges_first_characters_is_found() -> None:
    from memory_ledger.commands.secret_door import item_secret_field
    from memory_ledger.ledger.events import ExtractedItem

    value = "plain words " * 60 + GITHUB_TOKEN
    item = ExtractedItem(
        kind="semantic",
        subject="Alice",
        statement="A note about the item.",
        source="fact",
        scope="user",
        reason="help",
        importance=0.8,
        confidence=0.9,
        value=value,
    )
    assert len(value) > 512
    assert item_secret_field(item) == "value"
