"""The small engine: every detector's candidates merged into spans; redaction.

:func:`rule_candidates` applies the project's rule table (``secrets.rules``) to a scan;
``secrets.plugins`` applies the library's plugins, keyword patterns and entropy. Overlapping
candidates merge into one span named by the most specific detector. Redaction markers
``[REDACTED:<kind>]`` are opaque to detection, so redaction is idempotent. Zero-width
characters (U+200B, U+200C, U+200D, U+2060, U+FEFF) are removed from a copy of the text
before the scan, so a key split by them is still found; text not in NFKC form is scanned in
that form (``secrets.nfkc``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator
from functools import lru_cache
from typing import Final

from memory_ledger.commands.secrets.nfkc import NfkcView
from memory_ledger.commands.secrets.plugins import (
    entropy_candidates,
    keyword_candidates,
    plugin_candidates,
)
from memory_ledger.commands.secrets.prefilter import COVERED_SOURCES, may_hold_secret
from memory_ledger.commands.secrets.rules import RULES
from memory_ledger.commands.secrets.scan import Candidate, Scan, widen
from memory_ledger.commands.secrets.spans import Redaction, SecretSpan

__all__ = [
    "P_ZERO_WIDTH",
    "ZERO_WIDTH",
    "clear_scan_cache",
    "contains_secret",
    "find_secrets",
    "redact",
    "register_scan_cache",
    "rule_candidates",
]


def rule_candidates(scan: Scan) -> Iterator[Candidate]:
    """The candidates of every rule of :data:`~memory_ledger.commands.secrets.rules.RULES`
    whose gates the scan passes (a long token run when the rule needs one; one of its
    context words): the rule's finder, or its pattern's matches whose value (the rule's
    group, trailing punctuation trimmed if it says so) passes its check, widened to the whole
    token if it says so."""
    text = scan.text
    folded = scan.lower if scan.lower is not None else text.lower()
    long_run: bool | None = None
    for rule in RULES:
        if rule.long_run:
            if long_run is None:
                long_run = scan.long_run
            if not long_run:
                continue
        if rule.words:
            haystack = text if rule.case_sensitive else folded
            for word in rule.words:
                if word in haystack:
                    break
            else:
                continue
        if rule.finder is not None:
            yield from rule.finder(rule, scan)
            continue
        group, check = rule.group, rule.check
        for match in rule.pattern.finditer(scan):
            start, end = match.span(group)
            value = text[start:end]
            if rule.trim:
                value = value.rstrip(".,;!?)")
                end = start + len(value)
            if check is not None and not check(value, match, scan):
                continue
            rank: float = rule.rank
            if rule.widen:
                wide_start, end = widen(text, start, end)
                if wide_start < start:  # its prefix sits inside a longer token
                    rank += BURIED_PREFIX
                start = wide_start
            yield (start, end, rule.kind, rank)


BURIED_PREFIX: Final = 0.5
"""Added to the rank of a token shape whose prefix was found inside a longer token (the
span widened to its left): when it merges with a shape whose prefix starts that token (an
``mlt_`` bearer token whose random body holds ``AIza`` and 35 more token characters), the
one that starts the token names the span. Half a rank: it still names a span over a
keyword or phrase detector (rank 1)."""


_SOURCES: Final[tuple[Callable[[Scan], Iterator[Candidate]], ...]] = (
    plugin_candidates,
    rule_candidates,
    keyword_candidates,
    entropy_candidates,
)

_PREFILTERED: Final = tuple(source.__name__ for source in _SOURCES) == COVERED_SOURCES
"""Whether the literal prefilter covers every source (else every text is scanned)."""

_MARKER: Final = re.compile(r"\[REDACTED:[a-z0-9_]+\]")


def _mask_markers(text: str) -> str:
    """Hide earlier redaction markers (same length, so offsets hold)."""
    if "[REDACTED:" not in text:
        return text
    return _MARKER.sub(lambda m: "*" * len(m.group(0)), text)


def _merge(candidates: list[Candidate], masked: str) -> list[SecretSpan]:
    spans: list[SecretSpan] = []
    group: list[Candidate] = []
    group_end = -1

    def flush() -> None:
        if group:
            kind = min(group, key=lambda c: (c[3], c[0] - c[1], c[0], c[2]))[2]
            spans.append(SecretSpan(group[0][0], group_end, kind))

    for cand in sorted(candidates):
        start, end = cand[0], cand[1]
        if start >= end or not masked[start:end].strip("* \t\r\n"):
            continue
        if start < group_end:
            group.append(cand)
            group_end = max(group_end, end)
        else:
            flush()
            group = [cand]
            group_end = end
    flush()
    return spans


def _candidates(text: str) -> list[Candidate]:
    scan = Scan(text)
    return [c for source in _SOURCES for c in source(scan)]


ZERO_WIDTH: Final = frozenset("\u200b\u200c\u200d\u2060\ufeff")
"""Invisible characters that can split a secret without changing how it looks: ZERO WIDTH
SPACE, ZERO WIDTH NON-JOINER, ZERO WIDTH JOINER, WORD JOINER and ZERO WIDTH NO-BREAK SPACE
(byte order mark)."""

P_ZERO_WIDTH: Final = re.compile("[\u200b\u200c\u200d\u2060\ufeff]")
"""A character of :data:`ZERO_WIDTH`."""


def find_secrets(text: str) -> list[SecretSpan]:
    """Secret-shaped spans of ``text``: sorted, non-overlapping, offsets into ``text``.

    Overlapping detections merge into one span, named by the most specific detector.
    Existing ``[REDACTED:<kind>]`` markers are never reported. Text that is not in NFKC form
    (full-width letters, ligatures) is scanned in that form and the spans mapped back; a
    span over a character that NFKC does not map one to one covers its whole original token.
    Zero-width characters (:data:`ZERO_WIDTH`) are removed before the scan; a span found
    across them covers the whole original stretch, the invisible characters included.
    Never raises for a ``str``. Results for texts of at most :data:`CACHED_UP_TO`
    characters are cached (a statement is scanned once however many surfaces check it:
    a command's validation, its redaction and the door of every event that carries it);
    :func:`clear_scan_cache` empties the cache (the engine does after an erasure).
    """
    if len(text) <= CACHED_UP_TO:
        return list(_find_cached(text))
    return _find_uncached(text)


CACHED_UP_TO: Final = 1024
"""The longest text whose scan result is cached (characters)."""


@lru_cache(maxsize=16384)
def _find_cached(text: str) -> tuple[SecretSpan, ...]:
    return tuple(_find_uncached(text))


_OTHER_CACHES: list[Callable[[], None]] = []
"""The ``cache_clear`` of every other cache keyed by scanned text (whole-field labels, the
door's answers), registered by its module (:func:`register_scan_cache`)."""


def register_scan_cache(clear: Callable[[], None]) -> None:
    """Have :func:`clear_scan_cache` call ``clear`` too (a cache keyed by scanned text)."""
    _OTHER_CACHES.append(clear)


def clear_scan_cache() -> None:
    """Forget every cached scan result (after an erasure: the caches hold scanned texts):
    this module's and every cache registered with :func:`register_scan_cache`."""
    _find_cached.cache_clear()
    for clear in _OTHER_CACHES:
        clear()


def _find_uncached(text: str) -> list[SecretSpan]:
    if P_ZERO_WIDTH.search(text) is None:
        return _find_visible(text)
    kept = [i for i, char in enumerate(text) if char not in ZERO_WIDTH]
    visible = "".join(text[i] for i in kept)
    spans = [
        SecretSpan(kept[span.start], kept[span.end - 1] + 1, span.kind)
        for span in _find_visible(visible)
    ]
    return spans


def _find_visible(text: str) -> list[SecretSpan]:
    masked = _mask_markers(text)
    if masked.isascii():
        if _PREFILTERED and not may_hold_secret(masked):
            return []  # no detector's condition holds (``secrets.prefilter``)
        candidates = _candidates(masked)
    elif unicodedata.is_normalized("NFKC", masked):
        candidates = _candidates(masked)
    else:
        view = NfkcView(masked)
        candidates = [
            (*view.span(start, end), kind, rank)
            for start, end, kind, rank in _candidates(_mask_markers(view.text))
            if start < end
        ]
    if not candidates:
        return []
    return _merge(candidates, masked)


def contains_secret(text: str) -> bool:
    """Whether :func:`find_secrets` finds at least one span in ``text``."""
    return bool(find_secrets(text))


_MAX_PASSES: Final = 4


def redact(text: str) -> Redaction:
    """Replace each secret span of ``text`` by ``[REDACTED:<kind>]``.

    Text without secrets is returned unchanged (``count == 0``, ``kinds == ()``). The
    result holds nothing :func:`find_secrets` detects: a replacement that exposes a new
    shape (rare: two secrets glued together) is redacted again, up to a few passes.
    """
    count = 0
    kinds: set[str] = set()
    for _ in range(_MAX_PASSES):
        spans = find_secrets(text)
        if not spans:
            break
        pieces: list[str] = []
        cursor = 0
        for span in spans:
            pieces.append(text[cursor : span.start])
            pieces.append(f"[REDACTED:{span.kind}]")
            cursor = span.end
        pieces.append(text[cursor:])
        text = "".join(pieces)
        count += len(spans)
        kinds.update(span.kind for span in spans)
    return Redaction(text=text, count=count, kinds=tuple(sorted(kinds)))
