"""Calendar dates named in a recall query, and whether a memory's time falls near them.

A question such as "What did Gina find for her clothing store on 1 February, 2023?" or
"What is John doing as a volunteer in August 2023?" names when the thing happened; the
memory told then carries that conversation time as ``occurred_at``. Recall reads the
explicit dates of a query (:func:`query_dates`) and the fusion lifts memories whose
``occurred_at`` falls in one of them, widened by :data:`DAYS_BEFORE` /
:data:`DAYS_AFTER` (:func:`occurred_in`; ``HybridFusion.temporal_boost``): a fact is
usually told in the conversation a few days after it happened ("last week I dropped off
baked goods..."), rarely before.

Recognised (English, case-insensitive, month names full or three-letter abbreviated, with
an optional trailing dot, ``Sept`` too):

- ``1 February, 2023``, ``1st of February 2023`` (day month year): that day;
- ``February 1, 2023``, ``Feb 1st 2023`` (month day year): that day;
- ``August 2023``, ``August, 2023`` (month year): the whole month.

A bare year, weekdays and relative phrases ("last week", "two days ago") are not read: a
query's relative phrase is relative to a time the query does not carry. Impossible dates
(``31 February, 2023``) are skipped. Pure functions: no clock, no locale.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, datetime, timedelta

import msgspec

__all__ = ["DAYS_AFTER", "DAYS_BEFORE", "DateRange", "occurred_in", "query_dates"]

DAYS_BEFORE = 1
"""A memory told up to this many days before a named date still matches it (whole days)."""

DAYS_AFTER = 7
"""A memory told up to this many days after a named date (or month) still matches it."""

_MONTHS: dict[str, int] = {}
for _number in range(1, 13):
    _MONTHS[calendar.month_name[_number].lower()] = _number
    _MONTHS[calendar.month_abbr[_number].lower()] = _number
_MONTHS["sept"] = 9

_MONTH = (
    r"(january|february|march|april|may|june|july|august|september|october|november|"
    r"december|jan|feb|mar|apr|jun|jul|aug|sept|sep|oct|nov|dec)\.?"
)
_ORDINAL = r"(?:st|nd|rd|th)?"
_DAY_MONTH_YEAR = re.compile(
    rf"\b(\d{{1,2}}){_ORDINAL}\s+(?:of\s+)?{_MONTH},?\s+(\d{{4}})\b", re.IGNORECASE
)
_MONTH_DAY_YEAR = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}}){_ORDINAL},?\s+(\d{{4}})\b", re.IGNORECASE)
_MONTH_YEAR = re.compile(rf"\b{_MONTH},?\s+(\d{{4}})\b", re.IGNORECASE)


class DateRange(msgspec.Struct, frozen=True):
    """An inclusive range of calendar days named by a query (``first <= last``)."""

    first: date
    last: date


def _day(year: str, month: str, day: str) -> DateRange | None:
    try:
        when = date(int(year), _MONTHS[month.lower()], int(day))
    except ValueError:
        return None
    return DateRange(when, when)


def query_dates(query: str) -> tuple[DateRange, ...]:
    """The calendar days and months ``query`` names explicitly, in the order found
    (days first, then months not already part of a day). Empty when it names none.

    >>> query_dates("What did Maria do in December 2023 and on May 3, 2023?")
    (DateRange(first=datetime.date(2023, 5, 3), last=datetime.date(2023, 5, 3)), \
DateRange(first=datetime.date(2023, 12, 1), last=datetime.date(2023, 12, 31)))
    """
    found: list[DateRange] = []
    taken: list[tuple[int, int]] = []
    for match in _DAY_MONTH_YEAR.finditer(query):
        day = _day(match.group(3), match.group(2), match.group(1))
        taken.append(match.span())
        if day is not None:
            found.append(day)
    for match in _MONTH_DAY_YEAR.finditer(query):
        if any(start <= match.start() < end for start, end in taken):
            continue
        day = _day(match.group(3), match.group(1), match.group(2))
        taken.append(match.span())
        if day is not None:
            found.append(day)
    for match in _MONTH_YEAR.finditer(query):
        if any(start <= match.start() < end for start, end in taken):
            continue
        year, month = int(match.group(2)), _MONTHS[match.group(1).lower()]
        if not 1 <= year <= 9999:
            continue
        last = calendar.monthrange(year, month)[1]
        found.append(DateRange(date(year, month, 1), date(year, month, last)))
    return tuple(dict.fromkeys(found))


def occurred_in(occurred_at: datetime | None, ranges: tuple[DateRange, ...]) -> bool:
    """Whether ``occurred_at`` (its calendar day, as stored: UTC for the engine's times)
    falls in one of ``ranges`` widened by :data:`DAYS_BEFORE` before and
    :data:`DAYS_AFTER` after. False without a time or without ranges."""
    if occurred_at is None or not ranges:
        return False
    day = occurred_at.date()
    before, after = timedelta(days=DAYS_BEFORE), timedelta(days=DAYS_AFTER)
    return any(r.first - before <= day <= r.last + after for r in ranges)
