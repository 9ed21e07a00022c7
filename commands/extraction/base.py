"""The extraction contract: what an extractor receives and the recorded extractor.

An extractor returns raw items (JSON-like mappings, as a model would produce them); the
session validates each one (``commands.extraction.validation``) and records the outcome as events,
so
replay never calls a model (docs/design.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import msgspec

from memory_ledger.ledger.errors import InvalidArgumentTypeError
from memory_ledger.ledger.events import PendingExtraction

__all__ = [
    "DETAIL_CHARS",
    "ExtractionRequest",
    "Extractor",
    "RecordedExtractor",
    "RelatedMemory",
    "pending_because",
]

DETAIL_CHARS = 500
"""How much of an extractor error's message a :class:`PendingExtraction` keeps."""


class RelatedMemory(msgspec.Struct, frozen=True):
    """An existing memory shown to the extractor (its id may be cited in relations)."""

    memory_id: str
    statement: str


class ExtractionRequest(msgspec.Struct, frozen=True, kw_only=True):
    """Input of one extraction: a session's finalized turn.

    ``transcript`` is already redacted and cut to ``max_input_chars`` characters;
    ``related`` holds at most 5 related existing memories; ``known_predicates`` the
    namespace's predicate vocabulary.
    """

    session_id: str
    turn_id: int
    transcript: str
    related: tuple[RelatedMemory, ...] = ()
    known_predicates: tuple[str, ...] = ()


@runtime_checkable
class Extractor(Protocol):
    """Proposes memory items for a turn. ``extractor_id`` names it in every event.

    An extractor may set ``uses_context = False`` (as the recorded extractor does) to skip
    the related-memory search and predicate vocabulary the session would otherwise prepare
    for it.
    """

    @property
    def extractor_id(self) -> str: ...

    def extract(self, request: ExtractionRequest) -> Sequence[Any]:
        """Raw items (mappings with the ITEM keys of docs/design.md)."""
        ...


class RecordedExtractor:
    """Returns the items recorded for each turn (session scripts, tests, replays).

    Items are provided per turn with :meth:`provide` before the turn is observed; a turn
    with nothing provided extracts no items.
    """

    uses_context = False
    """The recorded items do not depend on related memories or known predicates."""

    def __init__(self, extractor_id: str = "recorded") -> None:
        self._extractor_id = extractor_id
        self._items: dict[int, list[Any]] = {}

    @property
    def extractor_id(self) -> str:
        return self._extractor_id

    def provide(self, turn_id: int, items: Sequence[Mapping[str, Any] | Any]) -> None:
        """Record the raw items the next extraction of ``turn_id`` returns.

        :raises InvalidArgumentTypeError: (a ``TypeError``) ``items`` is a string or not a
            sequence.
        """
        if isinstance(items, str | bytes) or not isinstance(items, Sequence):
            msg = f"items must be a list of item objects, got {type(items).__name__}"
            raise InvalidArgumentTypeError(msg, parameter="items")
        self._items[turn_id] = list(items)

    def extract(self, request: ExtractionRequest) -> Sequence[Any]:
        return self._items.pop(request.turn_id, [])


def pending_because(turn_id: int, error: BaseException) -> PendingExtraction:
    """Why ``turn_id``'s extraction is pending after the extractor raised ``error``: its
    ``reason_code`` when it has one (else ``extractor_failed``), and its message with secret
    shapes redacted, cut to :data:`DETAIL_CHARS` characters."""
    code = getattr(error, "reason_code", None)
    from memory_ledger.commands.secrets import redact  # detect_secrets: only when needed

    detail = redact(f"{type(error).__name__}: {error}").text
    return PendingExtraction(
        turn_id=turn_id,
        reason_code=code if isinstance(code, str) and code else "extractor_failed",
        detail=" ".join(detail.split())[:DETAIL_CHARS],
    )
