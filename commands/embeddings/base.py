"""The semantic channel's contract: an :class:`EmbeddingProvider` and its validation.

A provider turns texts into vectors. Its :class:`EmbeddingDescriptor` locks the model's
identity, the vector dimension and whether vectors come unit-normalized; vectors stored in
the ``memory_vectors`` read model are keyed by :meth:`EmbeddingDescriptor.model_key`, so a
different model (or a model that changed its dimension) never mixes with stored vectors.

Every response goes through :func:`embed_checked` (after A3S Code's provider rules, seed
002: "partial, duplicate, unknown, dimension-mismatched, non-finite, non-normalized, or
descriptor-drifted responses" are rejected): a response with the wrong number of vectors,
a wrong dimension, a non-finite value, a zero vector, a non-unit vector from a provider
that declared unit vectors, or a descriptor that changed since the provider was attached
raises :class:`EmbeddingError` with a ``reason_code``. Recall then drops the semantic
channel for that query (reported as degraded) and answers from the lexical channel alone.

Errors never carry the input texts, the vectors or a provider's credentials.

Shipped providers:
:class:`memory_ledger.commands.embeddings.local.SentenceTransformerProvider` (CPU,
offline, extra ``memory-ledger[embeddings]``) and
:class:`memory_ledger.commands.embeddings.openai.OpenAIEmbeddingProvider`
(``POST {base_url}/embeddings``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec
import numpy as np
import numpy.typing as npt

from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.ledger.errors import InvalidArgumentError, InvalidArgumentTypeError

__all__ = [
    "DEFAULT_MAX_BATCH",
    "NORM_TOLERANCE",
    "EmbeddingDescriptor",
    "EmbeddingError",
    "EmbeddingProvider",
    "EmbeddingReason",
    "content_digest",
    "embed_checked",
    "embedding_text",
    "max_batch_size",
    "validate_vectors",
]

DEFAULT_MAX_BATCH = 2048
"""Texts per provider call when a provider does not say (``max_batch_size``)."""

NORM_TOLERANCE = 1e-3
"""How far a declared unit vector's L2 norm may be from 1.0 (float32 rounding and
half-precision models stay well inside it)."""

EmbeddingReason = Literal[
    "count_mismatch",
    "dimension_mismatch",
    "non_finite",
    "zero_vector",
    "not_normalized",
    "descriptor_drift",
    "malformed",
    "provider_failed",
    "provider_timeout",
]


class EmbeddingError(MemoryLedgerError, ValueError):
    """A provider's response was rejected, or the provider failed. ``reason_code``:

    * ``count_mismatch``: not exactly one vector per input text (partial or extra);
    * ``dimension_mismatch``: a vector's length differs from the descriptor's dimension;
    * ``non_finite``: a NaN or infinite component;
    * ``zero_vector``: a vector of norm 0 (it has no direction; cosine is undefined);
    * ``not_normalized``: the descriptor declares unit vectors, a norm is off by more than
      :data:`NORM_TOLERANCE`;
    * ``descriptor_drift``: the provider's descriptor changed after it was attached;
    * ``malformed``: the response is not a list of numeric vectors (or its ids are
      duplicated or unknown);
    * ``provider_failed``: the provider raised (transport, timeout, model error);
    * ``provider_timeout``: a command's embedding call overran the channel's
      ``vector_timeout`` (the command returned; its memories' vectors are pending).
    """

    reason_code: EmbeddingReason

    def __init__(self, reason_code: EmbeddingReason, message: str) -> None:
        super().__init__(message, reason_code=reason_code)


class EmbeddingDescriptor(msgspec.Struct, frozen=True, kw_only=True):
    """What a provider promises: ``provider`` (kind, e.g. ``sentence-transformers``),
    ``model_id`` (the exact model, with a revision or weights digest where known),
    ``dimension`` (vector length, > 0) and ``normalized`` (vectors come with L2 norm 1).

    :raises InvalidArgumentError: (a ``ValueError``) dimension is not positive or an id is
        empty; ``parameter`` names the field.
    """

    provider: str
    model_id: str
    dimension: int
    normalized: bool = True

    def __post_init__(self) -> None:
        if not isinstance(self.provider, str) or not isinstance(self.model_id, str):
            msg = "an embedding descriptor's provider and model_id must be strings"
            raise InvalidArgumentTypeError(msg, parameter="model_id")
        if not isinstance(self.dimension, int) or isinstance(self.dimension, bool):
            msg = f"embedding dimension must be an integer, got {self.dimension!r}"
            raise InvalidArgumentTypeError(msg, parameter="dimension")
        if not isinstance(self.normalized, bool):
            msg = f"normalized must be a boolean, got {self.normalized!r}"
            raise InvalidArgumentTypeError(msg, parameter="normalized")
        if not self.provider.strip() or not self.model_id.strip():
            msg = "an embedding descriptor needs a provider and a model_id"
            raise InvalidArgumentError(msg, parameter="model_id")
        if self.dimension <= 0:
            msg = f"embedding dimension must be positive, got {self.dimension}"
            raise InvalidArgumentError(msg, parameter="dimension")

    def model_key(self) -> str:
        """The key vectors are stored under: ``provider/model_id/dimension/n|r``."""
        norm = "n" if self.normalized else "r"
        return f"{self.provider}/{self.model_id}/{self.dimension}/{norm}"


@runtime_checkable
class EmbeddingProvider(Protocol):
    """Turns texts into vectors. Implementations must be thread-safe: the engine calls
    :meth:`embed` from its indexer thread and from recall threads, possibly at the same time
    (the shipped providers are: the local one serializes calls on its model, the HTTP one
    shares a thread-safe ``httpx.Client``).

    ``embed(texts)`` returns one vector per text, in order: a 2-D array-like of shape
    ``(len(texts), descriptor.dimension)``. It may raise any exception; the engine turns it
    into :class:`EmbeddingError` (``provider_failed``). A provider may also offer
    ``embed_queries(texts)`` (same shape): recall queries then go through it (E5 models
    embed queries and passages with different prefixes). An optional ``max_batch_size``
    attribute (a positive int) caps the texts of one call (:func:`max_batch_size`).
    """

    @property
    def descriptor(self) -> EmbeddingDescriptor:
        """The model identity, dimension and normalization this provider promises."""
        ...

    def embed(self, texts: Sequence[str]) -> Any:
        """Vectors for ``texts``: shape ``(len(texts), dimension)``."""
        ...


def validate_vectors(
    descriptor: EmbeddingDescriptor, count: int, raw: Any
) -> npt.NDArray[np.float32]:
    """Check ``raw`` against ``descriptor`` for ``count`` inputs; return float32 unit rows.

    Vectors of a provider that does not declare normalization are L2-normalized here (so
    a dot product is the cosine); declared unit vectors must already be within
    :data:`NORM_TOLERANCE` of norm 1.

    :returns: array of shape ``(count, descriptor.dimension)``, dtype float32, C-contiguous.
    :raises EmbeddingError: see the reason codes of :class:`EmbeddingError`.
    """
    if isinstance(raw, np.ndarray):
        array = raw
    else:
        try:
            rows = list(raw)
        except TypeError as e:
            raise EmbeddingError("malformed", "embedding response is not a list") from e
        if len(rows) != count:
            msg = f"embedding response has {len(rows)} vectors for {count} texts"
            raise EmbeddingError("count_mismatch", msg)
        for row in rows:
            try:
                length = len(row)
            except TypeError as e:
                raise EmbeddingError("malformed", "an embedding is not a list") from e
            if length != descriptor.dimension:
                msg = f"an embedding has {length} dimensions, expected {descriptor.dimension}"
                raise EmbeddingError("dimension_mismatch", msg)
        try:
            array = np.asarray(rows)
        except (TypeError, ValueError) as e:
            raise EmbeddingError("malformed", "an embedding holds a non-number") from e
        if array.dtype.kind not in "iuf":  # strings, None, booleans, objects
            raise EmbeddingError("malformed", "an embedding holds a non-number")
        if array.ndim != 2:  # e.g. rows of nested lists
            msg = f"embedding response has shape {array.shape}, expected 2 dimensions"
            raise EmbeddingError("malformed", msg)
    if array.ndim != 2:
        msg = f"embedding response has shape {array.shape}, expected 2 dimensions"
        raise EmbeddingError("malformed", msg)
    if array.shape[0] != count:
        msg = f"embedding response has {array.shape[0]} vectors for {count} texts"
        raise EmbeddingError("count_mismatch", msg)
    if array.shape[1] != descriptor.dimension:
        msg = f"embeddings have {array.shape[1]} dimensions, expected {descriptor.dimension}"
        raise EmbeddingError("dimension_mismatch", msg)
    if array.dtype.kind not in "iuf":
        raise EmbeddingError("malformed", f"embedding dtype {array.dtype} is not real")
    values = array.astype(np.float64, copy=False)
    if count and not np.isfinite(values).all():
        raise EmbeddingError("non_finite", "an embedding holds NaN or infinity")
    # Scale each row by its largest component before squaring: no overflow or underflow.
    scale = np.abs(values).max(axis=1) if count else np.zeros(0)
    if (scale == 0.0).any():
        raise EmbeddingError("zero_vector", "an embedding is the zero vector")
    values = values / scale[:, None]
    norms = np.linalg.norm(values, axis=1) * scale
    if descriptor.normalized:
        worst = float(np.abs(norms - 1.0).max()) if count else 0.0
        if worst > NORM_TOLERANCE:
            msg = f"declared unit embeddings have a norm off by {worst:.3g}"
            raise EmbeddingError("not_normalized", msg)
    unit = values / (norms / scale)[:, None] if count else values
    return np.ascontiguousarray(unit, dtype=np.float32)


def embed_checked(
    provider: EmbeddingProvider,
    expected: EmbeddingDescriptor,
    texts: Sequence[str],
    *,
    query: bool = False,
) -> npt.NDArray[np.float32]:
    """Call ``provider.embed(texts)`` and validate the answer (:func:`validate_vectors`).

    :param query: the texts are search queries: a provider with an ``embed_queries``
        method (models trained with a query prefix, such as E5) is called through it;
        others through ``embed``.
    :param expected: the descriptor recorded when the provider was attached; a provider
        whose descriptor differs now is refused (``descriptor_drift``) before it is called.
    :raises EmbeddingError: the provider raised (``provider_failed``, the original
        exception chained) or its answer was rejected.
    """
    try:
        current = provider.descriptor
    except Exception as e:
        raise EmbeddingError("provider_failed", f"provider descriptor failed: {e!r}") from e
    if current != expected:
        msg = f"provider descriptor changed from {expected.model_key()} to {current.model_key()}"
        raise EmbeddingError("descriptor_drift", msg)
    if not texts:
        return np.zeros((0, expected.dimension), dtype=np.float32)
    try:
        embed = getattr(provider, "embed_queries", None) if query else None
        raw = embed(list(texts)) if callable(embed) else provider.embed(list(texts))
    except EmbeddingError:
        raise
    except Exception as e:
        msg = f"embedding provider {expected.model_key()} failed: {type(e).__name__}"
        raise EmbeddingError("provider_failed", msg) from e
    try:
        return validate_vectors(expected, len(texts), raw)
    except EmbeddingError:
        raise
    except Exception as e:  # anything validation did not foresee is still a bad answer
        msg = f"embedding response could not be read: {type(e).__name__}"
        raise EmbeddingError("malformed", msg) from e


def embedding_text(subject: str | None, statement: str) -> str:
    """The text a memory is embedded by: its statement (the subject is usually in it
    already; the LoCoMo harness found the plain statement better than ``subject: statement``).
    """
    return statement


def content_digest(text: str) -> str:
    """SHA-256 hex digest (first 32 characters) of the embedded text: the content key that
    lets an unchanged memory reuse its vector across revisions and rebuilds."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def max_batch_size(provider: object) -> int:
    """Texts the engine sends ``provider`` in one call: its ``max_batch_size`` attribute
    when it is a positive integer, else :data:`DEFAULT_MAX_BATCH` (providers that batch
    internally, such as the shipped ones, take any number)."""
    value = getattr(provider, "max_batch_size", None)
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return DEFAULT_MAX_BATCH
