"""How a LangGraph item is recorded as a keyed fact of the ledger, and read back.

One put is one ``remember`` of the engine (``commands.engine``) with:

- ``value``: the item's JSON value, exactly (``json.dumps``, key order kept, compact, the
  characters no stored text may hold written as ``\\uXXXX`` escapes): the one place the
  value lives, so ``get`` returns what was put. It is a document value of the engine
  (``Remember(document=True)``): up to :data:`MAX_VALUE_CHARS` characters, kept exactly
  and never searched; a longer one is refused (``value_too_large``, naming ``value``);
- ``subject``: ``lg`` and a digest of the item's address (its LangGraph namespace and key),
  ``predicate`` :data:`PREDICATE`: the engine's (subject, predicate) key, so a put of the
  same address supersedes the previous value (the engine lowercases keys; a hex digest
  keeps ``"Key"`` and ``"key"`` apart);
- ``tags``: the address as JSON (``langgraph:[["ns","sub"],"key"]``) and, with a TTL,
  ``langgraph-ttl:<minutes>``;
- ``statement``: the text of the item's indexed fields (``IndexConfig.fields``, paths such
  as ``a.b`` and ``arr[*]``; the whole document for ``$``) followed by a revision digest of
  address, value and TTL (``lgrev:`` and 16 hex digits), so two addresses never share a
  memory id (uuid5 of the statement) and a changed value is a new memory. Lexical and
  semantic recall search it. A record written before the digest had its colon
  (``lgrev`` and the digits: a run of 21 token characters, which sent every statement
  through every detector of the secret door) reads the same; a put of its unchanged value
  records a new memory superseding it instead of a reinforcement.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from memory_ledger.commands.errors import CommandRejectedError
from memory_ledger.commands.extraction.validation import MAX_DOCUMENT_VALUE_CHARS
from memory_ledger.ledger.arguments import BIDI_CONTROLS, TAG_CHARACTERS, check_encodable
from memory_ledger.ledger.errors import InvalidArgumentError, InvalidArgumentTypeError

__all__ = [
    "MAX_VALUE_CHARS",
    "PREDICATE",
    "Address",
    "Record",
    "address_of",
    "checked_ttl",
    "encode_record",
    "has_indexed_text",
    "index_text",
    "indexed_text",
    "subject_of",
]

PREDICATE = "langgraph-item"
"""The predicate of every item the store records."""

ADDRESS_TAG = "langgraph:"
TTL_TAG = "langgraph-ttl:"
MAX_TTL_MINUTES = 100 * 365 * 24 * 60
"""The longest TTL a put takes (a century): a longer one would overflow the expiry time."""
MAX_VALUE_CHARS = MAX_DOCUMENT_VALUE_CHARS
"""The longest value a put takes: 65,536 characters of JSON as recorded (compact, no space
after ``,`` and ``:``), so any value of 64 KB of JSON fits; a longer one is refused with
``value_too_large``. Only the indexed fields are searched (the statement, below); the
secret door reads the whole value."""
_HIDDEN = re.compile(
    "[\x7f-\x9f"
    + "".join(sorted(BIDI_CONTROLS))
    + f"{chr(TAG_CHARACTERS.start)}-{chr(TAG_CHARACTERS.stop - 1)}]"
)
"""The characters no stored text holds (``ledger.arguments.forbidden_character``) that
``json.dumps`` writes as they are (it escapes U+0000..U+001F itself): escaped in a value,
dropped from the searched text."""
_STATEMENT_ROOM = 1960
"""Characters of indexed text kept in the statement (the engine allows 2,000; the rest is
the revision digest)."""

_REVISION = re.compile(r"(?:\A| )lgrev:?[0-9a-f]{16}\Z")
"""The revision digest that ends every statement (:func:`encode_record`): ``lgrev:`` and 16
hex digits (a record written before the colon was added has ``lgrev`` and the digits)."""

Address = tuple[tuple[str, ...], str]
"""A LangGraph item's address: (namespace tuple, key)."""


def indexed_text(statement: str) -> str:
    """The indexed text of a record's ``statement``: the statement without its revision
    digest (the digest keeps memory ids apart; it is no text of the item). This is what the
    embedding function embeds; ``""`` for an item with nothing indexed (``index=False``,
    ``[]``, or fields the value does not hold)."""
    return _REVISION.sub("", statement)


def has_indexed_text(statement: str) -> bool:
    """Whether :func:`indexed_text` of ``statement`` is not empty, without the regular
    expression for a statement that does not start as the digest does (the digest is all
    of a statement only when the statement starts with it)."""
    return not statement.startswith("lgrev") or bool(indexed_text(statement))


class Record(msgspec.Struct, frozen=True, kw_only=True):
    """The arguments of the ``remember`` that records one put (see the module doc)."""

    statement: str
    subject: str
    value: str
    tags: tuple[str, ...]


def subject_of(namespace: Sequence[str], key: str) -> str:
    """The engine subject of an address: ``lg`` and 16 hex digits of its SHA-256 (a
    longer hex run looks like a secret to the secret door)."""
    return _subject(_address_json(namespace, key))


def _address_json(namespace: Sequence[str], key: str) -> str:
    """The address as compact JSON (``[["a","b"],"key"]``, non-ASCII kept), after each
    label and the key is checked to encode (a lone surrogate: a typed error naming
    ``namespace`` or ``key``)."""
    for label in namespace:
        check_encodable("namespace", label)
    check_encodable("key", key)
    return json.dumps([list(namespace), key], ensure_ascii=False, separators=(",", ":"))


def _subject(address_json: str) -> str:
    return "lg" + hashlib.sha256(address_json.encode("utf-8")).hexdigest()[:16]


def _json(value: Any, parameter: str) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as e:
        msg = f"{parameter} must be JSON-serializable: {type(e).__name__}"
        raise CommandRejectedError(msg, "value_not_json", parameter=parameter) from None
    check_encodable(parameter, text)
    return _HIDDEN.sub(_escaped, text)


def _escaped(found: re.Match[str]) -> str:
    """A hidden character as its JSON escape (a surrogate pair above U+FFFF)."""
    return json.dumps(found.group())[1:-1]


def checked_ttl(ttl: object) -> float | None:
    """``ttl`` (minutes) as a float, or None.

    :raises InvalidArgumentTypeError: not a number (``not_a_number``).
    :raises InvalidArgumentError: negative, not finite or over :data:`MAX_TTL_MINUTES`
        (``out_of_range``): such a TTL would be recorded and then break every read.
    """
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        msg = f"ttl must be a number of minutes, got {type(ttl).__name__}"
        raise InvalidArgumentTypeError(msg, parameter="ttl", reason_code="not_a_number")
    if not (math.isfinite(ttl) and 0 <= ttl <= MAX_TTL_MINUTES):
        msg = f"ttl must be between 0 and {MAX_TTL_MINUTES} minutes, got {ttl!r}"
        raise InvalidArgumentError(msg, parameter="ttl", reason_code="out_of_range")
    return float(ttl)


def index_text(value: Mapping[str, Any], fields: Sequence[str] | None) -> str:
    """The text of ``value`` at ``fields`` (LangGraph's ``get_text_at_path``), joined by
    line breaks; None or ``["$"]``: the whole document as JSON; ``[]``: nothing."""
    from langgraph.store.base import get_text_at_path  # the optional extra, on a write

    paths = ["$"] if fields is None else list(fields)
    texts: list[str] = []
    for path in paths:
        texts.extend(get_text_at_path(dict(value), path))
    return "\n".join(texts)


def encode_record(
    namespace: tuple[str, ...],
    key: str,
    value: Mapping[str, Any],
    fields: Sequence[str] | None,
    ttl: float | None,
) -> Record:
    """The record of a put of ``value`` at ``(namespace, key)`` indexing ``fields``
    (None: the whole document; ``[]``: not indexed) with ``ttl`` minutes (None: none).

    :raises CommandRejectedError: ``value`` is not a JSON object (``value_not_json``), its
        JSON is longer than :data:`MAX_VALUE_CHARS` (``value_too_large``), or the address is
        longer than a tag holds (``address_too_long``, 256 characters).
    :raises InvalidArgumentError: the value, a namespace label or the key holds a lone
        surrogate (``not_utf8``, ``parameter`` ``value``, ``namespace`` or ``key``).
    """
    if not isinstance(value, Mapping):
        msg = f"value must be a dict, got {type(value).__name__}"
        raise CommandRejectedError(msg, "value_not_json", parameter="value")
    text = _json(dict(value), "value")
    if len(text) > MAX_VALUE_CHARS:
        msg = f"value is {len(text)} characters of JSON, at most {MAX_VALUE_CHARS}"
        raise CommandRejectedError(msg, "value_too_large", parameter="value")
    raw = _address_json(namespace, key)  # a lone surrogate: named namespace or key
    subject = _subject(raw)
    address = ADDRESS_TAG + _HIDDEN.sub(_escaped, raw)  # as _json of it: it encodes
    if len(address) > 256:
        msg = "namespace and key together are longer than 256 characters as JSON"
        raise CommandRejectedError(msg, "address_too_long", parameter="key")
    minutes = checked_ttl(ttl)
    tags = (address,) if minutes is None else (address, f"{TTL_TAG}{minutes!r}")
    digest = hashlib.sha256("\x1f".join((address, text, repr(ttl))).encode("utf-8"))
    try:
        indexed = index_text(value, fields)
    except TypeError:
        # keys that do not sort together ({"a": 1, 2: "b"}: LangGraph's JSON sorts them):
        # the stored form, where every key is the string a get returns
        indexed = index_text(json.loads(text), fields)
    searched = " ".join(_HIDDEN.sub("", indexed).split())[:_STATEMENT_ROOM]
    # the colon keeps the digest under the secret scan's 20-character token run, which
    # would make the door run every detector on every statement (about 13 times the scan)
    statement = f"{searched} lgrev:{digest.hexdigest()[:16]}".strip()
    return Record(statement=statement, subject=subject, value=text, tags=tags)


def address_of(tags: Sequence[str]) -> Address | None:
    """The address a memory's tags record, or None (not an item of this store)."""
    for tag in tags:
        if tag.startswith(ADDRESS_TAG):
            try:
                raw = json.loads(tag[len(ADDRESS_TAG) :])
            except ValueError:
                return None
            if (
                isinstance(raw, list)
                and len(raw) == 2
                and isinstance(raw[0], list)
                and isinstance(raw[1], str)
            ):
                return tuple(str(label) for label in raw[0]), raw[1]
    return None


def ttl_of(tags: Sequence[str]) -> float | None:
    """The TTL in minutes a memory's tags record, or None."""
    for tag in tags:
        if tag.startswith(TTL_TAG):
            try:
                minutes = float(tag[len(TTL_TAG) :])
            except ValueError:
                return None
            # one recorded before puts were checked: never expiring beats breaking every read
            return minutes if math.isfinite(minutes) and minutes <= MAX_TTL_MINUTES else None
    return None
