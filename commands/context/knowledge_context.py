"""A session's bound knowledge: the binding, its provider, and the context it may produce.

:class:`BoundKnowledge` is what a host hands ``engine.session(..., knowledge=...)``: the
exact :class:`~commands.context.knowledge_binding.KnowledgeBinding` and a provider holding that
generation (checked on construction and again before every request). ``fetch`` sends one
typed request and returns the validated documents; :meth:`BoundKnowledge.context_items`
turns them into context items (kind ``knowledge``, each citing its document). Every failure
raises :class:`~commands.context.knowledge_binding.KnowledgeBindingError`: a bound turn gets the
package's content or nothing, never a fallback to other retrieval.
"""

from __future__ import annotations

import uuid

import msgspec

from memory_ledger.commands.context.assembler import ContextItem
from memory_ledger.commands.context.knowledge_binding import (
    KnowledgeBinding,
    KnowledgeBindingError,
    KnowledgeDocument,
    KnowledgeProvider,
    KnowledgeRequest,
    check_binding,
    validate_response,
)

__all__ = ["KNOWLEDGE_SOURCE", "BoundKnowledge", "KnowledgeAnswer"]

KNOWLEDGE_SOURCE = "knowledge"
"""The ``source`` of knowledge context items."""

_REQUEST_NAMESPACE = uuid.UUID("6f0c5a4e-2d7b-5c1e-9b1a-5e3c7d2f4a10")


class KnowledgeAnswer(msgspec.Struct, frozen=True, kw_only=True):
    """A validated answer: the request it answers and its documents (at most the binding's
    limits)."""

    request: KnowledgeRequest
    documents: tuple[KnowledgeDocument, ...]

    @property
    def total_bytes(self) -> int:
        """UTF-8 bytes of every document's title and Markdown."""
        return sum(len(d.title.encode()) + len(d.markdown.encode()) for d in self.documents)


class BoundKnowledge:
    """One exact package generation bound to a session, with the provider that holds it.

    :raises KnowledgeBindingError: ``invalid_binding`` (not a binding), or
        ``binding_mismatch`` / ``generation_drift`` when the provider serves another
        binding than ``binding``.
    """

    def __init__(self, binding: KnowledgeBinding, provider: KnowledgeProvider) -> None:
        if not isinstance(binding, KnowledgeBinding):
            raise KnowledgeBindingError("invalid_binding", "binding must be a KnowledgeBinding")
        self.binding = binding
        self.provider = provider
        self._check_provider()

    def _check_provider(self) -> None:
        try:
            served = self.provider.binding
        except Exception as e:
            msg = f"the knowledge provider cannot name its binding ({type(e).__name__})"
            raise KnowledgeBindingError("provider_failed", msg) from e
        try:
            check_binding(self.binding, served, "the provider")
        except KnowledgeBindingError as e:
            if e.reason_code == "generation_drift":
                raise
            msg = f"the provider serves another package than {self.binding.label()}"
            raise KnowledgeBindingError("binding_mismatch", msg) from None

    def request(self, session_id: str, turn_id: int, query: str) -> KnowledgeRequest:
        """The typed request of one turn; its id is derived from the binding, session, turn
        and query (a retry asks the same request)."""
        key = f"{self.binding.binding_id()}\n{session_id}\n{turn_id}\n{query}"
        return KnowledgeRequest(
            binding=self.binding,
            request_id=str(uuid.uuid5(_REQUEST_NAMESPACE, key)),
            session_id=session_id,
            turn_id=turn_id,
            query=query,
        )

    def fetch(self, session_id: str, turn_id: int, query: str) -> KnowledgeAnswer:
        """Ask the provider for a turn's documents and validate the answer.

        :raises KnowledgeBindingError: the provider changed its binding (generation drift),
            raised (``provider_failed``), or answered outside the contract.
        """
        self._check_provider()
        request = self.request(session_id, turn_id, query)
        try:
            raw = self.provider.fetch(request)
        except KnowledgeBindingError:
            raise
        except Exception as e:
            msg = f"knowledge provider for {self.binding.label()} failed ({type(e).__name__})"
            raise KnowledgeBindingError("provider_failed", msg) from e
        return KnowledgeAnswer(
            request=request, documents=validate_response(self.binding, request, raw)
        )

    def context_items(self, answer: KnowledgeAnswer) -> list[ContextItem]:
        """One ``knowledge`` item per document, best first (relevance falls by rank), its
        text headed by the citation."""
        count = len(answer.documents)
        return [
            ContextItem(
                item_id=f"knowledge:{doc.citation.label()}",
                source=KNOWLEDGE_SOURCE,
                kind="knowledge",
                text=f"[{doc.citation.label()}] {doc.title}\n{doc.markdown}",
                relevance=(count - rank) / count,
                metadata={"citation": doc.citation.label(), "digest": doc.citation.digest},
            )
            for rank, doc in enumerate(answer.documents)
        ]
