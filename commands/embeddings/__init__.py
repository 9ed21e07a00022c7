"""The embeddings wing: an abstract provider, then one module per provider.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.embeddings.base import EmbeddingDescriptor, EmbeddingProvider
    from memory_ledger.commands.embeddings.config import provider_from_config
    from memory_ledger.commands.embeddings.lite import E5LiteProvider
    from memory_ledger.commands.embeddings.local import SentenceTransformerProvider
    from memory_ledger.commands.embeddings.openai import OpenAIEmbeddingProvider

__all__ = [
    "E5LiteProvider",
    "EmbeddingDescriptor",
    "EmbeddingProvider",
    "OpenAIEmbeddingProvider",
    "SentenceTransformerProvider",
    "provider_from_config",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "E5LiteProvider": "memory_ledger.commands.embeddings.lite",
        "EmbeddingDescriptor": "memory_ledger.commands.embeddings.base",
        "EmbeddingProvider": "memory_ledger.commands.embeddings.base",
        "OpenAIEmbeddingProvider": "memory_ledger.commands.embeddings.openai",
        "SentenceTransformerProvider": "memory_ledger.commands.embeddings.local",
        "provider_from_config": "memory_ledger.commands.embeddings.config",
    },
)
