"""LangGraph's matching rules: search filters and namespace conditions.

The semantics are LangGraph's own (``langgraph.store.memory``, which mirrors PostgreSQL's
JSONB comparisons): a filter maps a top-level field to a value (equality, nested objects
compared field by field, lists element by element; a dotted key names a nested field, as
LangGraph's SqliteStore reads it) or to operators ``$eq $ne $gt $gte $lt
$lte`` (the ordering ones compare as numbers). On purpose different: a field that is
missing or not a number under an ordering operator does not match (LangGraph's in-memory
store raises ``TypeError`` from ``float(None)``); an unknown operator raises
:class:`FilterError` (a ``ValueError``, as LangGraph's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memory_ledger.commands.errors import InvalidArgumentError

__all__ = ["OPERATORS", "FilterError", "check_filter", "matches_filter", "matches_namespace"]

OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


class FilterError(InvalidArgumentError):
    """A search filter uses an operator other than :data:`OPERATORS`."""

    reason_code = "unsupported_filter_operator"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _operator(value: Any, operator: str, wanted: Any) -> bool:
    if operator == "$eq":
        return bool(value == wanted)
    if operator == "$ne":
        return bool(value != wanted)
    if operator not in OPERATORS:
        # Never the operator's text: a refused key may hold a secret (it reached host logs).
        msg = (
            f"unsupported filter operator ({len(operator)} characters; not repeated here); "
            f"use one of {', '.join(OPERATORS)}"
        )
        raise FilterError(msg, parameter="filter")
    left, right = _number(value), _number(wanted)
    if left is None or right is None:
        return False
    if operator == "$gt":
        return left > right
    if operator == "$gte":
        return left >= right
    if operator == "$lt":
        return left < right
    return left <= right


def _compare(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(value, str(k), v) for k, v in wanted.items())
        if not isinstance(value, Mapping):
            return False
        return all(_compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(wanted)
            and all(_compare(a, b) for a, b in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def matches_filter(value: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    """Whether an item's ``value`` passes the search filter ``wanted`` (None: every item).

    :raises FilterError: an operator outside :data:`OPERATORS`.
    """
    if not wanted:
        return True
    return all(_compare(_field(value, k), v) for k, v in wanted.items())


_MISSING = object()


def _field(value: Mapping[str, Any], key: str) -> Any:
    """The field a filter key names: the top-level field of that name, else, for a dotted
    key, the nested field along its path (``user.access-level``, as LangGraph's SqliteStore
    reads a JSON path; a literal top-level key with dots wins); None when absent."""
    found = value.get(key, _MISSING)
    if found is not _MISSING or "." not in key:
        return None if found is _MISSING else found
    current: Any = value
    for part in key.split("."):
        if not isinstance(current, Mapping) or part not in current:
            return None
        current = current[part]
    return current


def check_filter(wanted: Mapping[str, Any] | None) -> None:
    """Check the search filter ``wanted`` before any item is read: the operators it uses
    anywhere (where :func:`matches_filter` would read them) are :data:`OPERATORS`, so a
    bad filter is refused whether or not an item reaches it.

    :raises FilterError: an operator outside :data:`OPERATORS`.
    """
    for value in (wanted or {}).values():
        _check_wanted(value)


def _check_wanted(wanted: Any) -> None:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            for operator in wanted:
                if operator not in OPERATORS:
                    _operator(None, str(operator), None)  # raises FilterError
            return
        for value in wanted.values():
            _check_wanted(value)
    elif isinstance(wanted, (list, tuple)):
        for value in wanted:
            _check_wanted(value)


def matches_namespace(
    namespace: tuple[str, ...], conditions: Sequence[tuple[str, Sequence[str]]]
) -> bool:
    """Whether ``namespace`` meets every ``(match_type, path)`` condition: ``prefix`` or
    ``suffix``, ``*`` matching any one label (LangGraph's ``MatchCondition``)."""
    for match_type, path in conditions:
        if len(namespace) < len(path):
            return False
        pairs = (
            zip(namespace, path, strict=False)
            if match_type == "prefix"
            else zip(reversed(namespace), reversed(path), strict=False)
        )
        if any(p != "*" and n != p for n, p in pairs):
            return False
    return True
