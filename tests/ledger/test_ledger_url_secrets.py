"""A ledger URL's password never shows in an error or a parsed URL's text, whatever it holds.

A password holding an unescaped ``#``, ``/``, ``?`` or ``@`` (common in generated passwords)
makes a URL parser read part of it as the port, path or fragment; the message of the
resulting :class:`LedgerURLError` must still show no part of it (found by a newcomer: the
whole URL, password included, was echoed).
"""

from __future__ import annotations

import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_ledger.ledger.postgres import LedgerURLError, parse_ledger_url

# Each piece begins with letters no message or URL part here holds, so finding it in the text
# shown can only mean the password leaked.
TOKEN = st.text(alphabet=string.ascii_letters + string.digits, min_size=4, max_size=8)
PUNCTUATION = st.text(alphabet="#/?@:!%&=[];,$'", min_size=1, max_size=3)
TAIL = st.sampled_from(["", "?schema=s1", "?schema=s1&pool_size=2", "?password_env=PW&schema=s"])


@settings(max_examples=300, deadline=None)
@given(first=TOKEN, middle=PUNCTUATION, last=TOKEN, tail=TAIL)
def test_no_piece_of_a_password_shows(first: str, middle: str, last: str, tail: str) -> None:
    first, last = f"Zq{first}", f"Xj{last}"
    password = f"{first}{middle}{last}"
    url = f"postgresql://agent:{password}@127.0.0.1:5432/memory{tail}"
    try:
        parsed = parse_ledger_url(url, environ={"PW": "from-env"})
    except LedgerURLError as e:
        shown = f"{e} {e!r} {getattr(e, 'path', '')}"
    else:
        shown = f"{parsed!r} {parsed.redacted}"
    assert first not in shown.replace("postgresql://agent", "")
    assert last not in shown.replace("127.0.0.1:5432/memory", "")


@pytest.mark.parametrize("password", ["Xy#9qZp!w", "Xy/9qZp!w", "Xy?9qZp!w"])
def test_a_password_read_as_the_port_is_not_shown_and_the_fix_is_named(password: str) -> None:
    with pytest.raises(LedgerURLError) as raised:
        parse_ledger_url(f"postgresql://postgres:{password}@127.0.0.1:5432/test?schema=s")
    message = str(raised.value)
    assert "Xy" not in message and "9qZp" not in message
    assert "postgresql://postgres:***@127.0.0.1:5432/test?schema=s" in message
    assert "percent-encoded" in message and raised.value.reason_code == "invalid_ledger_url"
