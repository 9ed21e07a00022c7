"""The semantic channel's report on one recall (kept apart so recall results can carry it
without importing the channel)."""

from __future__ import annotations

from typing import Literal

import msgspec

__all__ = ["OFF", "SemanticState", "SemanticStatus"]

SemanticState = Literal["off", "ready", "partial", "degraded"]


class SemanticStatus(msgspec.Struct, frozen=True, kw_only=True):
    """How the semantic channel took part in one recall.

    ``state``: ``off`` (no provider configured), ``ready`` (every retrievable memory of the
    namespace has a vector), ``partial`` (some still lack one; they are found lexically
    only), ``degraded`` (the query could not be embedded or its vectors were rejected:
    lexical only; ``reason`` is the :class:`~commands.embeddings.base.EmbeddingError` reason
    code; a ``partial`` status also carries the reason of the indexer's last failed batch,
    if any). ``retrievable``/``embedded`` count the namespace's retrievable memories and
    those with a vector row for their current revision (a revision that kept its text keeps
    serving its earlier vector meanwhile). ``query_embedding_ms`` is the time spent
    embedding the query (milliseconds).
    """

    state: SemanticState
    model: str | None = None
    retrievable: int = 0
    embedded: int = 0
    reason: str | None = None
    query_embedding_ms: float | None = None

    @property
    def coverage(self) -> float:
        """``embedded / retrievable`` (1.0 for an empty namespace)."""
        return self.embedded / self.retrievable if self.retrievable else 1.0


OFF = SemanticStatus(state="off")
"""No semantic channel is attached: lexical recall only."""
