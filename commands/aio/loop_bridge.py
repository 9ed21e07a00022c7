"""HTTP extractors and embedders on the event loop, for engines driven from coroutines.

The blocking engine calls an extractor's ``extract`` and a provider's ``embed`` from its own
threads (the async engine's worker thread, a session's background extraction queue, the
vector indexer). When the host runs an event loop, the HTTP exchange belongs on that loop's
``httpx.AsyncClient``: :class:`LoopBridgedExtractor` and :class:`LoopBridgedEmbeddings`
wrap an object that also offers a coroutine (``aextract`` / ``aembed``, as
:class:`~memory_ledger.commands.extraction.openai.OpenAIChatExtractor` and
:class:`~memory_ledger.commands.embeddings.openai.OpenAIEmbeddingProvider` do) and, called
from a thread, submit that coroutine to the loop and wait for its result. Called on the
loop's own thread, or once the loop is closed, they call the blocking method instead (a
thread waiting on the loop it blocks would never wake).

The wait is bounded (:data:`BRIDGE_TIMEOUT_SECONDS`, beside the HTTP client's own timeout),
so a loop that stops while a request is in flight turns into the wrapped object's usual
failure, never a hung thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any, Final, Protocol, TypeVar, runtime_checkable

from memory_ledger.commands.embeddings.base import EmbeddingDescriptor, EmbeddingProvider
from memory_ledger.commands.extraction.base import ExtractionRequest, Extractor

__all__ = [
    "BRIDGE_TIMEOUT_SECONDS",
    "AsyncEmbeddingProvider",
    "AsyncExtractor",
    "LoopBridgedEmbeddings",
    "LoopBridgedExtractor",
    "bridge_embeddings",
    "bridge_extractor",
]

BRIDGE_TIMEOUT_SECONDS: Final = 600.0
"""The longest a thread waits for a coroutine it handed to the loop (the HTTP clients' own
timeouts are far shorter; this only guards against a loop that stopped)."""

T = TypeVar("T")


@runtime_checkable
class AsyncExtractor(Extractor, Protocol):
    """An :class:`~memory_ledger.commands.extraction.base.Extractor` that also has a coroutine
    form of ``extract``."""

    async def aextract(self, request: ExtractionRequest) -> Sequence[Any]:
        """Raw items for ``request``, as ``extract`` returns them."""
        ...


@runtime_checkable
class AsyncEmbeddingProvider(EmbeddingProvider, Protocol):
    """An :class:`~memory_ledger.commands.embeddings.base.EmbeddingProvider` that also has a
    coroutine form of ``embed``."""

    async def aembed(self, texts: Sequence[str]) -> Any:
        """Vectors for ``texts``, as ``embed`` returns them."""
        ...


def _on_loop(
    loop: asyncio.AbstractEventLoop,
    make: Callable[[], Awaitable[T]],
    fallback: Callable[[], T],
) -> T:
    """Run the coroutine ``make()`` on ``loop`` and wait for it from this thread; call
    ``fallback()`` here when that cannot work (this is the loop's thread, or the loop is
    closed or not running)."""
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop or loop.is_closed() or not loop.is_running():
        return fallback()

    async def call() -> T:
        return await make()

    coroutine: Coroutine[Any, Any, T] = call()
    try:
        future = asyncio.run_coroutine_threadsafe(coroutine, loop)
    except RuntimeError:  # the loop closed in between
        coroutine.close()
        return fallback()
    try:
        return future.result(BRIDGE_TIMEOUT_SECONDS)
    except concurrent.futures.TimeoutError:
        future.cancel()
        raise


class LoopBridgedExtractor:
    """An extractor whose ``extract`` runs the wrapped one's ``aextract`` on ``loop``.

    ``extractor_id`` and ``uses_context`` are the wrapped extractor's; errors are its own
    (e.g. :class:`~memory_ledger.commands.extraction.openai.ModelOutputError`).
    """

    def __init__(self, extractor: AsyncExtractor, loop: asyncio.AbstractEventLoop) -> None:
        self.wrapped = extractor
        self.loop = loop
        self.uses_context: bool = getattr(extractor, "uses_context", True)

    @property
    def extractor_id(self) -> str:
        """The wrapped extractor's id (what events record)."""
        return self.wrapped.extractor_id

    def extract(self, request: ExtractionRequest) -> Sequence[Any]:
        """The wrapped extractor's items for ``request``, fetched on the loop."""
        return _on_loop(
            self.loop,
            lambda: self.wrapped.aextract(request),
            lambda: self.wrapped.extract(request),
        )


class LoopBridgedEmbeddings:
    """An embedding provider whose ``embed`` runs the wrapped one's ``aembed`` on ``loop``.

    The descriptor is the wrapped provider's, so stored vectors are keyed exactly as with the
    blocking provider; ``close`` closes the wrapped provider's blocking pool.
    """

    def __init__(self, provider: AsyncEmbeddingProvider, loop: asyncio.AbstractEventLoop) -> None:
        self.wrapped = provider
        self.loop = loop

    @property
    def descriptor(self) -> EmbeddingDescriptor:
        """The wrapped provider's descriptor."""
        return self.wrapped.descriptor

    def embed(self, texts: Sequence[str]) -> Any:
        """The wrapped provider's vectors for ``texts``, fetched on the loop."""
        batch = list(texts)
        return _on_loop(
            self.loop, lambda: self.wrapped.aembed(batch), lambda: self.wrapped.embed(batch)
        )

    def close(self) -> None:
        """Close the wrapped provider's blocking resources (if it has ``close``)."""
        closer = getattr(self.wrapped, "close", None)
        if callable(closer):
            closer()


def bridge_extractor(
    extractor: Extractor | None, loop: asyncio.AbstractEventLoop
) -> Extractor | None:
    """``extractor`` bridged onto ``loop`` when it has ``aextract``; otherwise unchanged."""
    if extractor is not None and isinstance(extractor, AsyncExtractor):
        return LoopBridgedExtractor(extractor, loop)
    return extractor


def bridge_embeddings(
    provider: EmbeddingProvider | None, loop: asyncio.AbstractEventLoop
) -> EmbeddingProvider | None:
    """``provider`` bridged onto ``loop`` when it has ``aembed``; otherwise unchanged."""
    if provider is not None and isinstance(provider, AsyncEmbeddingProvider):
        return LoopBridgedEmbeddings(provider, loop)
    return provider
