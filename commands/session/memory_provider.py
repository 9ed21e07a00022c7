"""Memory as a context provider: a session's recall, as items for the context assembler."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal, Protocol

from memory_ledger.commands.context.assembler import ContextItem, ContextQuery
from memory_ledger.commands.context.knowledge_binding import KnowledgeBindingError

if TYPE_CHECKING:
    from memory_ledger.commands.context.knowledge_context import BoundKnowledge
    from memory_ledger.commands.recall.index import RecallResult

__all__ = ["RecallingSession", "SessionMemoryProvider"]


class RecallingSession(Protocol):
    """What :class:`SessionMemoryProvider` needs of a session (``MemorySession`` has it):
    its id, its knowledge binding, and ``recall``. A local Protocol, so the provider (used by
    the session's knowledge concern) does not import the session it serves."""

    @property
    def session_id(self) -> str: ...

    @property
    def knowledge(self) -> BoundKnowledge | None: ...

    def recall(
        self, query: str, turn_id: int | None = None, k: int | None = None, *, record: bool = True
    ) -> RecallResult: ...


class SessionMemoryProvider:
    """Queries a session's ``recall`` for a turn and returns its hits as context items.

    Relevance is the hit's score divided by the best score of the answer (so in [0, 1]);
    canonical items carry ``memory_id`` and ``revision`` so the session can ``admit`` the
    selected ones. Fail-open by default: a failing memory lookup never blocks a turn.

    :raises KnowledgeBindingError: ``provider_refused`` for a session bound to a knowledge
        package (its memory recall is suppressed).
    """

    def __init__(
        self,
        session: RecallingSession,
        *,
        k: int = 6,
        name: str = "memory",
        failure_mode: Literal["fail_open", "fail_closed"] = "fail_open",
    ) -> None:
        if session.knowledge is not None:
            msg = (
                f"session {session.session_id!r} is bound to {session.knowledge.binding.label()}: "
                "memory recall is suppressed and no other provider is accepted"
            )
            raise KnowledgeBindingError("provider_refused", msg)
        self.session = session
        self.k = k
        self._name = name
        self.failure_mode: Literal["fail_open", "fail_closed"] = failure_mode

    @property
    def name(self) -> str:
        return self._name

    def query(self, q: ContextQuery) -> Sequence[ContextItem]:
        result = self.session.recall(q.query, q.turn_id, self.k)
        best = max((h.score for h in result.results), default=0.0)
        return [
            ContextItem(
                item_id=f"memory:{hit.memory_id}",
                source=self._name,
                kind="memory",
                text=hit.statement,
                relevance=min(1.0, hit.score / best) if best > 0 else 0.0,
                memory_id=hit.memory_id,
                revision=hit.revision,
            )
            for hit in result.results
        ]
