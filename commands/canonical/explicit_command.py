"""What an explicit command is: the one decider of ``remember``, ``forget``, ``correct`` and
``pin`` (issue 38 item 1, issue 34 item 1).

Every surface that writes an explicit command decides it here: the direct commands of the
engine (sync and async, MCP, the LangGraph store) and its batches
(:class:`~memory_ledger.commands.engine.direct.DirectCommands`), and a session's
``apply_explicit_command`` (scripts and the CLI's ``run`` go through sessions). What is
decided here, from the reads a surface gives (:class:`CommandReads`):

- the checks: the statement (:func:`checked_statement`), the tags (:func:`checked_tags`),
  the intent (:func:`checked_intent`) and the item (:func:`checked_item`);
- the target: by id (a superseded one is refused with ``SupersededTargetError`` naming the
  current value; a forgotten, unknown or foreign one with ``UnknownMemoryError``), or by
  words (:mod:`memory_ledger.commands.canonical.word_targets`: never a memory the words are
  not about);
- the item: a plain one, the caller's, or for a ``correct`` the target's own
  (:func:`correction_item`: its subject, predicate, provenance and weight, the new
  statement);
- the command: :class:`Decided` (intent, statement, target, item), which the surface writes
  as its ``ExplicitCommandApplied``.

A change to a rule of explicit commands is a change to this module (or to ``word_targets``
for the word rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol
from uuid import UUID

import msgspec

from memory_ledger.commands.canonical.word_targets import correction_target, description_target
from memory_ledger.commands.errors import (
    CommandRejectedError,
    SupersededTargetError,
    UnknownMemoryError,
)
from memory_ledger.commands.extraction.validation import Rejection, has_visible_text, validate_item
from memory_ledger.ledger.arguments import forbidden_character
from memory_ledger.ledger.events import ExtractedItem

if TYPE_CHECKING:
    from memory_ledger.commands.canonical.memory_state import MemoryStreamState
    from memory_ledger.commands.recall.index import MemoryDoc

__all__ = [
    "INTENTS",
    "CommandReads",
    "CommandResult",
    "CheckedItem",
    "CommandSpec",
    "Decided",
    "Intent",
    "TargetFacts",
    "checked_intent",
    "checked_item",
    "checked_remember",
    "checked_statement",
    "checked_tags",
    "correction_item",
    "decide_command",
    "plain_item",
]

Intent = Literal["remember", "forget", "correct", "pin"]
INTENTS: tuple[Intent, ...] = ("remember", "forget", "correct", "pin")

SEARCHED = 10
"""How many of the best lexical matches a command naming its target by words reads."""


class CommandResult(msgspec.Struct, frozen=True, kw_only=True):
    """Result of an explicit command: its id, the memory it targets, the position written.

    Returned by the direct path (``MemoryEngine.remember``/``forget``/...) and by a
    session's commands alike; it lives here so both import it downward."""

    command_id: UUID
    intent: Intent
    target: UUID | None
    position: int
    already_applied: bool = False


class CheckedItem(msgspec.Struct, frozen=True, gc=False):
    """An item :func:`checked_item` accepted, carried from a command's checks to its
    decision (:func:`checked_remember`), so the item of a remember is validated once:
    :func:`decide_command` takes it as it is. ``document``: validated as a document item."""

    item: ExtractedItem
    document: bool = False
    cleared: bool = False
    """Whether its validation put every string of ``item`` itself to the secret door's
    questions (:func:`checked_remember`): the door then takes the item as clean, by
    identity (:func:`~memory_ledger.commands.secret_door.check_events` ``cleared``)."""


@dataclass(frozen=True, kw_only=True)
class CommandSpec:
    """One explicit command as asked: its intent, its statement (None for a direct forget
    or pin: the target's statement is recorded), the item the caller gives (None: a plain
    one, or for a ``correct`` the target's), the target by id or by ``words`` (a
    description: every content word held), the caller's ``subject`` for a correction, and
    its valid time (``occurred_at``, aware) and whether a remembered or corrected item's
    value is a document (``document``: up to
    :data:`~memory_ledger.commands.extraction.validation.MAX_DOCUMENT_VALUE_CHARS`, kept
    exactly; the LangGraph store's values). A ``correct`` with neither target nor words
    names its target by its own statement (the correction rule); a ``forget`` or ``pin``
    needs one of them."""

    intent: Intent
    text: str | None
    item: ExtractedItem | dict[str, Any] | CheckedItem | None = None
    target: UUID | None = None
    words: str | None = None
    subject: str | None = None
    occurred_at: datetime | None = None
    document: bool = False


@dataclass(frozen=True, kw_only=True)
class TargetFacts:
    """What a correction keeps of its target: the target's item (None: not known, e.g. a
    memory remembered earlier in the same batch) and its current tags, evidence and
    importance (reinforcement included)."""

    item: ExtractedItem | None
    tags: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    importance: float = 0.9

    @classmethod
    def of_state(cls, state: MemoryStreamState) -> TargetFacts:
        """The facts of a canonical memory, folded from its ledger history."""
        return cls(
            item=state.item, tags=state.tags, evidence=state.evidence, importance=state.importance
        )


@dataclass(frozen=True, kw_only=True)
class Decided:
    """A decided explicit command: the intent written (a correction naming no memory is a
    ``remember``), the statement, the target (None: none) and the item to activate (None
    for a forget or pin)."""

    intent: Intent
    statement: str
    target: UUID | None
    item: ExtractedItem | None


class CommandReads(Protocol):
    """What a surface lets the decider read (one decision attempt).

    - :meth:`state`: a memory's state from the ledger (None: unknown, or another
      namespace's);
    - :meth:`head`: the current head of a memory's supersession chain;
    - :meth:`searched`: the retrievable memories the words may name, best lexical match
      first (at most :data:`SEARCHED`; session facts too, in a session);
    - :meth:`chosen`: told the memory the words named, before anything is decided from it
      (the direct path checks it against the ledger and decides again when the search saw
      a later state);
    - :meth:`facts`: what a correction keeps of its target.
    """

    def state(self, memory: UUID) -> MemoryStreamState | None: ...

    def head(self, memory: UUID) -> UUID | None: ...

    def searched(self, words: str) -> Sequence[MemoryDoc]: ...

    def chosen(self, doc: MemoryDoc) -> None: ...

    def facts(self, target: UUID, doc: MemoryDoc | None) -> TargetFacts | None: ...


def decide_command(
    spec: CommandSpec, reads: CommandReads, planned: Mapping[UUID, str] | None = None
) -> Decided:
    """Decide ``spec`` from ``reads``; ``planned`` maps memories remembered earlier in the
    same batch (not yet in the ledger) to their statements: an id among them is a valid
    target.

    :raises SupersededTargetError: the target id was superseded (``current`` names the
        memory that holds the fact now).
    :raises UnknownMemoryError: the target id names no retrievable memory of the
        namespace (``unknown_memory``), or the words name none clearly (``no_match``,
        ``no_clear_target``) or several (``ambiguous_match``):
        :mod:`~memory_ledger.commands.canonical.word_targets`.
    :raises CommandRejectedError: the item fails validation.
    """
    planned = planned or {}
    target: UUID | None = None
    doc: MemoryDoc | None = None
    if spec.target is not None and spec.target in planned:
        target = spec.target
    elif spec.target is not None:
        seen = reads.state(spec.target)
        if seen is not None and seen.status == "superseded":
            raise SupersededTargetError(spec.target, reads.head(spec.target))
        if seen is None or not seen.retrievable:
            raise UnknownMemoryError(str(spec.target))
        target = spec.target
    elif spec.intent != "remember" and (spec.words is not None or spec.text is not None):
        if spec.words is not None:  # a description of the target
            found = reads.searched(spec.words)
            capped = len(found) >= SEARCHED
            doc = description_target(spec.words, found, capped=capped)
        else:  # a correction naming its target by its own statement
            assert spec.text is not None
            found = reads.searched(spec.text)
            capped = len(found) >= SEARCHED
            doc = correction_target(spec.text, found, subject=spec.subject, capped=capped)
        if doc is not None:
            reads.chosen(doc)
            target = UUID(doc.memory_id)
    intent: Intent = spec.intent
    if intent == "correct" and target is None:
        intent = "remember"  # a correction naming no memory remembers its statement
    statement = spec.text
    if statement is None:  # a direct forget / pin: the target's statement as it is now
        statement = _statement_of(target, doc, reads, planned)
    item: ExtractedItem | None = None
    if spec.intent == "correct":
        facts = None
        if target is not None and target not in planned:
            facts = reads.facts(target, doc)
        supplied = spec.item.item if isinstance(spec.item, CheckedItem) else spec.item
        item = checked_item(
            correction_item(statement, facts, doc, supplied), document=spec.document
        )
    elif spec.intent == "remember":
        if isinstance(spec.item, CheckedItem):
            return Decided(intent=intent, statement=statement, target=target, item=spec.item.item)
        raw = spec.item if spec.item is not None else plain_item(statement, "remember")
        item = checked_item(raw, document=spec.document)
    return Decided(intent=intent, statement=statement, target=target, item=item)


def _statement_of(
    target: UUID | None,
    doc: MemoryDoc | None,
    reads: CommandReads,
    planned: Mapping[UUID, str],
) -> str:
    if target is None:  # pragma: no cover - a forget or pin always has a target here
        msg = "a forget or pin without statement needs a target"
        raise UnknownMemoryError(msg, reason_code="no_match")
    if target in planned:
        return planned[target]
    if doc is not None:
        return doc.statement
    state = reads.state(target)
    if state is not None and state.item is not None:
        return state.item.statement
    return str(target)


def plain_item(text: str, intent: Intent, scope: str = "user") -> dict[str, Any]:
    """The item of a command given no item and no target to start from."""
    return {
        "kind": "semantic",
        "subject": None,
        "predicate": None,
        "value": None,
        "statement": text,
        "source": "fact",
        "scope": scope,
        "reason": f"the user explicitly asked to {intent} this",
        "importance": 0.9,
        "confidence": 1.0,
    }


def correction_item(
    text: str,
    facts: TargetFacts | None,
    doc: MemoryDoc | None,
    supplied: ExtractedItem | dict[str, Any] | None,
) -> dict[str, Any]:
    """The item of a ``correct`` (issue 13 item 4): the target's subject, predicate, kind,
    source, scope, reason, tags, evidence (its provenance) and importance, with the
    correction's statement, no value (the old one is what is being corrected) and the
    user's confidence; a plain item when there is no target. The fields ``supplied``
    actually gives (every key of a dict; the non-empty fields of an ``ExtractedItem``)
    override."""
    base = facts.item if facts is not None else None
    if facts is None and doc is None:
        raw = plain_item(text, "correct")
    else:
        tags = facts.tags if facts is not None else doc.tags if doc is not None else ()
        evidence = facts.evidence if facts is not None else doc.evidence if doc else ()
        importance = facts.importance if facts is not None else doc.importance if doc else 0.9
        raw = {
            "kind": base.kind if base else "semantic",
            "subject": base.subject if base else doc.subject if doc else None,
            "predicate": base.predicate if base else doc.predicate if doc else None,
            "value": None,
            "statement": text,
            "source": base.source if base else "fact",
            "scope": base.scope if base else doc.scope if doc else "user",
            "reason": base.reason if base else "the user explicitly asked to correct this",
            "importance": importance,
            "confidence": 1.0,
            "tags": list(tags),
            "evidence": list(evidence),
        }
    raw.update(_supplied(supplied))
    return raw


_NOT_SUPPLIED: tuple[object, ...] = (None, (), [])


def _supplied(item: ExtractedItem | dict[str, Any] | None) -> dict[str, Any]:
    """The fields a correction's ``item`` actually supplies: every key of a dict; the
    fields of an ``ExtractedItem`` that are not empty (None or an empty tuple)."""
    if item is None:
        return {}
    if isinstance(item, dict):
        return dict(item)
    fields = msgspec.structs.asdict(item)
    return {k: v for k, v in fields.items() if not any(v == e for e in _NOT_SUPPLIED)}


def checked_item(raw: ExtractedItem | dict[str, Any], *, document: bool = False) -> ExtractedItem:
    """``raw`` validated (``validate_item``; ``document``: its value is a document).

    :raises CommandRejectedError: the rule it fails (``reason_code``, ``parameter`` the
        field)."""
    outcome = validate_item(raw, document=document)
    if isinstance(outcome, Rejection):
        msg = f"the item was rejected ({outcome.reason_code}): {outcome.detail}"
        raise CommandRejectedError(msg, outcome.reason_code, parameter=outcome.field)
    return outcome


def checked_remember(
    raw: dict[str, Any], name: str, *, document: bool = False
) -> tuple[str, CheckedItem]:
    """The statement and item of a remember, checked as :func:`checked_statement` (of
    ``raw["statement"]``, named ``name``) then :func:`checked_item` (of ``raw`` with that
    statement) check them, in one validation: an item :func:`validate_item` accepts passes
    every check of :func:`checked_statement` too (the same whitespace collapse, visible
    text, forbidden characters, UTF-8 and secret scan of the statement), so the statement
    is checked once. Refused, the statement's own error comes first, as before.

    Returns the collapsed statement and the :class:`CheckedItem` that
    :func:`decide_command` takes without validating it again.

    :raises CommandRejectedError: what :func:`checked_statement`, then :func:`checked_item`,
        raise."""
    statement = raw.get("statement")
    outcome = validate_item(raw, document=document) if isinstance(statement, str) else None
    if isinstance(outcome, ExtractedItem):
        return outcome.statement, CheckedItem(outcome, document, _asked_itself(raw, outcome))
    text = checked_statement(statement, name)  # the statement's own refusal first
    return text, CheckedItem(checked_item({**raw, "statement": text}, document=document), document)


def _asked_itself(raw: dict[str, Any], item: ExtractedItem) -> bool:
    """Whether :func:`validate_item`, given the mapping ``raw``, put every string of the
    item it returned to the secret door's questions: it asks
    :func:`~memory_ledger.commands.secret_door.item_secret_field` of the item with its
    cleaned statement, reason and tags and ``raw``'s own subject, predicate, value and
    relations, and encodes each of those strings; the kind, source and scope are literals
    (``msgspec.convert`` of a mapping checks them). So the item returned is the one asked
    when cleaning left its subject, predicate and value as given and it cites nothing."""
    return (
        raw.get("subject") == item.subject
        and raw.get("predicate") == item.predicate
        and raw.get("value") == item.value
        and not item.evidence
        and not item.supersedes
        and not item.conflicts_with
    )


def checked_intent(intent: object) -> Intent:
    """``intent`` if it is one of :data:`INTENTS`.

    :raises CommandRejectedError: ``unknown_intent``."""
    for known in INTENTS:
        if intent == known:
            return known
    msg = f"unknown intent {intent!r}: expected remember, forget, correct or pin"
    raise CommandRejectedError(msg, "unknown_intent")


def checked_tags(tags: object, name: str) -> list[str]:
    """``tags`` as a list, refused (``invalid_tags``, naming ``name``) unless it is a list or
    tuple (validation checks each tag)."""
    if isinstance(tags, (str, bytes, dict, set)) or not isinstance(tags, Sequence):
        msg = f"{name} must be a list or tuple of strings, got {type(tags).__name__}"
        raise CommandRejectedError(msg, "invalid_tags", parameter=name)
    return list(tags)


def checked_statement(value: object, name: str) -> str:
    """``value`` with its whitespace collapsed, checked before anything is written: a
    string, not empty, no NUL, other control character (tab and line breaks aside) or
    bidirectional override (``"forbidden_character"``), valid Unicode, no secret-shaped
    value (never echoed).

    :raises CommandRejectedError: ``invalid_statement``, ``empty_statement``,
        ``forbidden_character``, ``not_utf8`` or ``secret_detected`` (``parameter``:
        ``name``)."""
    if not isinstance(value, str):
        msg = f"{name} must be a string, got {type(value).__name__}"
        raise CommandRejectedError(msg, "invalid_statement", parameter=name)
    text = " ".join(value.split())
    if not text or not has_visible_text(text):
        raise CommandRejectedError(f"{name} is empty", "empty_statement", parameter=name)
    forbidden = forbidden_character(value, line_breaks=True)
    if forbidden is not None:
        msg = (
            f"{name} holds {forbidden}; control characters and bidirectional overrides are refused"
        )
        raise CommandRejectedError(msg, "forbidden_character", parameter=name)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        msg = f"{name} holds a character that is not valid Unicode text"
        raise CommandRejectedError(msg, "not_utf8", parameter=name) from None
    from memory_ledger.commands.secrets import redact  # detect_secrets: loaded on a write

    if redact(text).count:
        msg = f"{name} holds a secret-shaped value; nothing was recorded"
        raise CommandRejectedError(msg, "secret_detected", parameter=name)
    return text
