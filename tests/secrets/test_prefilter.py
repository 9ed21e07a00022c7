"""The literal prefilter (``secrets.prefilter``) skips only texts the full scan finds
nothing in: every detector's candidates are empty wherever it says no, on adversarial
strings built from the detectors' own literals, near misses and long token runs, and on the
secret test corpora (cut at every length and in every case)."""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger.commands.secrets import SecretSpan, detect
from memory_ledger.commands.secrets.plugins import ENTROPY_GATE, KEYWORD_ANCHORS, PLUGIN_GATES
from memory_ledger.commands.secrets.prefilter import PREFILTER, may_hold_secret
from memory_ledger.commands.secrets.rules import RULES
from memory_ledger.commands.secrets.scan import Candidate
from tests.secrets.test_secrets import (
    DICTIONARY_WORDS,
    FIELD_SECRETS,
    FRAGMENTS,
    NEGATIVE,
    ORDINARY_FIELDS,
    POSITIVE,
)


def _full_candidates(text: str) -> list[Candidate]:
    """Every detector's candidates in ``text`` (markers masked), no prefilter."""
    return detect._candidates(detect._mask_markers(text))


def _full_spans(text: str) -> list[SecretSpan]:
    masked = detect._mask_markers(text)
    candidates = detect._candidates(masked)
    return detect._merge(candidates, masked) if candidates else []


def _agrees(text: str) -> bool:
    """Where the prefilter skips, the full scan finds no candidate; ``find_secrets`` (the
    prefiltered scan, uncached) equals the full scan's spans (ASCII text)."""
    if not may_hold_secret(detect._mask_markers(text)) and _full_candidates(text):
        return False
    return detect._find_uncached(text) == _full_spans(text)


def _literals() -> list[str]:
    out: set[str] = set(KEYWORD_ANCHORS)
    for gate in (*PLUGIN_GATES, ENTROPY_GATE):
        out.update(gate.literals, gate.folded, gate.also)
    for rule in RULES:
        out.update(rule.words, rule.anchors)
    return sorted(lit for lit in out if lit.isascii())


LITERALS = _literals()
NEAR_MISSES = sorted(
    {lit[:cut] + lit[cut + 1 :] for lit in LITERALS for cut in range(len(lit))}
    | {lit.upper() for lit in LITERALS}
    | {lit.title() for lit in LITERALS}
)
"""Each literal with one character dropped, upper-cased and title-cased."""

TOKEN_CHARS = string.ascii_letters + string.digits + "_-+/="
OPERATORS = [" ", "=", " = ", ": ", ":", " is ", " was ", '="', "='", ' "', "_", "-", ".", ""]
VALUES = st.one_of(
    st.text(TOKEN_CHARS, min_size=4, max_size=45),
    st.text(string.ascii_letters + string.digits + "!#$%&*", min_size=4, max_size=20),
    st.sampled_from(
        [secret for _text, secret, _kind in POSITIVE if secret.isascii()]
        + [text for text, _label in FIELD_SECRETS if text.isascii()]
        + ["hunter2", "Zq8!vR2#mK9pL4xW", "correct horse battery staple", "1234"]
    ),
)
ASSIGNMENT = st.tuples(
    st.sampled_from(["", "my ", "the ", "db_", "api_", "x", "A", "user ", "https://u:"]),
    st.one_of(st.sampled_from(LITERALS), st.sampled_from(LITERALS), st.sampled_from(NEAR_MISSES)),
    st.sampled_from(OPERATORS),
    VALUES,
    st.sampled_from(["", ".", " ok", '"', "'", "\n"]),
).map("".join)
"""A literal in a key-value shape (``db_password = <value>``, ``my pin is <value>``)."""
PIECES = st.one_of(
    ASSIGNMENT,
    ASSIGNMENT,
    st.sampled_from(LITERALS),
    st.sampled_from(NEAR_MISSES),
    st.text(TOKEN_CHARS, min_size=15, max_size=45),
    st.text(string.printable, max_size=12),
    st.sampled_from([" ", "\n", "=", ": ", " is ", '"', "'", "`", "@", ".", "[REDACTED:x]"]),
    st.sampled_from(DICTIONARY_WORDS),
)
ADVERSARIAL = st.lists(PIECES, max_size=4).map("".join)


def _corpus() -> list[str]:
    texts = [*NEGATIVE, *FRAGMENTS, *ORDINARY_FIELDS, *DICTIONARY_WORDS]
    texts += [text for text, _secret, _kind in POSITIVE]
    texts += [text for text, _label in FIELD_SECRETS]
    texts += [rule.example for rule in RULES]
    return [text for text in texts if text.isascii()]


CORPUS = _corpus()


def test_the_prefilter_is_on() -> None:
    """The detector tables are expressible: the prefilter is built, not disabled."""
    assert PREFILTER is not None
    assert detect._PREFILTERED


def test_the_corpora_agree_cut_at_every_length_and_case() -> None:
    skipped = 0
    for text in CORPUS:
        for variant in {text, text.lower(), text.upper(), text.swapcase()}:
            for end in range(len(variant) + 1):
                piece = variant[:end]
                assert _agrees(piece), piece
                assert _agrees(variant[end:]), variant[end:]
                skipped += not may_hold_secret(piece)
    assert skipped > 0  # the prefilter does skip texts, so the check is not vacuous


def test_every_secret_of_the_corpora_is_still_found() -> None:
    for text, secret, _kind in POSITIVE:
        assert detect.find_secrets(text), secret[:4]
    for rule in RULES:
        assert detect._find_uncached(rule.example), rule.id


@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow])
@given(ADVERSARIAL)
def test_adversarial_strings_agree(text: str) -> None:
    assert _agrees(text)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(CORPUS), st.integers(0, 200), ADVERSARIAL)
def test_corpus_texts_spliced_into_adversarial_text_agree(text: str, at: int, around: str) -> None:
    at = min(at, len(around))
    assert _agrees(around[:at] + text + around[at:])
