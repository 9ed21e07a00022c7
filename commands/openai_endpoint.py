"""One OpenAI-compatible HTTP endpoint: the URL checks, the error label and the clients the
chat extractor and the embeddings provider share (a blocking ``httpx.Client`` and, for
coroutines, an ``httpx.AsyncClient`` created on first use)."""

from __future__ import annotations

import httpx

from memory_ledger.ledger.arguments import check_timeout
from memory_ledger.ledger.errors import InvalidArgumentError

__all__ = ["OpenAIEndpoint"]


class OpenAIEndpoint:
    """``POST {base_url}/{route}`` with a JSON body, a bearer key only when one is given.

    :param base_url: ``http://`` or ``https://`` base (e.g. ``http://127.0.0.1:8080/v1``);
        a base that already ends in ``/{route}`` is used as is. Its query string is kept.
    :param route: the API route, e.g. ``chat/completions`` or ``embeddings``.
    :param timeout: seconds for the whole exchange.
    :param transport: an ``httpx`` transport for the blocking client (tests, proxies).
    :param async_transport: an ``httpx`` async transport for :attr:`async_client`.
    :raises ValueError: the URL is not http(s) with a host.

    ``label`` names the endpoint in errors: scheme, host, port and path; never user info,
    the query string or the key.
    """

    def __init__(
        self,
        base_url: str,
        route: str,
        api_key: str | None,
        timeout: float,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        try:
            url = httpx.URL(base_url.rstrip("/"))
        except httpx.InvalidURL:
            msg = "base_url must be an http:// or https:// URL"
            raise InvalidArgumentError(msg, parameter="base_url") from None
        if url.scheme not in ("http", "https") or not url.host:
            msg = "base_url must be an http:// or https:// URL"
            raise InvalidArgumentError(msg, parameter="base_url")
        check_timeout("timeout", timeout, allow_none=False)
        if timeout <= 0:
            msg = f"timeout must be a positive number of seconds, got {timeout!r}"
            raise InvalidArgumentError(msg, parameter="timeout", reason_code="out_of_range")
        suffix = "/" + route
        path = url.path if url.path.endswith(suffix) else url.path + suffix
        self.url = url.copy_with(path=path, fragment=None)
        self.label = f"{url.scheme}://{url.host}{f':{url.port}' if url.port else ''}{path}"
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = httpx.Timeout(timeout)
        self._async_transport = async_transport
        self._async_client: httpx.AsyncClient | None = None
        self.client = httpx.Client(
            headers=self._headers, timeout=self._timeout, transport=transport
        )

    @property
    def async_client(self) -> httpx.AsyncClient:
        """The ``httpx.AsyncClient`` for coroutines (created on first use; its connection
        pool belongs to the event loop that first uses it)."""
        if self._async_client is None:
            self._async_client = httpx.AsyncClient(
                headers=self._headers, timeout=self._timeout, transport=self._async_transport
            )
        return self._async_client

    def close(self) -> None:
        """Close the blocking client's connection pool (see :meth:`aclose` for the other)."""
        self.client.close()

    async def aclose(self) -> None:
        """Close both connection pools (the async one only if it was created)."""
        self.client.close()
        if self._async_client is not None:
            await self._async_client.aclose()
