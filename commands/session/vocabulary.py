"""What a session's memory can already say: predicates, values, statements."""

from __future__ import annotations

from typing import Literal

import msgspec

from memory_ledger.commands.canonical.reconcile import subject_predicate_key
from memory_ledger.commands.recall.index import MemoryDoc
from memory_ledger.commands.session.recall import SessionRecall

__all__ = ["KnownValue", "SessionVocabulary"]

KNOWN_LIMIT = 50


class KnownValue(msgspec.Struct, frozen=True, kw_only=True):
    """A (subject, predicate, value) memory can currently assert, and where it comes from."""

    subject: str
    predicate: str
    value: str | None
    statement: str
    origin: Literal["canonical", "session"]


class SessionVocabulary:
    """The vocabulary of a session's memory (session facts first, then canonical ones).

    :param recall: the session's recall concern (its overlay and canonical documents).
    """

    def __init__(self, recall: SessionRecall) -> None:
        self.recall = recall
        self.stream = recall.stream

    def known_predicates(self) -> list[str]:
        """Predicate names this user's memory already uses: session facts first (a correction
        usually chases something said minutes ago), then canonical ones by frequency;
        at most 50."""
        names: dict[str, None] = {}
        for doc in self.recall.overlay().docs:
            if doc.predicate:
                names.setdefault(doc.predicate)
        for term, _ in self.stream.engine.vocabulary(self.stream.namespace, "predicate"):
            names.setdefault(term)
        return list(names)[:KNOWN_LIMIT]

    def known_values(self) -> list[KnownValue]:
        """The (subject, predicate, value) facts memory can currently assert; session facts
        shadow canonical ones for the same subject and predicate."""
        values: dict[tuple[str, str], KnownValue] = {}
        overlay = self.recall.overlay()
        for doc in overlay.docs:
            key = subject_predicate_key(doc.subject, doc.predicate)
            if key is not None and key not in values:
                values[key] = self._known(doc)
        for doc in self.recall.canonical_docs():
            key = subject_predicate_key(doc.subject, doc.predicate)
            if key is not None and key not in values and overlay.visible(doc):
                values[key] = self._known(doc)
        return list(values.values())

    @staticmethod
    def _known(doc: MemoryDoc) -> KnownValue:
        return KnownValue(
            subject=doc.subject or "",
            predicate=doc.predicate or "",
            value=doc.value,
            statement=doc.statement,
            origin=doc.origin,
        )

    def known_statements(self) -> list[str]:
        """Every statement currently retrievable, provisional (session) and canonical."""
        overlay = self.recall.overlay()
        statements = [d.statement for d in overlay.docs]
        statements += [d.statement for d in self.recall.canonical_docs() if overlay.visible(d)]
        return list(dict.fromkeys(statements))
