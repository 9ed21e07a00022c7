"""The one secret scan at the ledger's door (docs/design.md, issue 25 item 2).

Every event passes :func:`check_event` in
:meth:`~memory_ledger.commands.engine.memory_engine.MemoryEngine.append`, the one place events are
encoded for the ledger (LMDB and PostgreSQL alike), before a byte of it is encoded. The scan walks
EVERY string of the payload, however it got there: statements, subjects, predicates, values, tags,
reasons, evidence ids, session and client labels, namespace parts, workspace paths, knowledge ids,
error texts, dictionary keys and values, nested structs and sequences. An event that holds a
secret-shaped value refuses the whole batch with :class:`SecretRefusedError` (``reason_code``
``secret_detected``), naming the field (never the value): nothing is written. A new surface (a
store adapter, a tool) inherits the rule instead of repeating it.

Transcripts keep their redaction (a turn is evidence: ``commands.session.extraction``
replaces secret spans by ``[REDACTED:<kind>]`` markers before the event is built, and the
markers are opaque to the scan), so a redacted transcript passes.

Structured fields are scanned as whole fields too
(:func:`~memory_ledger.commands.secrets.field_secret`): a bare generated password as an item's
``value`` or a tag, and a value whose item's predicate names a credential ("password", "api key",
...), are secrets though no keyword stands inside the value. Validation of extracted items asks
the same question (:func:`item_secret_field`), so a candidate the door would refuse is rejected
with a reason code instead of failing its turn.

Identifiers (a namespace's parts, a session id) are checked before any command is decided
(:func:`check_identifiers`): they are stored in every event the command would write, so one
holding a secret is refused up front as an invalid identifier, naming the part.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any
from uuid import UUID

import msgspec

from memory_ledger.commands.errors import CommandRejectedError
from memory_ledger.commands.secrets import contains_secret, field_secret
from memory_ledger.commands.secrets.detect import register_scan_cache
from memory_ledger.ledger.arguments import check_encodable
from memory_ledger.ledger.events import ExtractedItem, LedgerEvent
from memory_ledger.ledger.ids import InvalidNamespaceError

__all__ = [
    "SecretRefusedError",
    "check_event",
    "check_events",
    "check_identifiers",
    "item_secret_field",
]

_CACHED_UP_TO = 512
"""Strings up to this many characters are remembered (ids, labels and statements recur in
many events of one command); longer ones (transcripts) are scanned each time."""


class SecretRefusedError(CommandRejectedError):
    """An event about to be written holds a secret-shaped value; nothing was written.

    ``parameter`` names the field (the last part of its path: ``value``, ``tags``,
    ``statement``, ``session_id``, ...); ``field_path`` the whole path in the event
    (``MemoryActivated.item.value``). Neither the message nor any attribute holds the value.
    """

    reason_code = "secret_detected"

    def __init__(self, event_type: str, path: str) -> None:
        leaf = path.rsplit(".", 1)[-1].split("[", 1)[0]
        super().__init__(
            f"{leaf} holds a secret-shaped value ({event_type}.{path}); nothing was written",
            "secret_detected",
            parameter=leaf,
        )
        self.field_path = f"{event_type}.{path}"


@lru_cache(maxsize=16384)
def _cached(text: str) -> bool:
    return contains_secret(text)


def _text_secret(text: str) -> bool:
    if not text:
        return False
    return _cached(text) if len(text) <= _CACHED_UP_TO else contains_secret(text)


@lru_cache(maxsize=16384)
def _field(text: str, label: str | None) -> bool:
    return field_secret(text, label=label)


register_scan_cache(_cached.cache_clear)  # both hold scanned texts: emptied after an erasure
register_scan_cache(_field.cache_clear)


def item_secret_field(item: ExtractedItem) -> str | None:
    """The name of the first field of ``item`` that holds a secret (``statement``,
    ``reason``, ``subject``, ``predicate``, ``value``, ``tags``, ``evidence``,
    ``supersedes``, ``conflicts_with``), or None. The value is judged with its predicate as
    its label (``password`` = ``Zq8!vR2#mK9pL4xW``); subject, predicate, value and tags are
    also judged as whole fields (a bare generated password or cloud key)."""
    if _text_secret(item.statement):
        return "statement"
    if _text_secret(item.reason):
        return "reason"
    for name, text in (("subject", item.subject), ("predicate", item.predicate)):
        if text and (_field(text[:_CACHED_UP_TO], None) or _longer_secret(text)):
            return name
    value = item.value
    if value and (_field(value[:_CACHED_UP_TO], item.predicate) or _longer_secret(value)):
        return "value"
    for name in ("tags", "evidence", "supersedes", "conflicts_with"):
        for text in getattr(item, name):
            if _field(text[:_CACHED_UP_TO], None) or _longer_secret(text):
                return name
    return None


def _longer_secret(text: str) -> bool:
    """Whether the part of ``text`` beyond the whole-field judge's first
    :data:`_CACHED_UP_TO` characters makes a secret: a scan of the whole text, needed only
    when it is longer (``field_secret`` of a text asks :func:`contains_secret` of that same
    text first, so a field it found clean holds no scanned secret)."""
    return len(text) > _CACHED_UP_TO and _text_secret(text)


def _secret_paths(value: Any, path: str) -> Iterator[str]:
    """The path (``a.b[2]``, ``meta[key]``) of every secret-holding string inside
    ``value``; an item's fields are judged together (:func:`item_secret_field`)."""
    if isinstance(value, str):
        check_encodable(path, value)  # a lone surrogate: a typed error, never a codec error
        if _text_secret(value):
            yield path
    elif isinstance(value, msgspec.Struct):
        if isinstance(value, ExtractedItem):
            field = item_secret_field(value)
            if field is not None:
                yield f"{path}.{field}"
        for name in value.__struct_fields__:
            yield from _secret_paths(getattr(value, name), f"{path}.{name}" if path else name)
    elif isinstance(value, (tuple, list, frozenset, set)):
        for index, entry in enumerate(value):
            yield from _secret_paths(entry, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, entry in value.items():
            if isinstance(key, str) and _text_secret(key):
                yield f"{path}[]"
            name = key if isinstance(key, str) and key.isidentifier() else ""
            yield from _secret_paths(entry, f"{path}[{name[:40]}]")


_OPAQUE: frozenset[type] = frozenset({type(None), bool, int, float, UUID, datetime})
"""Field types that hold no string (skipped by the clean walk without further checks)."""


_fields_of = msgspec.structs.astuple


def _clean_text(text: str, seen: set[str]) -> bool:
    """Whether ``text`` encodes and holds no secret; ``seen`` holds the strings already found
    clean by the same call (one command's events repeat their session id, namespace parts,
    reasons and labels), each scanned once per call."""
    if text in seen:
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    if _text_secret(text):
        return False
    seen.add(text)
    return True


def _clean(value: Any, memo: set[int], seen: set[str]) -> bool:
    """Whether :func:`_secret_paths` finds nothing in ``value`` and raises nothing: every
    string encodes and holds no secret, every item passes :func:`item_secret_field`. The
    same walk without building paths (they are built only when this says no), so an event
    costs one pass over its fields. ``memo`` holds the ids of frozen structs already found
    clean in the same call (the namespace and the item that several events of one command
    share), valid while the caller holds the events; ``seen`` the strings found clean in the
    same call (:func:`_clean_text`)."""
    if type(value) in _OPAQUE:
        return True
    if isinstance(value, str):
        return _clean_text(value, seen)
    if isinstance(value, msgspec.Struct):
        if id(value) in memo:
            return True
        if isinstance(value, ExtractedItem) and item_secret_field(value) is not None:
            return False
        for entry in _fields_of(value):  # the values in field order, in one C call
            kind = type(entry)
            if kind in _OPAQUE:
                continue
            if kind is str:
                if not _clean_text(entry, seen):
                    return False
            elif not _clean(entry, memo, seen):
                return False
        if value.__struct_config__.frozen:
            memo.add(id(value))
        return True
    if isinstance(value, (tuple, list, frozenset, set)):
        for entry in value:
            if type(entry) is str:
                if not _clean_text(entry, seen):
                    return False
            elif not _clean(entry, memo, seen):
                return False
        return True
    if isinstance(value, dict):
        for key, entry in value.items():
            if isinstance(key, str) and _text_secret(key):
                return False
            if not _clean(entry, memo, seen):
                return False
    return True


def check_event(event: LedgerEvent) -> None:
    """Refuse ``event`` if any string of its payload holds a secret-shaped value.

    The event is walked once without paths (:func:`_clean`); only an event that fails it
    is walked again to name the first offending field (so the error is the same).

    :raises SecretRefusedError: names the event type and the field's path; never the value.
    :raises InvalidArgumentError: a string holds a lone surrogate (``not_utf8``).
    """
    check_events((event,))


def check_events(events: Sequence[LedgerEvent], cleared: Collection[ExtractedItem] = ()) -> None:
    """:func:`check_event` for each of ``events`` in order, the structs they share (one
    command's namespace and items) walked once.

    ``cleared``: items whose every string the caller's validation already put to this door's
    own questions in the same call (:func:`item_secret_field` of the item's own values, each
    string encoded, no field but the validated literals and those it asked;
    :func:`~memory_ledger.commands.canonical.explicit_command.checked_remember`). Each is
    taken as clean by identity, never by value: an equal item that is not the same object,
    and every other string of the events, is walked as always.

    :raises SecretRefusedError: the first offending event, as :func:`check_event`.
    :raises InvalidArgumentError: a string holds a lone surrogate (``not_utf8``).
    """
    memo: set[int] = set()
    seen: set[str] = set()  # this call's clean strings: dropped when it returns
    for item in cleared:
        memo.add(id(item))  # valid while the caller holds the events that carry it
        seen.add(item.statement)  # the command repeats its item's statement
    for event in events:
        if _clean(event, memo, seen):
            continue
        for path in _secret_paths(event, ""):
            raise SecretRefusedError(type(event).__name__, path)


def check_identifiers(parts: Sequence[tuple[str, str | None]], why: str) -> None:
    """Refuse an identifier that holds a secret-shaped value ("no identifier holds a secret").

    ``parts`` are ``(label, value)`` pairs (``("tenant", namespace.tenant)``, ``("session_id",
    session_id)``, ...); a ``None`` or empty value passes. ``why`` ends the message (what the
    identifier would be stored in). Used by
    :meth:`~memory_ledger.commands.engine.memory_engine.MemoryEngine.session` and
    :func:`~memory_ledger.commands.canonical.bulk_forget.forget_all`.

    :raises InvalidNamespaceError: the first part holding a secret (``reason_code``
        ``secret_detected``, ``parameter`` its label); the message never holds the value.
    """
    for label, value in parts:
        if isinstance(value, str) and _text_secret(value):
            msg = f"{label} holds a secret-shaped value; {why}"
            raise InvalidNamespaceError(msg, parameter=label, reason_code="secret_detected")
