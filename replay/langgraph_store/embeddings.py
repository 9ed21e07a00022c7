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
from memory_ledger.replay.langgraph_store.configs import INVALID_INDEX
from memory_ledger.replay.langgraph_store.records import indexed_text

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
        """Document vectors: ``embed_documents`` of each statement's indexed text (its
        revision digest taken off, :func:`indexed_text`), as LangGraph's stores embed the
        text at ``IndexConfig.fields`` and nothing else. An item with no indexed text is
        not handed to the function (LangGraph embeds nothing for it); it gets a fixed unit
        vector, and search gives it no score (``LedgerStore`` leaves it unranked)."""
        wanted = [indexed_text(text) for text in texts]
        given = [text for text in wanted if text]
        vectors = iter(self.embeddings.embed_documents(given) if given else [])
        blank = [1.0] + [0.0] * (self._descriptor.dimension - 1)
        return [next(vectors) if text else blank for text in wanted]

    def embed_queries(self, texts: Sequence[str]) -> Any:
        """Query vectors: ``embed_query`` of each."""
        return [self.embeddings.embed_query(text) for text in texts]


def provider_for(index: IndexConfig) -> LangGraphEmbeddingProvider:
    """The provider of ``index["embed"]`` with ``index["dims"]``.

    :raises InvalidArgumentError: ``dims`` is missing or not a positive integer
        (``missing_dims``); ``embed`` is a ``provider:model`` string LangGraph cannot load
        (langchain missing, an unknown provider: ``invalid_index_config``).
    """
    from langgraph.store.base import ensure_embeddings

    dims = index.get("dims")
    if not isinstance(dims, int) or isinstance(dims, bool) or dims < 1:
        msg = "index needs dims (a positive integer) with embed"
        raise InvalidArgumentError(msg, parameter="index", reason_code="missing_dims")
    embed = index.get("embed")
    name = embed if isinstance(embed, str) else getattr(embed, "__name__", type(embed).__name__)
    try:
        embeddings = ensure_embeddings(embed)
    except (ValueError, ImportError) as e:  # a provider string langchain cannot load
        msg = f"index embed cannot be loaded: {e}"
        raise InvalidArgumentError(msg, parameter="index", reason_code=INVALID_INDEX) from None
    return LangGraphEmbeddingProvider(embeddings, dims, str(name))
