"""The debugger's ASGI app (Starlette): server-rendered pages, GET only, behind the token
gate (:mod:`.security`). Each handler reads through the audit library
(:mod:`.ledger_views`, :mod:`.memory_views`) and renders a Jinja2
template with autoescape on and :func:`.text.show` as ``finalize``, so every stored string
is escaped and its hidden characters shown in the page's text; in attributes and value
elements :class:`.places.ExactInAttributes` applies :func:`.text.exact` instead, so forms and
links carry the exact text.

Routes: ``/`` namespaces; ``/namespace`` one namespace's memories (``t``, ``p``, ``s``: its
tenant, principal and scope id); ``/timeline`` its events; ``/event/{position}`` one event's
payload; ``/memory/{id}`` one memory; ``/timetravel`` two points compared; ``/recall``
recall explained; ``/integrity`` verify, counts and encryption; ``/static/...`` the CSS.

Pages are served at the same time: Starlette runs these synchronous handlers in its thread
pool and no lock is held around a page (:class:`~.state.UiState` guards only its caches), so
a slow page (a recall as of a new point, the first integrity walk) never holds up another.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from memory_ledger.ledger.errors import InvalidArgumentError, MemoryLedgerError
from memory_ledger.ledger.ids import Namespace
from memory_ledger.replay.ui import ledger_views, memory_views
from memory_ledger.replay.ui.graph import lineage_graph
from memory_ledger.replay.ui.log import log_failure
from memory_ledger.replay.ui.places import ExactInAttributes
from memory_ledger.replay.ui.security import TokenGate
from memory_ledger.replay.ui.state import UiState
from memory_ledger.replay.ui.text import exact, show

if TYPE_CHECKING:
    from starlette.types import ASGIApp

__all__ = ["create_app", "templates"]

HERE = Path(__file__).resolve().parent


def _url(path: str, **params: Any) -> str:
    kept = {k: v for k, v in params.items() if v not in (None, "", ())}
    return path + ("?" + urlencode(kept, doseq=True) if kept else "")


def _ns(namespace: Namespace) -> dict[str, str]:
    return {"t": namespace.tenant, "p": namespace.principal, "s": namespace.scope_id}


def _when(value: datetime | None) -> str:
    return "" if value is None else value.isoformat(timespec="seconds")


def templates() -> Environment:
    """The page templates: autoescape on for every file, :func:`show` (marks) as finalize
    in the page's text, :func:`exact` in attributes and value elements
    (:class:`ExactInAttributes`)."""
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        finalize=show,
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[ExactInAttributes],
    )
    env.filters["exact"] = exact
    env.globals.update(url=_url, ns=_ns, when=_when, statuses=ledger_views.STATUSES)
    return env


class _Pages:
    """The route handlers of one :class:`UiState`."""

    def __init__(self, state: UiState) -> None:
        self.state = state
        self.env = templates()

    def render(self, name: str, code: int = 200, **context: Any) -> HTMLResponse:
        """The page ``name`` with ``context``; a page about a namespace (``space``) that was
        erased says so (the engine's keyring knows the erased namespaces)."""
        space = context.get("space")
        erased = isinstance(space, Namespace) and self.state.engine.keyring.is_erased(space)
        page = self.env.get_template(name).render(
            head=self.state.head(), space_erased=erased, **context
        )
        return HTMLResponse(page, status_code=code)

    def guarded(self, route: str, handler: Callable[[Request], HTMLResponse]) -> Callable[..., Any]:
        """Run ``handler`` (no lock: pages run concurrently); typed errors become a page
        saying what is wrong (400, or 404 for an unknown memory or event); anything else a
        500 page without a traceback, logged (:func:`log_failure`) under ``route`` (the
        route's pattern, never the requested address)."""

        def endpoint(request: Request) -> Response:
            try:
                return handler(request)
            except MemoryLedgerError as error:
                code = 404 if "unknown" in str(getattr(error, "reason_code", "")) else 400
                message = _message(error, self.state.engine.path)
                return self.render("error.html", code, error=message)
            except Exception as error:  # never a traceback on a page
                log_failure(f"on {route}", error)
                return self.render("error.html", 500, error="internal error (see the server log)")

        return endpoint

    # Views --------------------------------------------------------------------------------

    def namespaces(self, request: Request) -> HTMLResponse:
        rows = ledger_views.namespaces(self.state)
        erased = ledger_views.erased_namespaces(self.state)
        return self.render("namespaces.html", rows=rows, erased=erased)

    def namespace(self, request: Request) -> HTMLResponse:
        namespace = _namespace(request)
        before = request.query_params.get("before")
        start = _int_text(before, "before") if before else None
        status = request.query_params.get("status") or None
        if status is not None and status not in ledger_views.STATUSES:
            raise InvalidArgumentError(f"unknown status {status!r}", parameter="status")
        rows, total = memory_views.memory_rows(self.state, namespace, before=start, status=status)
        return self.render(
            "namespace.html",
            space=namespace,
            rows=rows,
            total=total,
            before=start,
            status=status,
            page_size=self.state.page_size,
        )

    def timeline(self, request: Request) -> HTMLResponse:
        from memory_ledger.replay.audit.points import parse_timestamp

        namespace = _namespace(request)
        query = request.query_params
        types = tuple(t for t in query.getlist("type") if t)
        since = query.get("since") or None
        until = query.get("until") or None
        page = ledger_views.timeline(
            self.state,
            namespace,
            after=_int(request, "after", 0),
            types=types,
            session_id=query.get("session") or None,
            since=parse_timestamp(since, "since") if since else None,
            until=parse_timestamp(until, "until") if until else None,
        )
        return self.render("timeline.html", space=namespace, page=page, since=since, until=until)

    def event(self, request: Request) -> HTMLResponse:
        import json

        position = _int_text(request.path_params["position"], "position")
        record = ledger_views.event_payload(self.state, position)
        if record is None:
            raise InvalidArgumentError(
                f"no event at position {position}",
                parameter="position",
                reason_code="unknown_position",
            )
        payload = json.dumps(record, indent=2, ensure_ascii=False, default=str)
        return self.render("event.html", record=record, payload=payload)

    def memory(self, request: Request) -> HTMLResponse:
        page = memory_views.memory_page(self.state, request.path_params["memory_id"])
        return self.render(
            "memory.html",
            page=page,
            lineage=page.lineage,
            space=page.lineage.namespace,
            graph=lineage_graph(page.lineage),
        )

    def timetravel(self, request: Request) -> HTMLResponse:
        namespace = _namespace(request)
        query = request.query_params
        mode = query.get("mode") or "position"
        head = self.state.head()
        points = memory_views.change_points(self.state, namespace)
        a_text = query.get("a") or (str(points[1]) if len(points) > 1 else "0")
        b_text = query.get("b") or str(head)
        form = {"mode": mode, "a": a_text, "b": b_text}
        a = memory_views.parse_ui_point(a_text, mode, "a")
        b = memory_views.parse_ui_point(b_text, mode, "b")
        diff = memory_views.time_travel(
            self.state, namespace, a, b, offset=_int(request, "offset", 0)
        )
        return self.render(
            "timetravel.html",
            space=namespace,
            diff=diff,
            form=form,
            points=points,
            page_size=self.state.page_size,
        )

    def recall(self, request: Request) -> HTMLResponse:
        namespace = _namespace(request)
        query = request.query_params
        text = query.get("q") or ""
        k = _int(request, "k", 10)
        at = (query.get("at") or "").strip()
        mode = query.get("mode") or "position"
        form = {"q": text, "k": k, "at": at, "mode": mode}
        result = None
        if text:
            point = memory_views.parse_ui_point(at, mode, "at") if at else None
            result = memory_views.explained_recall(self.state, namespace, text, k, point)
        return self.render("recall.html", space=namespace, form=form, result=result)

    def integrity(self, request: Request) -> HTMLResponse:
        if request.query_params.get("again"):
            self.state.forget("verify")
        report = ledger_views.integrity(self.state)
        return self.render("integrity.html", report=report)


_PATH = re.compile(r"""(?<![\w/.:])(?:/|[A-Za-z]:\\)[^\s'"<>]*[/\\][^\s'"<>]*""")
"""An absolute path (POSIX or Windows) in a message."""


def _message(error: BaseException, store: Path) -> str:
    """The error's message for a page: one line, secret shapes redacted, and no path of the
    server's file system (a page is read by whoever holds the token, maybe over the
    network): the store's folder is "this store", any other absolute path "a path on the
    server"."""
    from memory_ledger.commands.secrets import redact

    text = redact(" ".join(str(error).split())).text or type(error).__name__
    for folder in sorted({str(store), str(store.resolve())}, key=len, reverse=True):
        text = text.replace(repr(folder), "this store").replace(folder, "this store")
    return _PATH.sub("a path on the server", text)


def _int_text(text: str, name: str) -> int:
    from memory_ledger.replay.audit.points import whole_number

    return whole_number(text, name)


def _int(request: Request, name: str, default: int) -> int:
    text = request.query_params.get(name)
    return default if text in (None, "") else _int_text(str(text), name)


def _namespace(request: Request) -> Namespace:
    query = request.query_params
    parts = [query.get(k) for k in ("t", "p", "s")]
    if not all(parts):
        raise InvalidArgumentError(
            "name the namespace: t (tenant), p (principal) and s (scope id)", parameter="t"
        )
    return Namespace(*(str(p) for p in parts)).validated()


def create_app(state: UiState) -> ASGIApp:
    """The debugger's ASGI app over ``state`` (token gate included)."""
    pages = _Pages(state)
    routes: list[Route | Mount] = [
        Route(path, pages.guarded(path, handler))
        for path, handler in [
            ("/", pages.namespaces),
            ("/namespace", pages.namespace),
            ("/timeline", pages.timeline),
            ("/event/{position}", pages.event),
            ("/memory/{memory_id}", pages.memory),
            ("/timetravel", pages.timetravel),
            ("/recall", pages.recall),
            ("/integrity", pages.integrity),
        ]
    ]
    routes += [
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    app = Starlette(routes=routes)
    return TokenGate(app, state.token)
