"""Points in the ledger's history as users write them: a position or a timestamp.

``parse_point("40")`` is position 40; ``parse_point("2024-03-04T09:16:00Z")`` is a timestamp.
A timestamp without a zone is UTC; a date alone (``2024-03-04``) means the END of that day
(23:59:59.999999 UTC), so "as of 4 March" includes everything recorded on 4 March.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time

from memory_ledger.ledger.errors import InvalidArgumentError, NaiveDatetimeError

__all__ = ["NaiveTimestampError", "PointError", "parse_point", "parse_timestamp"]

_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


class PointError(InvalidArgumentError):
    """A position or timestamp given by the user cannot be read or is out of range."""

    reason_code = "bad_point"


class NaiveTimestampError(NaiveDatetimeError, PointError):
    """A datetime given to a time-travel API has no time zone (``parameter`` names it).

    Both a :class:`PointError` and a
    :class:`~memory_ledger.ledger.errors.NaiveDatetimeError` (``"naive_datetime"``). (Text
    without a zone is read as UTC by :func:`parse_timestamp`; a ``datetime`` object without
    one is refused.)
    """


def parse_timestamp(text: str) -> datetime:
    """An aware UTC datetime from ISO 8601 text (``Z`` allowed; no zone means UTC).

    A date alone (``YYYY-MM-DD``) means the last microsecond of that day.

    :raises PointError: the text is not an ISO 8601 date or date-time.
    """
    raw = text.strip()
    try:
        if _DATE_ONLY.match(raw):
            return datetime.combine(date.fromisoformat(raw), time.max, tzinfo=UTC)
        parsed = datetime.fromisoformat(raw)
    except ValueError:
        msg = f"{text!r} is not an ISO 8601 date or date-time (e.g. 2024-03-04T09:15:00Z)"
        raise PointError(msg) from None
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def parse_point(text: str) -> int | datetime:
    """A ledger position (digits, >= 0) or an aware timestamp (see :func:`parse_timestamp`).

    :raises PointError: the text is neither.
    """
    raw = text.strip()
    if raw.isdigit():
        return int(raw)
    if raw.startswith("-") and raw[1:].isdigit():
        msg = f"position {raw} is negative; positions start at 1 (0 is the empty ledger)"
        raise PointError(msg)
    try:
        return parse_timestamp(raw)
    except PointError:
        msg = f"{text!r} is neither a ledger position nor an ISO 8601 timestamp"
        raise PointError(msg) from None
