"""Checks of engine-call arguments: each returns the value or raises a typed error naming
the parameter (:class:`~memory_ledger.ledger.errors.InvalidArgumentError`, a ``ValueError``;
:class:`~memory_ledger.ledger.errors.InvalidArgumentTypeError` for a wrong type, also a
``TypeError``).

Used by every layer (the ledger imports nothing of ours, so the checks live here).
"""

from __future__ import annotations

import math
import re
import unicodedata
from datetime import UTC, datetime

from memory_ledger.ledger.errors import (
    InvalidArgumentError,
    InvalidArgumentTypeError,
    NaiveDatetimeError,
)

__all__ = [
    "BIDI_CONTROLS",
    "NESTED_TOO_DEEP",
    "TAG_CHARACTERS",
    "check_aware",
    "check_count",
    "check_encodable",
    "check_non_empty",
    "check_timeout",
    "forbidden_character",
]

NESTED_TOO_DEEP = "nested too deeply to decode (more levels than Python's recursion limit)"
"""What a decoder of a user's file says of a text nested past the recursion limit: msgspec,
``json`` and ``tomllib`` raise ``RecursionError`` there, which every reader of a user's
file (a session script, an interchange file, a LoCoMo file, the settings file, a backup
manifest, a receipt, an MCP stdio line) raises as its own typed error with this text."""

BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
"""The bidirectional embeddings, overrides and isolates (U+202A..U+202E, U+2066..U+2069):
invisible, they reorder how the text around them is shown ("Trojan Source"). Direction
marks (U+200E, U+200F, U+061C), which RTL text written normally uses, are not among them."""

TAG_CHARACTERS = range(0xE0000, 0xE0080)
"""The Unicode tag characters (U+E0000..U+E007F): invisible copies of ASCII, used to hide
instructions in text a person cannot see ("ASCII smuggling"). Only the emoji tag sequence
of a subdivision flag (U+1F3F4 BLACK FLAG, tag letters/digits, U+E007F CANCEL TAG, as in
the flags of England, Scotland and Wales) holds them legitimately; it is allowed."""

_FORBIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\U000e0000-\U000e007f]")
_FLAG_TAGS = re.compile("\U0001f3f4[\U000e0030-\U000e0039\U000e0061-\U000e007a]{1,6}\U000e007f")
_LINE_CONTROLS = frozenset("\t\n\r")


def forbidden_character(text: str, *, line_breaks: bool = False) -> str | None:
    """Where ``text`` holds a character no stored text may hold, described without echoing
    the text (``"U+202E RIGHT-TO-LEFT OVERRIDE at index 12"``); None when it holds none.

    Forbidden: NUL and every other control character (Unicode category ``Cc``), the
    bidirectional controls (:data:`BIDI_CONTROLS`) and the tag characters
    (:data:`TAG_CHARACTERS`, outside a subdivision flag's emoji sequence). With
    ``line_breaks``, tab, newline and carriage return are allowed (text such as a statement
    may span lines). Letters, marks, emoji, CJK and right-to-left scripts, zero-width
    joiners and direction marks are fine.
    """
    if "\U000e007f" in text:  # a subdivision flag's tags are not hidden text
        text = _FLAG_TAGS.sub(lambda m: " " * len(m.group()), text)
    elif _FORBIDDEN.search(text) is None:  # most text: one search, no match object
        return None
    for found in _FORBIDDEN.finditer(text):
        char = found.group()
        if line_breaks and char in _LINE_CONTROLS:
            continue
        name = "NUL" if char == "\x00" else unicodedata.name(char, "control character")
        return f"U+{ord(char):04X} {name} at index {found.start()}"
    return None


def check_count(parameter: str, value: object, *, minimum: int = 1) -> int:
    """``value`` if it is an ``int`` (not a ``bool``) of at least ``minimum``.

    For result sizes such as ``k`` and ``limit``.

    :raises InvalidArgumentTypeError: not an integer (``reason_code`` ``"not_an_integer"``).
    :raises InvalidArgumentError: below ``minimum`` (``reason_code`` ``"out_of_range"``).
    """
    if isinstance(value, bool) or not isinstance(value, int):
        msg = f"{parameter} must be an integer of at least {minimum}, got {value!r}"
        raise InvalidArgumentTypeError(msg, parameter=parameter, reason_code="not_an_integer")
    if value < minimum:
        msg = f"{parameter} must be at least {minimum}, got {value}"
        raise InvalidArgumentError(msg, parameter=parameter, reason_code="out_of_range")
    return value


def check_timeout(parameter: str, value: object, *, allow_none: bool = True) -> float | None:
    """``value`` as seconds: a finite real number >= 0 (or None when ``allow_none``).

    :raises InvalidArgumentTypeError: not a number (``"not_a_number"``).
    :raises InvalidArgumentError: NaN or infinite (``"not_finite"``), or negative
        (``"out_of_range"``).
    """
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"{parameter} must be a number of seconds, got {value!r}"
        raise InvalidArgumentTypeError(msg, parameter=parameter, reason_code="not_a_number")
    seconds = float(value)
    if not math.isfinite(seconds):
        msg = f"{parameter} must be a finite number of seconds, got {value!r}"
        raise InvalidArgumentError(msg, parameter=parameter, reason_code="not_finite")
    if seconds < 0:
        msg = f"{parameter} must not be negative, got {value!r}"
        raise InvalidArgumentError(msg, parameter=parameter, reason_code="out_of_range")
    return seconds


def check_aware(parameter: str, value: object) -> datetime:
    """``value`` if it is a time-zone-aware ``datetime``.

    A naive datetime is refused rather than guessed (local time? UTC?): pass
    ``datetime(..., tzinfo=UTC)`` or ``datetime.now(UTC)``.

    :raises InvalidArgumentTypeError: not a datetime (``"not_a_datetime"``).
    :raises NaiveDatetimeError: naive (an ``InvalidArgumentError``, ``"naive_datetime"``).
    """
    if not isinstance(value, datetime):
        msg = f"{parameter} must be a datetime, got {type(value).__name__}"
        raise InvalidArgumentTypeError(msg, parameter=parameter, reason_code="not_a_datetime")
    if value.tzinfo is None or value.utcoffset() is None:
        msg = (
            f"{parameter} {value.isoformat()} has no time zone; pass an aware datetime, "
            "e.g. datetime(..., tzinfo=UTC)"
        )
        raise NaiveDatetimeError(msg, parameter=parameter)
    return check_utc_range(parameter, value)


def check_utc_range(parameter: str, value: datetime) -> datetime:
    """``value`` (aware) if it has a UTC time: ``9999-12-31T23:59:59-14:00`` is valid text
    with a zone, yet in UTC it falls in the year 10000, past what ``datetime`` holds (and
    ``0001-01-01T00:00:00+14:00`` before the year 1); every comparison, conversion and
    stored form of such a time fails, so it is refused where it comes in.

    :raises InvalidArgumentError: ``"datetime_out_of_range"``, naming ``parameter``.
    """
    try:
        value.astimezone(UTC)
    except OverflowError:
        msg = (
            f"{parameter} {value.isoformat()} has no time in UTC (past the years 1 to 9999 "
            "once its offset is applied)"
        )
        raise InvalidArgumentError(
            msg, parameter=parameter, reason_code="datetime_out_of_range"
        ) from None
    return value


def check_encodable(parameter: str, value: str) -> str:
    """``value`` if it encodes as UTF-8 (no lone surrogate such as ``"\\ud800"``, which
    Python strings may hold but no stored text can).

    :raises InvalidArgumentError: ``"not_utf8"``, naming the character's index.
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        msg = f"{parameter} holds a character that is not valid Unicode text at index {e.start}"
        raise InvalidArgumentError(msg, parameter=parameter, reason_code="not_utf8") from None
    return value


def check_non_empty(parameter: str, value: object) -> str:
    """``value`` if it is a string with a non-whitespace character.

    :raises InvalidArgumentTypeError: not a string (``"not_a_string"``).
    :raises InvalidArgumentError: empty or blank (``"empty"``).
    """
    if not isinstance(value, str):
        msg = f"{parameter} must be a string, got {type(value).__name__}"
        raise InvalidArgumentTypeError(msg, parameter=parameter, reason_code="not_a_string")
    if not value.strip():
        msg = f"{parameter} must not be empty, got {value!r}"
        raise InvalidArgumentError(msg, parameter=parameter, reason_code="empty")
    return check_encodable(parameter, value)
