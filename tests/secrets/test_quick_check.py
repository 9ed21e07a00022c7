"""The quick check (``commands.secrets.quick_check``): the prefilter's conditions written
out, so the CLI echoes text without importing the detectors when the text needs no scan."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memory_ledger.commands.secrets import find_secrets
from memory_ledger.commands.secrets.prefilter import PREFILTER
from memory_ledger.commands.secrets.quick_check import FOLDED, LITERALS, may_hold_secret


def test_the_written_out_literals_are_the_prefilters() -> None:
    """A new rule or gate widens the derived prefilter: this fails until it is added to
    the written-out tables too (a quick check narrower than the prefilter would skip
    secrets)."""
    assert PREFILTER is not None
    assert sorted(PREFILTER.literals) == sorted(LITERALS)
    assert sorted(PREFILTER.folded) == sorted(FOLDED)


@given(st.text(alphabet=st.characters(max_codepoint=127), max_size=80))
def test_a_text_the_quick_check_clears_holds_no_secret(text: str) -> None:
    if not may_hold_secret(text):
        assert find_secrets(text) == []


def test_ordinary_text_is_cleared_and_secret_shapes_are_not() -> None:
    assert not may_hold_secret("espresso")
    assert not may_hold_secret("where does Alice live")
    for text in ("my key sk-proj-abc", "token: x", "https://a:b@c", "é", "A" * 20):
        assert may_hold_secret(text)
