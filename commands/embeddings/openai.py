"""An :class:`~commands.embeddings.base.EmbeddingProvider` behind an OpenAI-compatible endpoint.

``OpenAIEmbeddingProvider`` sends ``POST {base_url}/embeddings`` with
``{"model": ..., "input": [texts...], "encoding_format": "float"}`` (plus ``"dimensions"``
when asked to) and reads ``{"data": [{"index": i, "embedding": [...]}, ...]}``, putting
the vectors back in input order. OpenAI, vLLM, llama.cpp server, Ollama, LM Studio, TEI
and LiteLLM all speak it. More than ``batch_size`` texts go out in several requests.

The provider checks the envelope (JSON, one entry per text, each index exactly once);
the vectors themselves (dimension, finite values, norms) are checked by
:func:`commands.embeddings.base.embed_checked`. Every failure raises
:class:`~commands.embeddings.base.EmbeddingError`; messages name the endpoint (without
credentials) and never carry the texts, the vectors or the API key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import httpx
import msgspec
import numpy as np

from memory_ledger.commands.embeddings.base import EmbeddingDescriptor, EmbeddingError
from memory_ledger.commands.openai_endpoint import OpenAIEndpoint
from memory_ledger.ledger.arguments import check_count, check_non_empty, check_timeout
from memory_ledger.ledger.errors import InvalidArgumentError

__all__ = ["PROVIDER_KIND", "OpenAIEmbeddingProvider"]

PROVIDER_KIND: Final = "openai-compatible"
"""The descriptor's ``provider`` for this class."""


class _Datum(msgspec.Struct):
    index: int
    embedding: list[float]


class _Reply(msgspec.Struct):
    data: list[_Datum]


_ENCODER: Final = msgspec.json.Encoder()
_REPLY: Final = msgspec.json.Decoder(_Reply)


class OpenAIEmbeddingProvider:
    """Embeds texts with a model behind an OpenAI-compatible ``/embeddings`` endpoint.

    :param base_url: the API root (``"https://api.openai.com/v1"``,
        ``"http://127.0.0.1:8000/v1"``); requests go to ``{base_url}/embeddings``.
    :param model: the model name sent in every request; it is the descriptor's
        ``model_id`` (pin a revision in the name where the server allows it).
    :param dimension: the vector length the model returns (the descriptor's dimension).
    :param api_key: sent as ``Authorization: Bearer ...`` when given; no header otherwise.
    :param normalized: whether the model returns unit vectors (OpenAI's do). When False,
        vectors are normalized by :func:`~commands.embeddings.base.validate_vectors`.
    :param timeout: seconds allowed for each HTTP request (connect, read, write, pool).
    :param batch_size: texts per request; more are sent in several requests.
    :param transport: an optional ``httpx`` transport (tests, proxies).
    :param async_transport: the same for :meth:`aembed`'s ``httpx.AsyncClient``.
    :param send_dimensions: also send ``"dimensions": dimension`` (for models with
        Matryoshka truncation, e.g. ``text-embedding-3-*``).

    :meth:`embed` returns a float64 array of shape ``(len(texts), width)`` (or, when the
    server returned rows of different lengths, a list of rows, left for
    :func:`~commands.embeddings.base.validate_vectors` to reject). The provider holds an HTTP
    connection pool: use it as a context manager or call :meth:`close` (and :meth:`aclose`
    once :meth:`aembed` was used). It is thread-safe (``httpx.Client`` is).
    :meth:`aembed` is the coroutine form of :meth:`embed` on an ``httpx.AsyncClient`` (what
    :class:`~memory_ledger.commands.aio.engine.AsyncMemoryEngine` calls on its loop).

    :raises ValueError: ``base_url`` is not http(s), ``model`` is empty, ``dimension``,
        ``timeout`` or ``batch_size`` is not positive.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        dimension: int,
        api_key: str | None = None,
        *,
        normalized: bool = True,
        timeout: float = 30.0,
        batch_size: int = 256,
        transport: httpx.BaseTransport | None = None,
        send_dimensions: bool = False,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        check_non_empty("model", model)
        check_timeout("timeout", timeout, allow_none=False)
        if timeout <= 0:
            msg = f"timeout must be a positive number of seconds, got {timeout!r}"
            raise InvalidArgumentError(msg, parameter="timeout", reason_code="out_of_range")
        check_count("batch_size", batch_size)
        self._descriptor = EmbeddingDescriptor(
            provider=PROVIDER_KIND, model_id=model, dimension=dimension, normalized=normalized
        )
        # The query string (e.g. Azure's api-version) is kept; only the fragment goes.
        endpoint = OpenAIEndpoint(
            base_url, "embeddings", api_key, float(timeout), transport, async_transport
        )
        self._endpoint = endpoint
        self._url, self._label, self._client = endpoint.url, endpoint.label, endpoint.client
        self.model = model
        self.timeout = float(timeout)
        self.batch_size = batch_size
        self.send_dimensions = send_dimensions

    def __repr__(self) -> str:
        return (
            f"OpenAIEmbeddingProvider(url={self._label!r}, model={self.model!r}, "
            f"dimension={self._descriptor.dimension})"
        )

    @property
    def descriptor(self) -> EmbeddingDescriptor:
        """``openai-compatible`` / ``model`` / ``dimension`` / ``normalized``."""
        return self._descriptor

    def close(self) -> None:
        """Close the blocking HTTP connection pool."""
        self._client.close()

    async def aclose(self) -> None:
        """Close both HTTP connection pools (blocking and async)."""
        await self._endpoint.aclose()

    def __enter__(self) -> OpenAIEmbeddingProvider:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def embed(self, texts: Sequence[str]) -> Any:
        """Vectors for ``texts`` in input order: a float64 array ``(len(texts), width)``.

        Sends ``ceil(len(texts) / batch_size)`` requests, one after another.

        :raises EmbeddingError: ``provider_failed`` (HTTP error status, timeout, refused
            or broken connection), ``malformed`` (not JSON, no ``data`` list, a vector
            that is not a list of numbers, an index repeated or out of range),
            ``count_mismatch`` (fewer or more entries than texts in a request).
        """
        batch = list(texts)
        if not batch:
            return np.zeros((0, self._descriptor.dimension), dtype=np.float64)
        rows: list[list[float]] = []
        for start in range(0, len(batch), self.batch_size):
            texts_part = batch[start : start + self.batch_size]
            rows.extend(self._rows(self._post(texts_part), len(texts_part)))
        return _matrix(rows)

    async def aembed(self, texts: Sequence[str]) -> Any:
        """Coroutine form of :meth:`embed` (same requests, checks and errors) on an
        ``httpx.AsyncClient``.

        :raises EmbeddingError: as :meth:`embed`.
        """
        batch = list(texts)
        if not batch:
            return np.zeros((0, self._descriptor.dimension), dtype=np.float64)
        rows: list[list[float]] = []
        for start in range(0, len(batch), self.batch_size):
            texts_part = batch[start : start + self.batch_size]
            rows.extend(self._rows(await self._apost(texts_part), len(texts_part)))
        return _matrix(rows)

    # --- internals ------------------------------------------------------------------------

    def _body(self, texts: list[str]) -> bytes:
        body: dict[str, Any] = {"model": self.model, "input": texts, "encoding_format": "float"}
        if self.send_dimensions:
            body["dimensions"] = self._descriptor.dimension
        return _ENCODER.encode(body)

    def _post(self, texts: list[str]) -> httpx.Response:
        try:
            return self._client.post(self._url, content=self._body(texts))
        except httpx.HTTPError as e:
            raise self._failure(e) from e

    async def _apost(self, texts: list[str]) -> httpx.Response:
        try:
            return await self._endpoint.async_client.post(self._url, content=self._body(texts))
        except httpx.HTTPError as e:
            raise self._failure(e) from e

    def _failure(self, e: httpx.HTTPError) -> EmbeddingError:
        """The typed error for a failed HTTP exchange (names the endpoint, never the key)."""
        if isinstance(e, httpx.TimeoutException):
            msg = f"embedding endpoint {self._label} gave no reply within {self.timeout:g} s"
        elif isinstance(e, httpx.NetworkError):
            msg = f"embedding endpoint {self._label} is unreachable ({type(e).__name__})"
        else:
            msg = f"embedding endpoint {self._label} failed ({type(e).__name__})"
        return EmbeddingError("provider_failed", msg)

    def _rows(self, response: httpx.Response, count: int) -> list[list[float]]:
        """The vectors of one reply, in input order (``count`` texts were sent)."""
        if not response.is_success:
            msg = (
                f"embedding endpoint {self._label} answered HTTP {response.status_code} "
                f"{response.reason_phrase}"
            ).rstrip()
            raise EmbeddingError("provider_failed", msg)
        try:
            reply = _REPLY.decode(response.content)
        except msgspec.ValidationError as e:
            # msgspec names the path (e.g. "$.data[0].embedding[3]"), never the value.
            msg = f"reply of {self._label} is not an embeddings list ({e})"
            raise EmbeddingError("malformed", msg) from None
        except msgspec.DecodeError:
            raise EmbeddingError("malformed", f"reply body of {self._label} is not JSON") from None
        ordered: list[list[float] | None] = [None] * count
        for datum in reply.data:
            if not 0 <= datum.index < count:
                msg = f"reply of {self._label} has index {datum.index} for {count} texts"
                raise EmbeddingError("malformed", msg)
            if ordered[datum.index] is not None:
                msg = f"reply of {self._label} repeats index {datum.index}"
                raise EmbeddingError("malformed", msg)
            ordered[datum.index] = datum.embedding
        missing = sum(1 for row in ordered if row is None)
        if missing:
            msg = f"reply of {self._label} has {count - missing} vectors for {count} texts"
            raise EmbeddingError("count_mismatch", msg)
        return [row for row in ordered if row is not None]


def _matrix(rows: list[list[float]]) -> Any:
    """A float64 array of ``rows``, or the ragged list itself (validate_vectors names it)."""
    widths = {len(row) for row in rows}
    if len(widths) != 1:
        return rows
    return np.asarray(rows, dtype=np.float64).reshape(len(rows), widths.pop())
