"""Validation of extracted items. Every rule has a reason code (recorded on rejection).

Rules follow the A3S memory extraction contract (seed 000): semantic items are facts,
preferences or decisions; procedural items are workflows, failures or decisions; each
carries a scope, a non-empty future-value reason, importance >= 0.70 and confidence >= 0.75;
relation ids (``supersedes``, ``conflicts_with``: one id, a list of ids, or null) must be
ones the extractor was shown; namespace keys inside tags are refused
(docs/design.md). Rejection details never echo the item's text.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Collection, Iterable
from typing import Any

import msgspec

from memory_ledger.ledger.arguments import forbidden_character
from memory_ledger.ledger.events import ExtractedItem

__all__ = [
    "INJECTION_MARKERS",
    "MAX_DOCUMENT_VALUE_CHARS",
    "MAX_STATEMENT_CHARS",
    "MIN_CONFIDENCE",
    "MIN_IMPORTANCE",
    "MIN_STATEMENT_CHARS",
    "RELATION_FIELDS",
    "Rejection",
    "cited_ids",
    "has_injection_marker",
    "has_visible_text",
    "schema_detail",
    "validate_item",
]

MIN_IMPORTANCE = 0.70
MIN_CONFIDENCE = 0.75
MIN_STATEMENT_CHARS = 3
MAX_STATEMENT_CHARS = 2000
MAX_FIELD_CHARS = {"subject": 256, "predicate": 256, "value": MAX_STATEMENT_CHARS, "tags": 256}
"""The longest subject, predicate, value and tag accepted (characters): a key or a label,
not a document (``field_too_long``)."""
_P_ANY_SPACE = re.compile(r"\s")
"""Any whitespace character (``str.isspace``): a statement holding one is not one token."""
MAX_DOCUMENT_VALUE_CHARS = 65_536
"""The longest value of a document item (characters): a value a host keeps as a document,
such as a LangGraph store item's JSON (``validate_item(..., document=True)``; the
``document`` flag of a batch's ``Remember``). Such a value is kept exactly (its whitespace
is not collapsed) and is never searched: only the statement is tokenized and embedded. The
secret door reads all of it. Every other value stays at ``MAX_FIELD_CHARS["value"]``."""
MAX_TAGS = 64
"""The most tags one item carries (``too_many_tags``)."""
INJECTION_MARKERS = (
    re.compile(
        r"\b(ignore|disregard|forget)\s+(all\s+|any\s+)?(the\s+)?(previous|prior|above|earlier)\s+"
        r"(instructions|prompts?|rules|messages)",
        re.IGNORECASE,
    ),
    re.compile(r"<\|(im_start|im_end|system|endoftext)\|>", re.IGNORECASE),
    re.compile(r"^\s*(system|assistant)\s*:", re.IGNORECASE | re.MULTILINE),
    re.compile(r"\[/?INST\]|<<SYS>>|</?system>", re.IGNORECASE),
    re.compile(
        r"\byou are now\b.{0,40}\b(jailbroken|DAN|unrestricted|developer mode)\b", re.IGNORECASE
    ),
    re.compile(r"\b(reveal|print|show)\s+(your|the)\s+system\s+prompt\b", re.IGNORECASE),
)
"""Prompt-injection markers refused in memory items: instruction overrides, chat-template
control tokens, role prefixes. Plain words ("system", "forget", "ignore") never match alone."""


_ANY_INJECTION_MARKER = re.compile(
    "|".join(f"(?:{pattern.pattern})" for pattern in INJECTION_MARKERS),
    re.IGNORECASE | re.MULTILINE,
)
"""The markers as one pattern: one pass over a text instead of one per marker (only the
role-prefix marker anchors at ``^``, which is what it was compiled MULTILINE for)."""


_MARKER_WORDS = ("ignore", "disregard", "forget", "<|", "inst]", "<<sys>>", "system>")
"""Lowercase literals of which an ASCII text matching a marker holds at least one (with
:data:`_PROMPT_WORDS` and the role prefix's words and colon, see :func:`_may_mark`): the
override's verb, the template tokens' brackets."""
_PROMPT_WORDS = ("you are now", "prompt")


def _may_mark(lowered: str) -> bool:
    """Whether the lowercased ASCII text ``lowered`` holds a literal that every match of a
    marker of :data:`INJECTION_MARKERS` holds: one of :data:`_MARKER_WORDS` (the override's
    verb; ``<|``; ``[INST]``/``[/INST]``; ``<<SYS>>``; ``<system>``/``</system>``), ``you are
    now``, ``prompt`` (the system prompt request), or a colon with ``system`` or
    ``assistant`` (the role prefix). A text holding none matches no marker. ASCII only: under
    ``re.IGNORECASE`` a non-ASCII character may match an ASCII letter of a pattern (the
    Kelvin sign a ``k``), which lowercasing does not show."""
    if _ANY_MARKER_WORD.search(lowered) is not None:
        return True
    return ":" in lowered and ("system" in lowered or "assistant" in lowered)


_ANY_MARKER_WORD = re.compile("|".join(re.escape(w) for w in (*_MARKER_WORDS, *_PROMPT_WORDS)))
"""Any literal of :data:`_MARKER_WORDS` and :data:`_PROMPT_WORDS` (one search, where a
test per word took a Python loop)."""


def has_injection_marker(text: str) -> bool:
    """Whether ``text`` carries a prompt-injection marker (:data:`INJECTION_MARKERS`).

    An ASCII text is searched only when it holds a literal every match needs
    (:func:`_may_mark`): a statement without one is answered by a few substring tests
    instead of the markers' regular expression (the same answer; property-tested against
    the markers one by one)."""
    if text.isascii() and not _may_mark(text.lower()):
        return False
    return _ANY_INJECTION_MARKER.search(text) is not None


NAMESPACE_KEYS = frozenset({"tenant", "principal", "scope_id"})
_SOURCES_BY_KIND = {
    "semantic": frozenset({"fact", "preference", "decision"}),
    "procedural": frozenset({"workflow", "failure", "decision"}),
}


class Rejection(msgspec.Struct, frozen=True):
    """Why an item was refused: a stable ``reason_code``, a detail without item text and,
    when one field is at fault, its name (``field``: ``"statement"``, ``"subject"``,
    ``"tags"``, ...), which a command's error reports as its ``parameter``."""

    reason_code: str
    detail: str
    field: str | None = None


_SCHEMA_PATH = re.compile(r"at `\$\.([A-Za-z_]+)")


def _schema_field(message: str) -> str | None:
    """The top-level item field a msgspec validation message names (``at `$.subject```)."""
    found = _SCHEMA_PATH.search(message)
    return found.group(1) if found else None


_SCHEMA_AT = re.compile(r" - at `\$[^`]*`$")
_QUOTING = {
    "Invalid enum value": "Invalid enum value",
    "Object contains unknown field": "Object contains an unknown field",
}
"""msgspec messages that quote the caller's text (the value, the field's name), and what
is kept of them."""


def schema_detail(message: str) -> str:
    """msgspec's validation ``message`` without the item text it quotes (an invalid enum
    value, an unknown field's name: a canary secret there was stored in CandidateRejected
    and echoed by a command's error); the path (`` - at `$.kind```) is kept."""
    for start, kept in _QUOTING.items():
        if message.startswith(start):
            at = _SCHEMA_AT.search(message)
            return kept + (at.group(0) if at else "")
    return message


_INVISIBLE = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp", "Mn", "Me", "Cn", "Co", "Cs"})
"""Unicode categories that show nothing by themselves: controls, format characters
(zero-width spaces and joiners, direction marks), separators, combining marks without a
base, unassigned, private-use and surrogate code points."""


def has_visible_text(text: str) -> bool:
    """Whether ``text`` holds at least one character that shows (a letter, digit, mark of
    punctuation or symbol): a statement of zero-width spaces or direction marks alone is
    empty, however long (Unicode general categories, :data:`_INVISIBLE`)."""
    if text.isascii():  # the ASCII characters that show nothing: controls and the space
        return _ASCII_VISIBLE.search(text) is not None
    return any(unicodedata.category(ch) not in _INVISIBLE for ch in text)


_ASCII_VISIBLE = re.compile("[!-~]")
"""The ASCII characters that show (U+0021..U+007E): every other ASCII character is a
control (``Cc``) or the space (``Zs``), both :data:`_INVISIBLE`."""


def _clean(text: str | None) -> str | None:
    if text is None:
        return None
    stripped = " ".join(text.split())
    return stripped if stripped and has_visible_text(stripped) else None


RELATION_FIELDS = ("supersedes", "conflicts_with")
"""Item fields that cite memory ids: each takes one id, a list of ids, or null/[] (none)."""


def _relations_as_lists(raw: dict[str, Any]) -> dict[str, Any]:
    """``raw`` with each relation field as a list: null -> [], ``"id"`` -> ``["id"]``.

    Models emit either shape (and a consolidation names several ids); anything else is left
    for the schema check to reject.
    """
    if not any(name in raw for name in RELATION_FIELDS):
        return raw  # nothing to fix: msgspec.convert reads it as it is (no copy)
    fixed = dict(raw)
    for name in RELATION_FIELDS:
        value = fixed.get(name)
        if value is None:
            fixed[name] = []
        elif isinstance(value, str):
            fixed[name] = [value]
    return fixed


def _ids(values: tuple[str, ...]) -> tuple[str, ...]:
    """Memory ids stripped, blanks dropped, duplicates dropped (first wins)."""
    if not values:
        return ()
    return tuple(dict.fromkeys(v.strip() for v in values if v.strip()))


def cited_ids(raw_items: Iterable[Any]) -> set[str]:
    """Every memory id the relation fields of ``raw_items`` cite (raw mappings or items)."""
    ids: set[str] = set()
    for raw in raw_items:
        if isinstance(raw, ExtractedItem):
            ids.update(raw.supersedes, raw.conflicts_with)
            continue
        if not isinstance(raw, dict):
            continue
        for name in RELATION_FIELDS:
            value = raw.get(name)
            values = [value] if isinstance(value, str) else value
            if isinstance(values, list | tuple):
                ids.update(v.strip() for v in values if isinstance(v, str))
    ids.discard("")
    return ids


_DOOR: list[Callable[[ExtractedItem], str | None]] = []
"""The secret door's item question, imported on the first validation (detect_secrets loads
then, on a write) and kept, so a validation does not run an import statement."""


def _bare_statement_secret(statement: str) -> bool:
    """Whether a (non-document) statement is one secret token on its own
    (:func:`~memory_ledger.commands.secrets.fields.bare_token_secret`); a document's
    statement (a LangGraph value's JSON) is judged by the door's scan alone."""
    if _P_ANY_SPACE.search(statement) is not None:
        return False  # words: not one token (the common case, one C search)
    from memory_ledger.commands.secrets.fields import bare_token_secret

    return bare_token_secret(statement)


def _item_secret_field() -> Callable[[ExtractedItem], str | None]:
    if not _DOOR:
        from memory_ledger.commands.secret_door import item_secret_field

        _DOOR.append(item_secret_field)
    return _DOOR[0]


def validate_item(
    raw: Any, *, relation_ids: Collection[str] = (), document: bool = False
) -> ExtractedItem | Rejection:
    """Validate one raw item; return the normalized item or a :class:`Rejection`.

    ``document``: the item's ``value`` is a document (up to
    :data:`MAX_DOCUMENT_VALUE_CHARS`, kept exactly, whitespace included); every other rule
    applies to it as to any value.

    Reason codes: ``not_an_object``, ``schema_invalid``, ``empty_statement``,
    ``forbidden_character`` (a NUL, another control character but tab and line breaks, or
    a bidirectional override in any text field), ``statement_too_short``,
    ``statement_too_long``, ``missing_reason``, ``kind_source_mismatch``,
    ``importance_too_low``, ``confidence_too_low``, ``out_of_range``,
    ``namespace_key_in_tags``, ``unknown_relation_id``, ``secret_detected``, ``not_utf8``,
    ``prompt_injection``, ``field_too_long`` (:data:`MAX_FIELD_CHARS`), ``too_many_tags``
    (:data:`MAX_TAGS`).
    """
    if isinstance(raw, ExtractedItem):
        item = raw
    elif isinstance(raw, dict):
        try:
            item = msgspec.convert(_relations_as_lists(raw), ExtractedItem)
        except msgspec.ValidationError as e:
            return Rejection("schema_invalid", schema_detail(str(e)), _schema_field(str(e)))
    else:
        return Rejection("not_an_object", f"expected an object, got {type(raw).__name__}")

    statement = _clean(item.statement)
    if statement is None:
        return Rejection("empty_statement", "statement is empty", "statement")
    fields = [
        ("statement", item.statement),
        ("reason", item.reason),
        ("subject", item.subject),
        ("predicate", item.predicate),
        ("value", item.value),
        *(("tags", tag) for tag in item.tags),
    ]
    for name, text in fields:
        if not text:
            continue  # null or empty: nothing to check here
        forbidden = forbidden_character(text, line_breaks=True)
        if forbidden is not None:
            return Rejection("forbidden_character", f"{name} holds {forbidden}", name)
        try:  # a lone surrogate: refused here, before keys and ids are derived from the text
            text.encode("utf-8")
        except UnicodeEncodeError as e:
            detail = f"{name} holds a character that is not valid Unicode text at index {e.start}"
            return Rejection("not_utf8", detail, name)
        limit = MAX_FIELD_CHARS.get(name)
        if document and name == "value":
            limit = MAX_DOCUMENT_VALUE_CHARS
        if limit is not None and len(text) > limit:
            detail = f"{name} has {len(text)} characters, at most {limit}"
            return Rejection("field_too_long", detail, name)
    if len(item.tags) > MAX_TAGS:
        return Rejection("too_many_tags", f"{len(item.tags)} tags, at most {MAX_TAGS}", "tags")
    if len(statement) < MIN_STATEMENT_CHARS:
        return Rejection(
            "statement_too_short",
            f"statement has {len(statement)} characters, at least {MIN_STATEMENT_CHARS}",
            "statement",
        )
    if len(statement) > MAX_STATEMENT_CHARS:
        return Rejection(
            "statement_too_long",
            f"statement has {len(statement)} characters, at most {MAX_STATEMENT_CHARS}",
            "statement",
        )
    reason = _clean(item.reason)
    if reason is None:
        return Rejection("missing_reason", "reason (future value) is empty", "reason")
    if item.source not in _SOURCES_BY_KIND[item.kind]:
        return Rejection(
            "kind_source_mismatch",
            f"source {item.source!r} is not allowed for {item.kind!r}",
            "source",
        )
    for name, value in (("importance", item.importance), ("confidence", item.confidence)):
        if not 0.0 <= value <= 1.0:
            return Rejection("out_of_range", f"{name} {value} is outside [0, 1]", name)
    if item.importance < MIN_IMPORTANCE:
        detail = f"importance {item.importance} < {MIN_IMPORTANCE}"
        return Rejection("importance_too_low", detail, "importance")
    if item.confidence < MIN_CONFIDENCE:
        detail = f"confidence {item.confidence} < {MIN_CONFIDENCE}"
        return Rejection("confidence_too_low", detail, "confidence")
    tags = tuple(dict.fromkeys(t.strip() for t in item.tags if t.strip()))
    for tag in tags:
        key = tag.split(":", 1)[0].split("=", 1)[0].strip().casefold()
        if key in NAMESPACE_KEYS and (":" in tag or "=" in tag):
            return Rejection("namespace_key_in_tags", f"tag sets namespace key {key!r}", "tags")
    texts = [
        ("statement", statement),
        ("reason", reason),
        ("subject", item.subject or ""),
        ("predicate", item.predicate or ""),
        ("value", item.value or ""),
        *(("tags", tag) for tag in tags),
    ]
    item_secret_field = _item_secret_field()
    # The question the ledger's door asks of every event (commands.secret_door): a candidate
    # it would refuse is rejected here with a reason code instead.
    probe = msgspec.structs.replace(item, statement=statement, reason=reason, tags=tags)
    secret = item_secret_field(probe)
    if secret is None and not document and _bare_statement_secret(statement):
        secret = "statement"  # nothing but a password: as a bare subject, value or tag is
    if secret is not None:
        return Rejection("secret_detected", "the item holds a secret-shaped value", secret)
    for name, text in texts:
        if text and has_injection_marker(text):
            detail = "the item carries a prompt-injection marker"
            return Rejection("prompt_injection", detail, name)
    supersedes = _ids(item.supersedes)
    conflicts_with = _ids(item.conflicts_with)
    for relation in (*supersedes, *conflicts_with):
        if relation not in relation_ids:
            return Rejection(
                "unknown_relation_id",
                "a relation cites a memory id the extractor was not shown",
                "supersedes" if relation in supersedes else "conflicts_with",
            )
    return msgspec.structs.replace(
        item,
        statement=statement,
        reason=reason,
        subject=_clean(item.subject),
        predicate=_clean(item.predicate),
        value=item.value if document and item.value else _clean(item.value),
        tags=tags,
        supersedes=supersedes,
        conflicts_with=conflicts_with,
        evidence=tuple(dict.fromkeys(e for e in item.evidence if e)) if item.evidence else (),
    )
