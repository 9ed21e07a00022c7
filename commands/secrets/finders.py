"""The matchers of the rules a pattern and a validator do not express (``Rule.finder``).

Each takes its rule (pattern, context pattern, anchors) and the scan, and yields candidates:
a block that runs to a closing line, a key judged by the words near it, and matches tried
only at the offsets of their keywords (``str.find`` is many times faster than a regex scan
for a keyword alternation).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Final

from detect_secrets.filters.heuristic import is_sequential_string

from memory_ledger.commands.secrets.rule import Rule
from memory_ledger.commands.secrets.scan import Candidate, Scan, anchor_offsets
from memory_ledger.commands.secrets.validators import (
    OPEN_QUOTE,
    base64_of_text,
    camel_word,
    in_url,
    made_of_words,
    names_no_secret,
    password_like,
    random_looking,
    short_password_value,
    starts_key_part,
    upper_and_lower,
    value_is_reference,
)

__all__ = ["bare_aws_secrets", "credential_assignments", "pem_blocks", "prose_logins"]


def pem_blocks(rule: Rule, scan: Scan) -> Iterator[Candidate]:
    """From each BEGIN line (``rule.pattern``) to its END line (``rule.context``); a block
    with no END (a transcript cut short) runs to the end of the text."""
    text = scan.text
    assert rule.context is not None  # noqa: S101 (the rule's table gives it)
    for begin in rule.pattern.finditer(scan):
        closing = rule.context.search(text, begin.end())
        yield (begin.start(), closing.end() if closing else len(text), rule.kind, rule.rank)


def _anchored_matches(
    pattern: re.Pattern[str], folded: str, anchors: tuple[str, ...]
) -> Iterator[re.Match[str]]:
    """``pattern.match`` tried at each offset of ``folded`` where an anchor starts."""
    for start in anchor_offsets(folded, anchors):
        match = pattern.match(folded, start)
        if match is not None:
            yield match


def prose_logins(rule: Rule, scan: Scan) -> Iterator[Candidate]:
    """Matches of the login phrase (groups: the password keyword, the value), tried at the
    verbs' offsets (``rule.anchors``) in the lowercased text. The value must look like a
    password (:func:`short_password_value`); without a password keyword a camel-case word
    does not count."""
    text = scan.text
    folded = scan.lower
    if folded is None:
        matches: Iterator[re.Match[str]] = rule.pattern.finditer(scan)
    elif any(anchor in folded for anchor in rule.anchors):
        matches = _anchored_matches(rule.pattern.plain, folded, rule.anchors)
    else:
        return
    for match in matches:
        begin, end = match.span(2)
        value = text[begin:end].rstrip(".,;!?)")
        if not value or any(c in "()[]{}" for c in value) or value_is_reference(value):
            continue
        if names_no_secret(value) or not short_password_value("pass", value):
            continue
        if match.group(1) is None and camel_word(value):
            continue
        yield (begin, begin + len(value), rule.kind, rule.rank)


_AWS_CONTEXT_REACH: Final = 120
"""How far (characters) the context words of a bare AWS secret key may stand from it."""


def bare_aws_secrets(rule: Rule, scan: Scan) -> Iterator[Candidate]:
    """40-character AWS secret access keys with no assignment (see the rule's ``about``):
    by shape alone (rank 2, so a keyword or header detector around it names the span), or
    with context words (``rule.context``) within 120 characters (the rule's rank)."""
    text = scan.text
    context: bool | None = None
    assert rule.context is not None  # noqa: S101 (the rule's table gives it)
    for match in rule.pattern.finditer(scan):
        value = match.group()
        if value.count("/") > 4 or not upper_and_lower(value) or is_sequential_string(value):
            continue
        start, end = match.span()
        if (
            any(c.isdigit() for c in value)
            and not made_of_words(value)
            and not base64_of_text(value)
            and not in_url(text, start, end)
        ):
            # A guess from the shape alone: a keyword or header detector names it better.
            yield (start, end, rule.kind, 2)
            continue
        if value.startswith("/") or not any(c.isdigit() or c in "/+" for c in value):
            continue
        if context is None:
            context = scan.has_ci("aws", "amazon") or scan.has("AKIA", "ASIA")
        if not context:
            continue
        window_start = max(0, start - _AWS_CONTEXT_REACH)
        if rule.context.search(text, window_start, start) or rule.context.search(
            text, end, end + _AWS_CONTEXT_REACH
        ):
            yield (start, end, rule.kind, rule.rank)


@functools.cache
def _ascii_anchors(anchors: tuple[str, ...]) -> tuple[str, ...]:
    """The ASCII ones of ``anchors`` (no other can start in ASCII text)."""
    return tuple(anchor for anchor in anchors if anchor.isascii())


def _credential_matches(rule: Rule, scan: Scan) -> Iterator[re.Match[str]]:
    """Matches of the credential pattern (groups: keyword, operator, value), tried at the
    anchors' offsets (non-ASCII anchors only in non-ASCII text); offsets index
    ``scan.text``."""
    folded = scan.lower
    if folded is None:
        yield from rule.pattern.finditer(scan)
        return
    anchors = _ascii_anchors(rule.anchors) if folded.isascii() else rule.anchors
    pattern = rule.pattern.plain
    for start in anchor_offsets(folded, anchors):
        match = pattern.match(folded, start)
        if match is None and folded.startswith("mot", start - 7):
            match = pattern.match(folded, start - 7)  # "mot de passe", found at "pass"
        if match is not None:
            yield match


_TOKEN_KEYWORDS: Final = frozenset({"token", "secret", "credential"})


def _ends_env_name(text: str, match: re.Match[str]) -> bool:
    """Whether the keyword of ``match`` ends an upper-case environment variable name
    (``PGPASSWORD``, ``MYSQLPWD``, ``GHTOKEN``: libpq's and the shells' names glue the
    keyword to a prefix): the keyword and the character before it are upper case or a
    digit (``text``: the scanned text as written; the match may be of its lower case)."""
    start, end = match.span(1)
    before = text[start - 1] if start > 0 else ""
    return (before.isupper() or before.isdigit()) and text[start:end].isupper()


def credential_assignments(rule: Rule, scan: Scan) -> Iterator[Candidate]:
    """Keyword assignments of tokens, secrets, credentials and passwords (any language; see
    the rule's ``about``): ``password`` for a password keyword, else ``rule.kind``."""
    text = scan.text
    for match in _credential_matches(rule, scan):
        if not starts_key_part(text, match.start(1)) and not _ends_env_name(text, match):
            continue
        start, end = match.span(3)
        value = text[start:end].rstrip(".,;!?)")
        if not value or any(c in "()[]{}" for c in value):
            continue  # a call, an index or a template: code about a secret
        if value_is_reference(value) or names_no_secret(value):
            continue
        keyword = match.group(1).lower()
        if keyword == "pwd" and value[:1] in "/~":
            continue  # PWD=/home/me is a working directory
        password = keyword not in _TOKEN_KEYWORDS
        quoted = start > 0 and text[start - 1] in OPEN_QUOTE
        end = start + len(value)
        if not random_looking(value):
            if not password or len(value) < 4:
                continue
            operator = match.group(2) or ""
            if "=" in operator and not quoted:
                # Like the library's ``password = a b c``: the value may be a passphrase of
                # several words, so the rest of the line goes.
                line_end = text.find("\n", end)
                end = len(text[: len(text) if line_end < 0 else line_end].rstrip())
            elif not (operator == ":" and quoted) and not (
                password_like(value) or camel_word(value)
            ):
                continue
        yield (start, end, "password" if password else rule.kind, rule.rank)
