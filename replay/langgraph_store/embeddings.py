"""LangGraph embeddings as the engine's embedding provider (the semantic channel).

``IndexConfig["embed"]`` (a LangChain ``Embeddings``, or a function of texts) becomes an
:class:`~memory_ledger.commands.embeddings.EmbeddingProvider`: the engine embeds each
item's statement (its indexed text) with it, and fuses cosine with BM25.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memory_ledger.commands.embeddings import EmbeddingDescriptor
from memory_ledger.commands.errors import InvalidArgumentError

if TYPE_CHECKING:
    from langgraph.store.base import IndexConfig

__all__ = ["LangGraphEmbeddingProvider", "provider_for"]


class LangGraphEmbeddingProvider:
    """An engine embedding provider over LangGraph ``Embeddings`` of ``dims`` dimensions."""

    def __init__(self, embeddings: Any, dims: int, model_id: str) -> None:
        self.embeddings = embeddings
        self._descriptor = EmbeddingDescriptor(
            provider="langgraph", model_id=model_id, dimension=dims, normalized=False
        )

    @property
    def descriptor(self) -> EmbeddingDescriptor:
        """The model identity (``langgraph``, the embed's name) and dimension."""
        return self._descriptor

    def embed(self, texts: Sequence[str]) -> Any:
        """Document vectors: ``embed_documents``."""
        return self.embeddings.embed_documents(list(texts))

    def embed_queries(self, texts: Sequence[str]) -> Any:
        """Query vectors: ``embed_query`` of each."""
        return [self.embeddings.embed_query(text) for text in texts]


def provider_for(index: IndexConfig) -> LangGraphEmbeddingProvider:
    """The provider of ``index["embed"]`` with ``index["dims"]``.

    :raises InvalidArgumentError: ``dims`` is missing or not a positive integer.
    """
    from langgraph.store.base import ensure_embeddings

    dims = index.get("dims")
    if not isinstance(dims, int) or isinstance(dims, bool) or dims < 1:
        msg = "index needs dims (a positive integer) with embed"
        raise InvalidArgumentError(msg, parameter="index", reason_code="missing_dims")
    embed = index.get("embed")
    name = embed if isinstance(embed, str) else getattr(embed, "__name__", type(embed).__name__)
    return LangGraphEmbeddingProvider(ensure_embeddings(embed), dims, str(name))
