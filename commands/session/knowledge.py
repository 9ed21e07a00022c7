"""The session's exact knowledge binding: recorded at start, required on resume, exclusive.

A host binds a session with ``engine.session(..., knowledge=BoundKnowledge(binding,
provider))`` (seed 002, "Exact Cognitive Packages"):

* the binding is recorded as KnowledgeBound in the same transaction as SessionOpened; a
  session that started unbound cannot be bound later (``binding_not_recorded``), and a bound
  session resumes only with the same binding (``binding_missing``, ``binding_mismatch``);
* a bound session suppresses memory recall, session and canonical: ``recall``,
  ``recall_scoped``, ``recall_similar``, ``memory_recent``, ``recall_by_tags`` and
  ``memory_map`` raise ``recall_suppressed``, and ``prepare`` freezes an empty snapshot;
  extraction, explicit commands and reconciliation (the write side) work as in any session;
* :meth:`SessionKnowledge.assemble_context` accepts no other provider in a bound session
  (``provider_refused``); its context is the package's validated documents or an error,
  never a fallback. Unbound, it assembles memory, the workspace (when attached) and the
  host's providers. What entered context is recorded (KnowledgeServed).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Literal

from memory_ledger.commands.context.assembler import (
    BALANCED,
    AssembledContext,
    AssemblyPolicy,
    ContextAssembler,
    ContextProvider,
    ContextQuery,
    assemble_items,
)
from memory_ledger.commands.context.knowledge_binding import KnowledgeBindingError
from memory_ledger.commands.context.knowledge_context import BoundKnowledge
from memory_ledger.commands.recall.index import RecallResult
from memory_ledger.commands.session.memory_provider import SessionMemoryProvider
from memory_ledger.commands.session.stream import check_turn_id
from memory_ledger.commands.session.turns import PreparedMemorySnapshot, SessionTurns
from memory_ledger.commands.session.workspace import SessionWorkspace
from memory_ledger.ledger.events import KnowledgeBound, KnowledgeServed, LedgerEvent

__all__ = ["SessionKnowledge"]

_preparing = threading.local()
"""The bound session whose ``prepare`` runs in this thread (its live search finds nothing;
explicit commands that find their target by words still search)."""


class SessionKnowledge:
    """Knowledge binding rules of a session (see the module docstring). It is the recall
    gate of its session's recall concern (:class:`~commands.session.recall.RecallGate`).

    :param turns: the session's turns concern (``prepare`` of a bound session runs it with
        live search silenced).
    :param workspace: the session's workspace concern (an unbound context includes it).
    :param knowledge: the binding and its provider, or None.
    """

    def __init__(
        self,
        turns: SessionTurns,
        workspace: SessionWorkspace,
        knowledge: BoundKnowledge | None,
    ) -> None:
        self.turns = turns
        self.workspace = workspace
        self.stream = turns.stream
        self.knowledge = knowledge
        turns.recall.gate = self

    @property
    def session_id(self) -> str:
        """The session's id (what :class:`SessionMemoryProvider` names)."""
        return self.stream.session_id

    def recall(
        self, query: str, turn_id: int | None = None, k: int | None = None, *, record: bool = True
    ) -> RecallResult:
        """The session's ``recall`` (what :class:`SessionMemoryProvider` queries)."""
        return self.turns.recall.recall(query, turn_id, k, record=record)

    def check_binding_on_open(self) -> None:
        """Refuse a resume without, or with another, binding than the one recorded, and a
        binding for a session that started without one. Call after ``refresh``."""
        recorded = self.stream.state.knowledge
        given = self.knowledge
        if recorded is None:
            if given is not None and self.stream.state.opened is not None:
                msg = (
                    f"session {self.stream.session_id!r} started without a knowledge binding; "
                    "a binding is recorded only when a session starts"
                )
                raise KnowledgeBindingError("binding_not_recorded", msg)
            return
        if given is None:
            msg = (
                f"session {self.stream.session_id!r} is bound to {recorded.package_id}@"
                f"{recorded.version}#{recorded.generation}; resume it with that binding"
            )
            raise KnowledgeBindingError("binding_missing", msg)
        if given.binding.binding_id() != recorded.binding_id:
            msg = (
                f"session {self.stream.session_id!r} is bound to {recorded.package_id}@"
                f"{recorded.version}#{recorded.generation}, not {given.binding.label()}"
            )
            raise KnowledgeBindingError("binding_mismatch", msg)

    def opened_events(self) -> list[LedgerEvent]:
        """The session stream's first events (SessionOpened), with KnowledgeBound when the
        session is bound."""
        events = self.stream.opened_events()
        if events and self.knowledge is not None:
            binding = self.knowledge.binding
            events.append(
                KnowledgeBound(
                    **self.stream.envelope(),
                    binding_id=binding.binding_id(),
                    package_id=binding.package_id,
                    version=binding.version,
                    generation=binding.generation,
                    generation_digest=binding.generation_digest,
                    capability_digest=binding.capability_digest,
                    max_documents=binding.limits.max_documents,
                    max_document_bytes=binding.limits.max_document_bytes,
                    max_total_bytes=binding.limits.max_total_bytes,
                )
            )
        return events

    # Recall suppression -------------------------------------------------------------------

    def suppressed(self, what: str) -> None:
        """Memory recall, the memory map and a bound ``prepare``'s memory are suppressed
        while the session is bound (``recall_suppressed``)."""
        if self.knowledge is not None:
            msg = f"{what} is suppressed: the session is bound to {self.knowledge.binding.label()}"
            raise KnowledgeBindingError("recall_suppressed", msg)

    def live_silenced(self) -> bool:
        """Whether this bound session's ``prepare`` runs in this thread (its live search finds
        nothing)."""
        return getattr(_preparing, "session", None) is self  # a bound prepare(): no memory

    def prepare(self, turn_id: int, transcript: str) -> PreparedMemorySnapshot:
        """As :meth:`SessionTurns.prepare`; a bound session freezes an empty snapshot
        (memory recall is suppressed, the turn protocol goes on)."""
        if self.knowledge is None:
            return self.turns.prepare(turn_id, transcript)
        _preparing.session = self
        try:
            return self.turns.prepare(turn_id, transcript)
        finally:
            _preparing.session = None

    # Context ------------------------------------------------------------------------------

    def assemble_context(
        self,
        turn_id: int,
        query: str,
        providers: Sequence[ContextProvider] = (),
        *,
        policy: AssemblyPolicy = BALANCED,
        memory: bool = True,
        memory_failure: Literal["fail_open", "fail_closed"] = "fail_open",
    ) -> AssembledContext:
        """The turn's context.

        Bound: the package's validated documents only (``providers`` must be empty), and
        KnowledgeServed records the documents selected. Unbound: memory recall (unless
        ``memory`` is False), the workspace (when attached) and ``providers``, through
        :class:`~commands.context.assembler.ContextAssembler`.

        :raises KnowledgeBindingError: bound and ``providers`` given (``provider_refused``),
            or the package request failed (fail closed; nothing else is consulted).
        :raises ContextProviderError: a fail-closed provider failed (unbound).
        """
        self.stream.check_open()
        check_turn_id(turn_id)
        if self.knowledge is None:
            return self._assemble_unbound(turn_id, query, providers, policy, memory, memory_failure)
        if providers:
            names = ", ".join(repr(getattr(p, "name", "?")) for p in providers)
            label = self.knowledge.binding.label()
            msg = f"a session bound to {label} accepts no other provider ({names})"
            raise KnowledgeBindingError("provider_refused", msg)
        answer = self.knowledge.fetch(self.stream.session_id, turn_id, query)
        items = self.knowledge.context_items(answer)
        assembled = assemble_items(items, policy, token_counter=self.stream.token_counter)
        chosen = {item.item_id for item in assembled.items}
        served = [d for d in answer.documents if f"knowledge:{d.citation.label()}" in chosen]
        self.stream.buffer_read(
            KnowledgeServed(
                **self.stream.read_envelope("knowledge"),
                turn_id=turn_id,
                binding_id=self.knowledge.binding.binding_id(),
                request_id=answer.request.request_id,
                citations=tuple(d.citation.label() for d in served),
                digests=tuple(d.citation.digest for d in served),
                total_bytes=sum(len(d.title.encode()) + len(d.markdown.encode()) for d in served),
            )
        )
        return assembled

    def _assemble_unbound(
        self,
        turn_id: int,
        query: str,
        providers: Sequence[ContextProvider],
        policy: AssemblyPolicy,
        memory: bool,
        memory_failure: Literal["fail_open", "fail_closed"],
    ) -> AssembledContext:
        own: list[ContextProvider] = []
        if memory:
            own.append(SessionMemoryProvider(self, failure_mode=memory_failure))
        if self.workspace.workspace is not None:
            own.append(self.workspace.workspace_provider())
        assembler = ContextAssembler(
            [*own, *providers], policy, token_counter=self.stream.token_counter
        )
        return assembler.assemble(
            ContextQuery(session_id=self.stream.session_id, turn_id=turn_id, query=query)
        )
