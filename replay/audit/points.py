"""Points in the ledger's history as users write them: a position or a timestamp.

``parse_point("40")`` is position 40; ``parse_point("2024-03-04T09:16:00Z")`` is a timestamp.
A date-time needs a zone (``Z`` or an offset such as ``+02:00``): one without is refused
(:class:`NaiveTimestampError`), exactly as a naive ``datetime`` is refused by the Python API,
never guessed as UTC or local time. A date alone (``2024-03-04``) means the END of that day
(23:59:59.999999 UTC), so "as of 4 March" includes everything recorded on 4 March.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time

from memory_ledger.ledger.errors import InvalidArgumentError, NaiveDatetimeError

__all__ = ["NaiveTimestampError", "PointError", "parse_point", "parse_timestamp", "whole_number"]

_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_ASCII_DIGITS = re.compile(r"[0-9]+")
"""Digits as users type them (``str.isdigit`` and ``\\d`` also accept ``²`` or ``٣``, which
``int`` refuses or reads as another number)."""
MAX_DIGITS = 18
"""The longest whole number read (any position or count fits; ``int`` refuses text of more
than 4,300 digits with a raw ``ValueError``)."""


class PointError(InvalidArgumentError):
    """A position or timestamp given by the user cannot be read or is out of range."""

    reason_code = "bad_point"


class NaiveTimestampError(NaiveDatetimeError, PointError):
    """A datetime given to a time-travel API has no time zone (``parameter`` names it).

    Both a :class:`PointError` and a
    :class:`~memory_ledger.ledger.errors.NaiveDatetimeError` (``"naive_datetime"``). Raised
    for a ``datetime`` object without a zone and for ISO 8601 date-time text without one
    (:func:`parse_timestamp`).
    """


def parse_timestamp(text: str, parameter: str | None = None) -> datetime:
    """An aware UTC datetime from ISO 8601 text with a zone (``Z`` or ``+02:00``).

    A date alone (``YYYY-MM-DD``) means the last microsecond of that day (UTC).

    :param parameter: the argument the text came from (``"--as-of"``, ``"as_of"``...),
        named in errors and set as their ``parameter``.
    :raises NaiveTimestampError: a date-time without a zone (never guessed as UTC).
    :raises PointError: the text is not an ISO 8601 date or date-time.
    """
    raw = text.strip()
    try:
        if _DATE_ONLY.match(raw):
            return datetime.combine(date.fromisoformat(raw), time.max, tzinfo=UTC)
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        msg = f"{text!r} is not an ISO 8601 date or date-time (e.g. 2024-03-04T09:15:00Z)"
        raise PointError(msg, parameter=parameter) from None
    if parsed.tzinfo is None or parsed.utcoffset() is None:
        raise NaiveTimestampError(_naive_message(raw, parameter), parameter=parameter)
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # e.g. 9999-12-31T23:59:59-14:00: the year 10000 in UTC
        where = f"{parameter} " if parameter else ""
        msg = f"{where}{text!r} has no time in UTC (past the years 1 to 9999 with its offset)"
        raise PointError(msg, parameter=parameter) from None


def _naive_message(raw: str, parameter: str | None) -> str:
    """One line naming the argument and saying how to give the time its zone."""
    where = f"{parameter} " if parameter else ""
    return (
        f"{where}{raw!r} has no time zone; add an offset such as Z or +02:00 "
        f"(e.g. {raw}Z); a time without one is not guessed"
    )


def whole_number(
    text: str,
    parameter: str | None = None,
    *,
    error: type[InvalidArgumentError] = InvalidArgumentError,
) -> int:
    """A whole number >= 0 written in ASCII digits (0-9, at most :data:`MAX_DIGITS`;
    surrounding white space ignored): what every integer a user types is read with (a
    position, a page offset, a count).

    :param parameter: the argument the text came from, named in the message and set as the
        error's ``parameter``.
    :param error: the error class raised (``PointError`` for a point).
    :raises InvalidArgumentError: (or ``error``) anything else: a sign, a fraction, other
        scripts' digits (``²``), more than :data:`MAX_DIGITS` digits.
    """
    raw = text.strip()
    name = parameter or "the value"
    if _ASCII_DIGITS.fullmatch(raw) is None:
        raise error(f"{name} must be a whole number >= 0 (digits 0-9)", parameter=parameter)
    if len(raw) > MAX_DIGITS:
        raise error(f"{name} has more than {MAX_DIGITS} digits", parameter=parameter)
    return int(raw)


def parse_point(text: str, parameter: str | None = None) -> int | datetime:
    """A ledger position (ASCII digits, :func:`whole_number`) or an aware timestamp (see
    :func:`parse_timestamp`).

    :param parameter: the argument the text came from, named in errors.
    :raises NaiveTimestampError: a date-time without a zone.
    :raises PointError: the text is neither.
    """
    raw = text.strip()
    where = f"{parameter} " if parameter else ""
    if _ASCII_DIGITS.fullmatch(raw):
        return whole_number(raw, parameter, error=PointError)
    if raw.startswith("-") and _ASCII_DIGITS.fullmatch(raw[1:]):
        msg = f"{where}position {raw} is negative; positions start at 1 (0 is the empty ledger)"
        raise PointError(msg, parameter=parameter)
    try:
        return parse_timestamp(raw, parameter)
    except NaiveTimestampError:
        raise
    except PointError:
        msg = f"{where}{text!r} is neither a ledger position nor an ISO 8601 timestamp"
        raise PointError(msg, parameter=parameter) from None
