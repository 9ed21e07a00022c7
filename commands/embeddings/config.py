"""The embedding provider a configuration asks for (``[memory] embeddings = ...``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from memory_ledger.commands.config import MemoryConfig

if TYPE_CHECKING:  # numpy is imported with a provider, not with the engine
    from memory_ledger.commands.embeddings.base import EmbeddingProvider

__all__ = ["provider_from_config"]


def provider_from_config(config: MemoryConfig) -> EmbeddingProvider | None:
    """None for ``embeddings = "none"`` (lexical recall only); the bundled MiniLM for
    ``"local"``; the bundled multilingual e5 without PyTorch for ``"lite"``
    (:class:`~commands.embeddings.lite.E5LiteProvider`); an
    :class:`~commands.embeddings.openai.OpenAIEmbeddingProvider` for ``"openai"``, its key
    read from the environment variable ``embeddings_api_key_env`` (none when unset: a local
    server may need no key).

    :raises commands.embeddings.local.EmbeddingsNotInstalledError: ``"local"`` without the
        ``embeddings`` extra installed.
    :raises commands.embeddings.lite.EmbeddingsLiteNotInstalledError: ``"lite"`` without
        the ``embeddings-lite`` extra installed.
    :raises commands.embeddings.base.EmbeddingError: the local model cannot be loaded.
    :raises ValueError: the endpoint settings are invalid (the message names them).
    """
    if config.embeddings == "local":
        from memory_ledger.commands.embeddings.local import SentenceTransformerProvider

        return SentenceTransformerProvider()
    if config.embeddings == "lite":
        from memory_ledger.commands.embeddings.lite import E5LiteProvider

        return E5LiteProvider()
    if config.embeddings == "openai":
        from memory_ledger.commands.embeddings.openai import OpenAIEmbeddingProvider

        return OpenAIEmbeddingProvider(
            config.embeddings_base_url,
            config.embeddings_model,
            config.embeddings_dimension,
            os.environ.get(config.embeddings_api_key_env) or None,
        )
    return None
