"""The scanned text with cheap facts computed once, candidates, and token edges.

The facts gate the regexes (a pattern runs only when the literal it needs is present), which
keeps a scan well under a millisecond for a typical 2,000-character transcript; a gate never
changes what a pattern finds.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "EDGE_JUNK",
    "Gate",
    "LEFT_TOKEN",
    "LONG_RUN",
    "RIGHT_TOKEN",
    "Candidate",
    "Scan",
    "anchor_offsets",
    "widen",
]

Candidate = tuple[int, int, str, float]
"""(start, end, kind, rank). A lower rank wins the kind of merged spans: specific token
shapes (0; 0.5 when the shape's prefix sits inside a longer token) over keyword assignments
and phrases (1) over entropy (2)."""

LONG_RUN: Final = re.compile(r"[A-Za-z0-9_\-+/=]{20}")
"""A run of 20 token characters (every long token shape has one)."""

LEFT_TOKEN: Final = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
"""Characters a token extends over to its left."""
RIGHT_TOKEN: Final = LEFT_TOKEN | frozenset("./+=")
"""Characters a token extends over to its right."""
EDGE_JUNK: Final = " \t\r\n\"'`=:"
"""Separators trimmed from the edges of a detector's span."""


class Scan:
    """One text to scan: ``text``, its lowercased copy ``lower`` (None when a character
    lowercases to several, so offsets would differ), and whether a long token run exists."""

    __slots__ = ("text", "lower", "_long_run")

    def __init__(self, text: str) -> None:
        self.text = text
        lower = text.lower()
        # Offsets of ``lower`` equal those of ``text`` unless a character lowercases to
        # several (rare); case-insensitive patterns then run on ``text`` instead.
        self.lower: str | None = lower if len(lower) == len(text) else None
        self._long_run: bool | None = None

    def has(self, *literals: str) -> bool:
        """Whether one of ``literals`` is in the text (as written)."""
        text = self.text
        for literal in literals:  # a loop, not any(): the gates run on every scan
            if literal in text:
                return True
        return False

    def has_ci(self, *literals: str) -> bool:
        """Whether one of the lower-case ``literals`` is in the text, in any case."""
        folded = self.lower if self.lower is not None else self.text.lower()
        for literal in literals:
            if literal in folded:
                return True
        return False

    @property
    def long_run(self) -> bool:
        """Whether a run of 20 token characters exists (every long token shape has one)."""
        if self._long_run is None:
            self._long_run = LONG_RUN.search(self.text) is not None
        return self._long_run


class Gate:
    """A detector's gate as data: a necessary condition of everything it finds, cheap to
    test, and readable by the literal prefilter (``secrets.prefilter``), which unites the
    gates of every detector into one test.

    The gate passes when the text has a long token run (if ``long_run``), one of
    ``literals`` as written or one of ``folded`` (lower case) in any case (if either is
    given), and every one of ``also`` as written.
    """

    __slots__ = ("literals", "folded", "long_run", "also")

    def __init__(
        self,
        literals: tuple[str, ...] = (),
        *,
        folded: tuple[str, ...] = (),
        long_run: bool = False,
        also: tuple[str, ...] = (),
    ) -> None:
        self.literals = literals
        self.folded = folded
        self.long_run = long_run
        self.also = also

    def __call__(self, scan: Scan) -> bool:
        """Whether ``scan`` passes the gate."""
        if self.long_run and not scan.long_run:
            return False
        if (self.literals or self.folded) and not (
            scan.has(*self.literals) or scan.has_ci(*self.folded)
        ):
            return False
        return all(literal in scan.text for literal in self.also)


def widen(text: str, start: int, end: int) -> tuple[int, int]:
    """Trim separators from the edges, then extend over the token's own characters: the
    library reports the shortest match (a JWT without its signature, just ``ghp`` of a
    GitHub token), which would leave the rest of the secret in the text."""
    while start < end and text[start] in EDGE_JUNK:
        start += 1
    while end > start and text[end - 1] in EDGE_JUNK:
        end -= 1
    while start > 0 and text[start - 1] in LEFT_TOKEN:
        start -= 1
    while end < len(text) and text[end] in RIGHT_TOKEN:
        end += 1
    while end > start and text[end - 1] == ".":  # a sentence's full stop
        end -= 1
    return start, end


def anchor_offsets(folded: str, anchors: tuple[str, ...]) -> list[int]:
    """Every offset of ``folded`` where one of ``anchors`` starts, ascending (``str.find``
    locates a keyword many times faster than a regex alternation scans for it)."""
    starts: list[int] = []
    for anchor in anchors:
        at = folded.find(anchor)
        while at >= 0:
            starts.append(at)
            at = folded.find(anchor, at + 1)
    starts.sort()
    return starts
