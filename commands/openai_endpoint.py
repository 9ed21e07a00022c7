"""One OpenAI-compatible HTTP endpoint: the URL checks, the error label and the client the
chat extractor and the embeddings provider share."""

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
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.client = httpx.Client(
            headers=headers, timeout=httpx.Timeout(timeout), transport=transport
        )

    def close(self) -> None:
        """Close the HTTP connection pool."""
        self.client.close()
