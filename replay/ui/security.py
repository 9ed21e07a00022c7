"""The debugger's door: a random token on every request, GET only, and response headers
that keep pages from being framed, sniffed, cached, or sending the token on as a referrer.

The token arrives once in the printed URL (``?token=...``, as notebook servers do); the
first such request answers with a cookie holding it (HttpOnly, SameSite=Strict, path ``/``)
and a redirect to the same address without it, so the token leaves the address bar and the
browser's history. Every later request carries the cookie. A request with neither gets
403. Tokens are compared in constant time. The cookie's name is derived from the token, so
two debuggers on one machine (cookies ignore ports) never see each other's.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = [
    "CONTENT_SECURITY_POLICY",
    "SECURITY_HEADERS",
    "TokenGate",
    "cookie_name",
    "new_token",
]

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
"""The Content-Security-Policy of every response: nothing loads but this server's
stylesheet (no script, no image, no font, no connection: the pages have none), forms submit
only here, no page may be framed, no ``<base>`` may move links. docs/ui.md states it word for
word (a test compares them)."""

SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
)
"""Sent with every response, the 403, 404 and 405 answers included."""


def new_token() -> str:
    """A fresh random token (32 bytes, URL-safe text)."""
    return secrets.token_urlsafe(32)


def cookie_name(token: str) -> str:
    """The cookie that carries ``token`` (named after a digest of it)."""
    return "memory_ledger_ui_" + hashlib.sha256(token.encode()).hexdigest()[:12]


class TokenGate:
    """ASGI middleware: let a request through only with the token (query or cookie)."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token.encode()
        self.cookie = cookie_name(token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Check the token, then pass on with :data:`SECURITY_HEADERS` added."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            await _plain(send, 405, "read-only: GET only", [(b"allow", b"GET, HEAD")])
            return
        query = [
            (k, v) for k, v in parse_qsl(scope.get("query_string", b"").decode("latin-1"), True)
        ]
        given = next((v for k, v in query if k == "token"), None)
        if given is not None:
            if not self._valid(given):
                await _plain(send, 403, "wrong token: open the address memory-ledger ui printed")
                return
            rest = urlencode([(k, v) for k, v in query if k != "token"])
            target = scope.get("root_path", "") + scope["path"] + (f"?{rest}" if rest else "")
            cookie = (
                f"{self.cookie}={self.token.decode()}; Path=/; HttpOnly; SameSite=Strict"
            ).encode()
            await _plain(send, 303, "", [(b"location", target.encode()), (b"set-cookie", cookie)])
            return
        if not self._valid(self._from_cookie(scope)):
            await _plain(send, 403, "token required: open the address memory-ledger ui printed")
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)

    def _valid(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token)

    def _from_cookie(self, scope: Scope) -> str | None:
        for name, value in scope.get("headers", []):
            if name == b"cookie":
                jar: SimpleCookie = SimpleCookie()
                try:
                    jar.load(value.decode("latin-1"))
                except Exception:  # a malformed cookie header is no token
                    continue
                if self.cookie in jar:
                    return jar[self.cookie].value
        return None


async def _plain(
    send: Send, status: int, text: str, headers: list[tuple[bytes, bytes]] | None = None
) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                *SECURITY_HEADERS,
                *(headers or []),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
