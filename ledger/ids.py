"""Namespaces and the derived ids of streams, candidates and memories.

Every id is a uuid5 of its natural key (RFC 4122 name-based ids), so a retried command
addresses the same stream and a replay derives the same ids without randomness.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache
from hashlib import sha1
from uuid import UUID, SafeUUID, uuid5

import msgspec

from memory_ledger.ledger.arguments import forbidden_character
from memory_ledger.ledger.errors import InvalidArgumentError, InvalidArgumentTypeError

__all__ = [
    "as_memory_id",
    "ID_ROOT",
    "INVISIBLE_CHARACTERS",
    "InvalidNamespaceError",
    "Namespace",
    "bulk_forget_stream_id",
    "candidate_id",
    "check_namespace",
    "check_session_id",
    "erasure_stream_id",
    "command_id",
    "derived_id",
    "drop_invisible",
    "recall_stream_id",
    "snapshot_id",
    "memory_id",
    "normalize_statement",
    "session_stream_id",
    "subject_predicate_key",
]

ID_ROOT = uuid5(UUID("6ba7b811-9dad-11d1-80b4-00c04fd430c8"), "https://memory-ledger.dev/ids/v1")
"""Root of every derived id (uuid5 of a URL under the RFC 4122 URL namespace)."""

_ROOT_BYTES = ID_ROOT.bytes
_CLEAR = ~((0xC000 << 48) | (0xF000 << 64))
_SET = (0x8000 << 48) | (5 << 76)
_new_uuid = object.__new__
_set = object.__setattr__


def _derived(name: str) -> UUID:
    """``uuid5(ID_ROOT, name)`` bit for bit (RFC 4122: SHA-1 of the root's bytes and the
    name's UTF-8, the version and variant bits set), without ``UUID.__init__``'s argument
    checks: the one id derivation of this module, on every command's hot path.

    :raises UnicodeEncodeError: ``name`` holds a lone surrogate (as ``uuid5``).
    """
    number = int.from_bytes(sha1(_ROOT_BYTES + name.encode("utf-8")).digest()[:16])
    derived = _new_uuid(UUID)
    _set(derived, "int", (number & _CLEAR) | _SET)
    _set(derived, "is_safe", SafeUUID.unknown)
    return derived


def derived_id(name: str) -> UUID:
    """``uuid5(ID_ROOT, name)``, bit for bit, without ``UUID.__init__``'s checks (the tags
    of :mod:`memory_ledger.ledger.tags` derive theirs on every write).

    :raises UnicodeEncodeError: ``name`` holds a lone surrogate (as ``uuid5``).
    """
    return _derived(name)


MAX_NAMESPACE_PART_BYTES = 256


class InvalidNamespaceError(InvalidArgumentError):
    """A namespace part is empty, not a string, longer than 256 UTF-8 bytes, or holds a
    control character, bidirectional override or tag character (``"forbidden_character"``).

    ``parameter`` names the part (``"tenant"``, ``"principal"``, ``"scope_id"``; or
    ``"session_id"`` for a session id refused for the same reasons).
    """

    reason_code = "invalid_namespace"


def _check_stored_label(value: str, label: str, parameter: str, too_long_code: str) -> None:
    """The rules a namespace part and a session id share, as text stored in every event of
    theirs and shown by the CLI: valid UTF-8 (``"not_utf8"``), at most
    :data:`MAX_NAMESPACE_PART_BYTES` bytes (``too_long_code``), no control, bidirectional
    override or tag character (``"forbidden_character"``). Messages say ``label`` and never
    repeat the value.

    :raises InvalidNamespaceError: naming ``parameter``.
    """
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as e:
        msg = f"{label} holds a character that is not valid Unicode text at index {e.start}"
        raise InvalidNamespaceError(msg, parameter=parameter, reason_code="not_utf8") from None
    if size > MAX_NAMESPACE_PART_BYTES:
        msg = f"{label} is {size} bytes long, at most {MAX_NAMESPACE_PART_BYTES} allowed"
        raise InvalidNamespaceError(msg, parameter=parameter, reason_code=too_long_code)
    forbidden = forbidden_character(value)
    if forbidden is not None:
        msg = (
            f"{label} holds {forbidden}; control characters, bidirectional overrides "
            "and tag characters are refused"
        )
        raise InvalidNamespaceError(msg, parameter=parameter, reason_code="forbidden_character")


class Namespace(msgspec.Struct, frozen=True, forbid_unknown_fields=True, gc=False):
    """``(tenant, principal, scope_id)``: isolates memories; part of every stream id and query.

    Each part is a non-empty string of at most 256 UTF-8 bytes (docs/design.md) without
    NULs, other control characters, bidirectional overrides (U+202A..U+202E,
    U+2066..U+2069) or tag characters; :meth:`validated` checks that and raises
    :class:`InvalidNamespaceError`.
    """

    tenant: str
    principal: str
    scope_id: str

    def validated(self) -> Namespace:
        """Return self, or raise :class:`InvalidNamespaceError` naming the bad part."""
        for name in ("tenant", "principal", "scope_id"):
            value = getattr(self, name)
            if not isinstance(value, str):
                msg = f"namespace {name} must be a string, got {type(value).__name__}"
                raise InvalidNamespaceError(
                    msg, parameter=name, reason_code="namespace_part_not_a_string"
                )
            if not value.strip():
                msg = f"namespace {name} must be a non-empty string, got {value!r}"
                raise InvalidNamespaceError(msg, parameter=name, reason_code="empty_namespace_part")
            _check_stored_label(value, f"namespace {name}", name, "namespace_part_too_long")
        return self

    def key(self) -> str:
        """Unambiguous text key of the namespace (a JSON array of its three parts)."""
        return msgspec.json.encode([self.tenant, self.principal, self.scope_id]).decode()


def check_namespace(namespace: object, parameter: str = "namespace") -> Namespace:
    """``namespace`` if it is a valid :class:`Namespace`.

    :raises InvalidArgumentTypeError: not a ``Namespace`` (``reason_code``
        ``"not_a_namespace"``).
    :raises InvalidNamespaceError: a part is empty, not a string or too long.
    """
    if not isinstance(namespace, Namespace):
        msg = (
            f"{parameter} must be a Namespace(tenant, principal, scope_id), "
            f"got {type(namespace).__name__}"
        )
        raise InvalidArgumentTypeError(msg, parameter=parameter, reason_code="not_a_namespace")
    return namespace.validated()


def check_session_id(session_id: object, parameter: str = "session_id") -> str:
    """``session_id`` if it is a valid session id: the rules of a namespace part (a
    non-empty string of at most 256 UTF-8 bytes without control characters, bidirectional
    overrides or Unicode tag characters), since it is stored in every event of the session
    and shown by ``memory-ledger events``.

    :raises InvalidArgumentTypeError: not a string (``"not_a_string"``).
    :raises InvalidNamespaceError: ``parameter`` names it; ``reason_code`` ``"empty"``,
        ``"not_utf8"``, ``"session_id_too_long"`` or ``"forbidden_character"``. The
        message never repeats the id.
    """
    if not isinstance(session_id, str):
        msg = f"{parameter} must be a string, got {type(session_id).__name__}"
        raise InvalidArgumentTypeError(msg, parameter=parameter, reason_code="not_a_string")
    if not session_id.strip():
        msg = f"{parameter} must be a non-empty string"
        raise InvalidNamespaceError(msg, parameter=parameter, reason_code="empty")
    _check_stored_label(session_id, parameter, parameter, "session_id_too_long")
    return session_id


_SPACE = re.compile(r"\s+")
_TRAILING = re.compile(r"[\s.!?。！？]+$")


INVISIBLE_CHARACTERS = "\u200b\u200c\u200d\u2060\ufeff\u00ad"
"""Zero-width and format characters that change no visible glyph of a statement: ZERO WIDTH
SPACE, ZERO WIDTH NON-JOINER, ZERO WIDTH JOINER, WORD JOINER, ZERO WIDTH NO-BREAK SPACE and
SOFT HYPHEN (shown only where a line breaks). :func:`normalize_statement` and the lexical
tokenizer (:func:`projections.text_index.tokenize`) drop them."""

_INVISIBLE = dict.fromkeys(map(ord, INVISIBLE_CHARACTERS))


def drop_invisible(text: str) -> str:
    """``text`` without its :data:`INVISIBLE_CHARACTERS` (``str -> str``; every other
    character kept, in order): "ma\u200btcha" and "ma\u00adtcha" become "matcha"."""
    return text.translate(_INVISIBLE)


@lru_cache(maxsize=16384)
def normalize_statement(statement: str) -> str:
    """The exact-duplicate key of a statement (remembered for the last 16,384 statements: a
    command derives its memory id, its command id and its reconciliation from one
    statement; ``normalize_statement.cache_clear()`` empties it, as the engine does after an
    erasure).

    Zero-width characters (U+200B, U+200C, U+200D, U+2060, U+FEFF) and the soft hyphen
    (U+00AD) dropped (:func:`drop_invisible`), then Unicode
    NFKC (which folds full-width and compatibility forms), casefolded, whitespace runs
    collapsed to one space, trailing sentence punctuation removed. Two statements are exact
    normalized duplicates when their keys match, so text that looks the same ("Alice likes
    tea." with a hidden U+200B) is the same memory. A statement without those characters
    keeps the key (and the memory id) it had before they were dropped.
    """
    if statement.isascii():  # the same key, without the steps that are identities here
        return _ascii_key(statement)
    text = unicodedata.normalize("NFKC", drop_invisible(statement)).casefold()
    text = _SPACE.sub(" ", text).strip()
    return _TRAILING.sub("", text)


def _ascii_key(statement: str) -> str:
    """:func:`normalize_statement` of an ASCII ``statement``: no ASCII character is
    invisible or changed by NFKC, casefolding ASCII is lowercasing, ``str.split`` splits
    at exactly the characters ``\\s`` matches, and after the collapse the only whitespace
    left for the trailing run is the space (property-tested against the general path)."""
    return " ".join(statement.lower().split()).rstrip(" .!?")


def subject_predicate_key(subject: str | None, predicate: str | None) -> tuple[str, str] | None:
    """The (subject, predicate) match key of an item: both stripped and lowercased; None
    when either is null or blank (a null predicate never matches anything)."""
    if not subject or not predicate or not subject.strip() or not predicate.strip():
        return None
    return subject.strip().lower(), predicate.strip().lower()


def session_stream_id(namespace: Namespace, session_id: str) -> UUID:
    """Stream id of a session: uuid5 of (namespace, session id)."""
    return _derived("session\x1f" + namespace.key() + "\x1f" + session_id)


def memory_id(namespace: Namespace, normalized_statement: str) -> UUID:
    """Stream id of a canonical memory item: uuid5 of (namespace, normalized statement)."""
    return _derived("memory\x1f" + namespace.key() + "\x1f" + normalized_statement)


def candidate_id(session_stream: UUID, turn_id: int, index: int) -> UUID:
    """Id of the ``index``-th item extracted from a turn of a session."""
    return _derived(f"candidate\x1f{session_stream}\x1f{turn_id}\x1f{index}")


def command_id(session_stream: UUID, turn_id: int, intent: str, statement: str) -> UUID:
    """Id of an explicit command: a retried identical command (same turn, intent and
    normalized statement) is the same command."""
    key = f"command\x1f{session_stream}\x1f{turn_id}\x1f{intent}\x1f"
    return _derived(key + normalize_statement(statement))


def snapshot_id(session_stream: UUID, turn_id: int, generation: int, digest: str) -> UUID:
    """Id of a prepared snapshot: its session, turn, generation and content digest."""
    return _derived(f"snapshot\x1f{session_stream}\x1f{turn_id}\x1f{generation}\x1f{digest}")


def bulk_forget_stream_id(namespace: Namespace, command: UUID) -> UUID:
    """Stream id of one ``forget_all`` command over ``namespace``."""
    return _derived(f"forget-all\x1f{namespace.key()}\x1f{command}")


def recall_stream_id(session_stream: UUID, sequence: str) -> UUID:
    """Stream id of one RecallServed record (a read-path record gets its own stream)."""
    return _derived(f"recall\x1f{session_stream}\x1f{sequence}")


def erasure_stream_id(command: UUID) -> UUID:
    """Stream id of the :class:`~memory_ledger.ledger.events.NamespaceErased` record of one
    erasure command (a retried record hits the same stream)."""
    return _derived(f"erasure\x1f{command}")


def as_memory_id(value: object) -> UUID | None:
    """``value`` as a memory id: a UUID, or a string holding one (surrounding whitespace
    ignored); None for anything else (a statement, another type)."""
    if isinstance(value, UUID):
        return value
    if isinstance(value, str):
        try:
            return UUID(value.strip())
        except ValueError:
            return None
    return None
