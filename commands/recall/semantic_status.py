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
    namespace has a vector for its current text: a command's memories are embedded before
    it returns), ``partial`` (:attr:`pending` memories lack one and are found lexically
    only), ``degraded`` (the query could not be embedded or its vectors were rejected:
    lexical only; ``reason`` is the :class:`~commands.embeddings.base.EmbeddingError` reason
    code). A ``partial`` status says why in ``reason``: the reason code of the last failed
    embedding call (``provider_failed``, ``provider_timeout`` when a command's call overran
    its deadline, or a rejected answer's code), or ``indexing`` when nothing failed and the
    indexer has not reached them yet (another process's writes, a new model, source turns).
    The write of a pending memory stands; the indexer fills its vector. ``retrievable`` /
    ``embedded`` count the namespace's retrievable memories and those served a vector (a
    revision that kept its text keeps its vector). ``query_embedding_ms`` is the time spent
    embedding the query (milliseconds).
    """

    state: SemanticState
    model: str | None = None
    retrievable: int = 0
    embedded: int = 0
    reason: str | None = None
    query_embedding_ms: float | None = None

    @property
    def pending(self) -> int:
        """Retrievable memories still without a vector (``retrievable - embedded``)."""
        return max(0, self.retrievable - self.embedded)

    @property
    def coverage(self) -> float:
        """``embedded / retrievable`` (1.0 for an empty namespace)."""
        return self.embedded / self.retrievable if self.retrievable else 1.0


OFF = SemanticStatus(state="off")
"""No semantic channel is attached: lexical recall only."""
