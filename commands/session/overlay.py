"""Session facts: what this session has said but not yet reconciled (the overlay).

Candidates extracted in this session and its explicit commands take effect in the
conversation at once (seed 004: "explicit intent takes effect in the conversation
immediately and commits durably afterwards"), and shadow canonical memory:

- a provisional fact is searchable as a ``session`` memory (its would-be memory id);
- a canonical memory with the same (subject, predicate) as a session fact is hidden (the
  newer value answers);
- the target of ``forget`` or ``correct`` is hidden; a forgotten session fact is removed.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from memory_ledger.commands.canonical.reconcile import subject_predicate_key
from memory_ledger.commands.recall.index import MemoryDoc
from memory_ledger.commands.session.state import SessionState
from memory_ledger.ledger.digests import UNKEYED, IdDigests
from memory_ledger.ledger.events import CandidateExtracted, ExplicitCommandApplied, ExtractedItem
from memory_ledger.ledger.ids import Namespace, normalize_statement

__all__ = ["Overlay", "build_overlay"]


class Overlay(msgspec.Struct, frozen=True, kw_only=True):
    """Provisional session facts and what they hide."""

    docs: tuple[MemoryDoc, ...]
    hidden: frozenset[str]
    shadowed_keys: frozenset[tuple[str, str]]

    def visible(self, doc: MemoryDoc) -> bool:
        """Whether a canonical ``doc`` is still visible under this overlay."""
        if doc.memory_id in self.hidden:
            return False
        key = subject_predicate_key(doc.subject, doc.predicate)
        return key is None or key not in self.shadowed_keys


def _doc(
    digests: IdDigests, namespace: Namespace, item: ExtractedItem, position: int, occurred: object
) -> MemoryDoc:
    mid = digests.memory_id(namespace, normalize_statement(item.statement))
    return MemoryDoc(
        memory_id=str(mid),
        position=position,
        statement=item.statement,
        subject=item.subject,
        predicate=item.predicate,
        value=item.value,
        scope=item.scope,
        tags=item.tags,
        evidence=item.evidence,
        occurred_at=occurred,  # type: ignore[arg-type]
        origin="session",
        revision=None,
        importance=item.importance,
    )


def build_overlay(
    namespace: Namespace, state: SessionState, digests: IdDigests = UNKEYED
) -> Overlay:
    """The overlay of a session that is not reconciled yet (empty once it is)."""
    if state.report is not None:
        return Overlay(docs=(), hidden=frozenset(), shadowed_keys=frozenset())
    entries: Sequence[CandidateExtracted | ExplicitCommandApplied] = sorted(
        [*state.candidates, *state.commands], key=lambda e: e.originator_version
    )
    facts: dict[str, MemoryDoc] = {}
    hidden: set[str] = set()
    for entry in entries:
        if isinstance(entry, CandidateExtracted):
            doc = _doc(digests, namespace, entry.item, -entry.originator_version, entry.occurred_at)
            facts[doc.memory_id] = doc
            continue
        target = str(entry.target) if entry.target is not None else None
        if entry.intent in ("forget", "correct") and target is not None:
            hidden.add(target)
            facts.pop(target, None)
        if entry.intent in ("remember", "correct") and entry.item is not None:
            doc = _doc(digests, namespace, entry.item, -entry.originator_version, None)
            facts[doc.memory_id] = doc
            hidden.discard(doc.memory_id)
    # Newest facts first (position is the negated session version).
    docs = tuple(sorted(facts.values(), key=lambda d: d.position))
    keys = {subject_predicate_key(d.subject, d.predicate) for d in docs}
    return Overlay(
        docs=docs,
        hidden=frozenset(hidden),
        shadowed_keys=frozenset(k for k in keys if k is not None),
    )
