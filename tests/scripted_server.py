"""A stdlib HTTP server on 127.0.0.1 (ephemeral port) that plays scripted replies, for the
tests of the OpenAI-compatible chat extractor and embeddings provider."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import msgspec


class Reply(msgspec.Struct):
    """One scripted reply; ``delay`` seconds are waited first (cut short by ``close``)."""

    status: int = 200
    body: bytes = b""
    delay: float = 0.0


class Recorded(msgspec.Struct):
    """One request the server received: path, lowercase headers and the JSON body."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


class ScriptedServer:
    """Answers each POST with the next scripted :class:`Reply` (HTTP 500 when none is left)
    and records the request; ``base_url`` ends in ``/v1``."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[Recorded] = []
        self.release = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                owner.requests.append(
                    Recorded(
                        self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw)
                    )
                )
                reply = owner.replies.pop(0) if owner.replies else Reply(500, b"no reply scripted")
                if reply.delay:
                    owner.release.wait(reply.delay)
                self.send_response(reply.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        self.thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self.thread.start()

    @property
    def base_url(self) -> str:
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def play(self, *replies: Reply) -> None:
        self.replies.extend(replies)

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()
