"""The whole-field judge's shortcuts (``secrets.fields``) answer as the general code did:
the whitespace test is ``str.isspace`` over every character, a label's credential kind is
the label pattern's groups, a credential value judged through the cached kind equals the
uncached judgement; and the caches keyed by scanned text empty with the scan cache."""

from __future__ import annotations

import re
import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st

from memory_ledger.commands.secrets import clear_scan_cache, fields
from tests.secrets.test_secrets import FIELD_SECRETS, ORDINARY_FIELDS

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
