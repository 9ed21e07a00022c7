"""Chunking strategies of workspace retrieval: typed objects that cut a file into byte ranges.

Seed 002 ("Text admission and chunking") names three built-in strategies and the contract
every splitter keeps; a host passes one of these objects (a bare name such as ``"lines"``
is refused with :class:`TypeError`):

* :class:`LineWindows`: ``lines`` lines per chunk (a window longer than ``max_bytes`` is
  cut further at character boundaries);
* :class:`ByteWindows`: fixed windows of at most ``size`` UTF-8 bytes;
* :class:`RecursiveSeparators`: split at the first separator that makes pieces of at most
  ``max_bytes`` (paragraphs, then lines, then spaces), merging neighbours greedily back up
  to ``max_bytes``; a piece no separator can cut falls back to byte windows.

The contract, for the UTF-8 bytes of an admitted file (checked by a hypothesis property in
``tests/workspace/test_workspace_chunking.py``): ranges are ``(start, end)`` byte offsets, each
non-empty (every step makes progress), the first starts at 0, each starts where the previous
ended and the last ends at ``len(data)`` (together they cover every admitted byte, with no
overlap), and no boundary falls inside a UTF-8 character. A range exceeds the strategy's
byte limit only when a single character is longer than the limit (a 4-byte character in a
window of 3 bytes).
"""

from __future__ import annotations

import msgspec

from memory_ledger.ledger.errors import InvalidArgumentError, InvalidArgumentTypeError

__all__ = [
    "ByteWindows",
    "ChunkingStrategy",
    "LineWindows",
    "RecursiveSeparators",
    "check_strategy",
    "line_number",
    "split_ranges",
    "strategy_key",
]


def _positive(owner: str, name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        msg = f"{owner}.{name} must be a positive integer, got {value!r}"
        raise InvalidArgumentError(msg, parameter=name)


class LineWindows(msgspec.Struct, frozen=True, kw_only=True):
    """Chunks of ``lines`` lines (default 40), each at most ``max_bytes`` bytes (4,096).

    :raises InvalidArgumentError: a limit is not a positive integer.
    """

    lines: int = 40
    max_bytes: int = 4096

    def __post_init__(self) -> None:
        _positive("LineWindows", "lines", self.lines)
        _positive("LineWindows", "max_bytes", self.max_bytes)


class ByteWindows(msgspec.Struct, frozen=True, kw_only=True):
    """Fixed windows of at most ``size`` UTF-8 bytes (default 2,048), cut back to the
    nearest character boundary.

    :raises InvalidArgumentError: ``size`` is not a positive integer.
    """

    size: int = 2048

    def __post_init__(self) -> None:
        _positive("ByteWindows", "size", self.size)


class RecursiveSeparators(msgspec.Struct, frozen=True, kw_only=True):
    """Pieces of at most ``max_bytes`` bytes (default 2,048), cut at the first of
    ``separators`` that makes them small enough (each separator stays at the end of the
    piece before it), neighbours merged greedily up to ``max_bytes``.

    :raises InvalidArgumentError: ``max_bytes`` is not positive, or a separator is empty or
        not a string.
    """

    max_bytes: int = 2048
    separators: tuple[str, ...] = ("\n\n", "\n", " ")

    def __post_init__(self) -> None:
        _positive("RecursiveSeparators", "max_bytes", self.max_bytes)
        for separator in self.separators:
            if not isinstance(separator, str) or not separator:
                msg = f"RecursiveSeparators separators must be non-empty strings, got {separator!r}"
                raise InvalidArgumentError(msg, parameter="separators")


ChunkingStrategy = LineWindows | ByteWindows | RecursiveSeparators
"""One of the built-in typed strategies."""


def check_strategy(strategy: object) -> ChunkingStrategy:
    """``strategy`` if it is a typed strategy object.

    :raises InvalidArgumentTypeError: (a ``TypeError``) anything else, including a primitive
        name such as ``"lines"`` (seed 002: primitive strategy names are rejected).
    """
    if isinstance(strategy, LineWindows | ByteWindows | RecursiveSeparators):
        return strategy
    msg = (
        "chunking must be a LineWindows, ByteWindows or RecursiveSeparators object, "
        f"got {type(strategy).__name__} {strategy!r}"
    )
    raise InvalidArgumentTypeError(msg, parameter="chunking", reason_code="not_a_strategy")


def strategy_key(strategy: ChunkingStrategy) -> str:
    """A stable text naming the strategy and its parameters (part of the vector cache key)."""
    if isinstance(strategy, LineWindows):
        return f"lines/{strategy.lines}/{strategy.max_bytes}"
    if isinstance(strategy, ByteWindows):
        return f"bytes/{strategy.size}"
    separators = ",".join(s.encode("utf-8").hex() for s in strategy.separators)
    return f"recursive/{strategy.max_bytes}/{separators}"


def _floor(data: bytes, index: int) -> int:
    """The start of the UTF-8 character holding byte ``index`` (``index`` itself at a start)."""
    while 0 < index < len(data) and data[index] & 0xC0 == 0x80:
        index -= 1
    return index


def _ceil(data: bytes, index: int) -> int:
    """The first character start at or after ``index`` (``len(data)`` at the end)."""
    while index < len(data) and data[index] & 0xC0 == 0x80:
        index += 1
    return index


def _cut(data: bytes, start: int, stop: int, limit: int) -> int:
    """End of a window from ``start`` of at most ``limit`` bytes, at most ``stop`` (a
    character boundary), on a character boundary and always past ``start`` (a character
    longer than ``limit`` makes one longer window)."""
    end = min(stop, start + limit)
    if end < stop:
        end = _floor(data, end)
        if end <= start:
            end = _ceil(data, start + 1)
    return end


def _byte_windows(data: bytes, start: int, stop: int, limit: int) -> list[tuple[int, int]]:
    ranges = []
    while start < stop:
        end = _cut(data, start, stop, limit)
        ranges.append((start, end))
        start = end
    return ranges


def _line_windows(data: bytes, strategy: LineWindows) -> list[tuple[int, int]]:
    ranges: list[tuple[int, int]] = []
    start = 0
    while start < len(data):
        end = start
        for _ in range(strategy.lines):
            newline = data.find(b"\n", end)
            end = len(data) if newline < 0 else newline + 1
            if end >= len(data):
                break
        ranges.extend(_byte_windows(data, start, end, strategy.max_bytes))
        start = end
    return ranges


def _pieces(data: bytes, start: int, stop: int, separator: bytes) -> list[tuple[int, int]]:
    """``[start, stop)`` cut after each occurrence of ``separator``."""
    pieces = []
    at = start
    while at < stop:
        found = data.find(separator, at, stop)
        end = stop if found < 0 else found + len(separator)
        pieces.append((at, end))
        at = end
    return pieces


def _recursive(
    data: bytes, start: int, stop: int, strategy: RecursiveSeparators, level: int
) -> list[tuple[int, int]]:
    limit = strategy.max_bytes
    if stop - start <= limit:
        return [(start, stop)]
    if level >= len(strategy.separators):
        return _byte_windows(data, start, stop, limit)
    separator = strategy.separators[level].encode("utf-8")
    ranges: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    for piece_start, piece_end in _pieces(data, start, stop, separator):
        if piece_end - piece_start > limit:
            if current is not None:
                ranges.append(current)
                current = None
            ranges.extend(_recursive(data, piece_start, piece_end, strategy, level + 1))
        elif current is not None and piece_end - current[0] <= limit:
            current = (current[0], piece_end)
        else:
            if current is not None:
                ranges.append(current)
            current = (piece_start, piece_end)
    if current is not None:
        ranges.append(current)
    return ranges


def split_ranges(strategy: ChunkingStrategy, data: bytes) -> list[tuple[int, int]]:
    """The ``(start, end)`` byte ranges ``strategy`` cuts ``data`` (valid UTF-8) into.

    Contiguous, non-empty, covering ``[0, len(data))``, on character boundaries (see the
    module docstring). An empty file has no ranges.

    :raises InvalidArgumentTypeError: ``strategy`` is not a typed strategy object.
    """
    strategy = check_strategy(strategy)
    if not data:
        return []
    if isinstance(strategy, LineWindows):
        return _line_windows(data, strategy)
    if isinstance(strategy, ByteWindows):
        return _byte_windows(data, 0, len(data), strategy.size)
    return _recursive(data, 0, len(data), strategy, 0)


def line_number(data: bytes, offset: int) -> int:
    """The one-based line of byte ``offset`` of ``data`` (newlines before it, plus one)."""
    return data.count(b"\n", 0, offset) + 1
