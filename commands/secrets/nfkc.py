"""The NFKC view of a text, with its offsets mapped back to the original.

Compatibility forms: text that is not NFKC-normalized (full-width ``ｓｋ-proj-...``,
``パスワード：...``, ligatures, half-width kana) is scanned in its NFKC form and the spans
are mapped back. The text is cut into clusters (a character with the combining marks and
voicing marks that may compose with it), each normalized alone; a cluster that normalizes
to one character, or to itself, maps character for character. A span touching any other
cluster (``ﬁ`` -> ``fi``, ``ﾊﾟ`` -> ``パ``) is widened to the whole original token, between
spaces or quotes, so no part of the secret stays behind.
"""

from __future__ import annotations

import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterator
from typing import Final

__all__ = ["NfkcView"]

_NON_ASCII_RUN: Final = re.compile(r"[^\x00-\x7f]+")
_WORDS_AND_SPACES: Final = re.compile(r"\s+|\S+")
_TOKEN_STOPS: Final = frozenset("\"'`")

# (normalized start, normalized end, original start, original end, maps 1:1)
_Segment = tuple[int, int, int, int, bool]


def _joins_previous(char: str) -> bool:
    """Whether ``char`` may compose with the character before it under NFKC."""
    if unicodedata.combining(char):
        return True
    code = ord(char)
    return (
        code in (0xFF9E, 0xFF9F)  # half-width kana voicing marks
        or 0x1160 <= code <= 0x11FF  # Hangul medial vowels and final consonants
        or 0xD7B0 <= code <= 0xD7FF
        or 0x3131 <= code <= 0x318E  # Hangul compatibility jamo
        or 0xFFA0 <= code <= 0xFFDC  # half-width Hangul jamo
    )


def _fine_clusters(text: str) -> Iterator[tuple[int, int]]:
    """ASCII runs (stable under NFKC) and, around non-ASCII runs, composing clusters."""
    cursor = 0
    for run in _NON_ASCII_RUN.finditer(text):
        start = max(run.start() - 1, 0)  # "e" + U+0301 composes to one character
        if start > cursor:
            yield cursor, start
        cluster = start
        for i in range(start + 1, run.end()):
            if not _joins_previous(text[i]):
                yield cluster, i
                cluster = i
        yield cluster, run.end()
        cursor = run.end()
    if cursor < len(text):
        yield cursor, len(text)


def _build_view(text: str, clusters: Iterator[tuple[int, int]]) -> tuple[str, list[_Segment]]:
    pieces: list[str] = []
    segments: list[_Segment] = []
    position = 0
    for start, end in clusters:
        chunk = text[start:end]
        normal = chunk if chunk.isascii() else unicodedata.normalize("NFKC", chunk)
        exact = normal == chunk or (end - start == 1 and len(normal) == 1)
        stop = position + len(normal)
        if exact and segments and segments[-1][4]:
            segments[-1] = (segments[-1][0], stop, segments[-1][2], end, True)
        else:
            segments.append((position, stop, start, end, exact))
        pieces.append(normal)
        position = stop
    return "".join(pieces), segments


class NfkcView:
    """The NFKC form of a text, with a map from its offsets back to the original's."""

    __slots__ = ("original", "text", "_segments", "_starts")

    def __init__(self, original: str) -> None:
        normal = unicodedata.normalize("NFKC", original)
        text, segments = _build_view(original, _fine_clusters(original))
        if text != normal:  # a composition across clusters: fall back to whole words
            words = (m.span() for m in _WORDS_AND_SPACES.finditer(original))
            text, segments = _build_view(original, words)
        if text != normal:
            text, segments = normal, [(0, len(normal), 0, len(original), False)]
        self.original = original
        self.text = text
        self._segments = segments
        self._starts = [segment[0] for segment in segments]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original span of ``text[start:end]`` (widened to whole tokens if not 1:1)."""
        first = bisect_right(self._starts, start) - 1
        last = bisect_right(self._starts, end - 1) - 1
        head, tail = self._segments[first], self._segments[last]
        start = head[2] + start - head[0] if head[4] else head[2]
        end = tail[2] + end - tail[0] if tail[4] else tail[3]
        if all(segment[4] for segment in self._segments[first : last + 1]):
            return start, end
        original = self.original
        while start > 0 and not _token_stop(original[start - 1]):
            start -= 1
        while end < len(original) and not _token_stop(original[end]):
            end += 1
        return start, end


def _token_stop(char: str) -> bool:
    return char.isspace() or char in _TOKEN_STOPS
