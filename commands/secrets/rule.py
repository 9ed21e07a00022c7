"""The shape of one detection rule of the project's table (``secrets.rules``).

A :class:`Rule` is data: an id, the kind it reports, its pattern, the context words that
gate it, which group holds the value, and a validator of that value. Most rules are applied
the same way by :func:`~memory_ledger.commands.secrets.detect.rule_candidates`; the few whose
match needs more than a pattern and a validator (a block with a closing line, a key near
context words, a match tried only at keyword offsets) name a ``finder``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from memory_ledger.commands.secrets.scan import Candidate, Scan

__all__ = ["Check", "Finder", "Rule", "RulePattern"]


class RulePattern:
    """A rule's compiled pattern. Case-insensitive (``ci=True``, the default) it runs on
    the lowercased text (much faster in ``re``) and on the text itself only when the
    lowercased copy's offsets differ; otherwise on the text as written."""

    __slots__ = ("plain", "folded")

    def __init__(self, pattern: str, *, ci: bool = True, flags: int = 0) -> None:
        self.plain = re.compile(pattern, flags)
        self.folded = re.compile(pattern, flags | re.IGNORECASE) if ci else None

    def finditer(self, scan: Scan) -> Iterator[re.Match[str]]:
        """Matches with offsets into ``scan.text`` (read groups from ``scan.text``)."""
        if self.folded is None:
            return self.plain.finditer(scan.text)
        if scan.lower is not None:
            return self.plain.finditer(scan.lower)
        return self.folded.finditer(scan.text)


Check = Callable[[str, re.Match[str], Scan], bool]
"""A validator: (the value, the match, the scan) -> whether the value is a secret."""

Finder = Callable[["Rule", Scan], Iterator[Candidate]]
"""A rule's own matcher, for the rules a pattern and a validator do not express."""


@dataclass(frozen=True, slots=True)
class Rule:
    """One detection rule.

    :param id: the rule's unique id (snake_case), what a reviewer or a test names it by.
    :param kind: the ``SecretSpan.kind`` it reports (several rules may share one).
    :param pattern: its pattern (:class:`RulePattern`).
    :param about: what it finds and why (the source of the rule).
    :param example: a text holding a secret the rule finds (``tests/secrets`` checks it).
    :param words: context words, lower case: the rule runs only when one is in the text, in
        any case (``case_sensitive``: as written). Empty: always.
    :param long_run: the rule needs a run of 20 token characters in the text.
    :param group: the match group holding the value (0: the whole match).
    :param trim: strip trailing prose punctuation (``.,;!?)``) from the value.
    :param widen: widen the span over the token's own characters.
    :param rank: 0 for a specific token shape, 1 for a keyword or phrase, 2 for a guess
        from shape alone (a lower rank names merged spans).
    :param check: the value's validator (None: every match is a secret).
    :param finder: the rule's own matcher (replaces pattern, group, trim, widen and check).
    :param context: a second pattern the finder consults (a closing line, context words).
    :param anchors: literals (lower case) at whose offsets the finder tries the pattern.
    """

    id: str
    kind: str
    pattern: RulePattern
    about: str
    example: str
    words: tuple[str, ...] = ()
    case_sensitive: bool = False
    long_run: bool = False
    group: int = 0
    trim: bool = False
    widen: bool = False
    rank: int = 1
    check: Check | None = None
    finder: Finder | None = None
    context: re.Pattern[str] | None = None
    anchors: tuple[str, ...] = ()
