"""The MCP server: one memory store served to agents over the Model Context Protocol.

Built on the official ``mcp`` SDK (``MCPServer``), over stdio or streamable HTTP, on an
:class:`~memory_ledger.commands.aio.engine.AsyncMemoryEngine` that stays open (and keeps any
embedding model loaded) for the server's lifetime.

Tools: ``remember``, ``recall`` (with ``about`` / ``attribute`` hints and ``as_of``),
``forget``, ``correct``, ``pin``, ``explain`` and ``memory_map``; the memory map is also the
resource ``memory://map`` and is summarised in the instructions each client gets when it
connects.

The namespace is never a tool argument. Over stdio it is fixed when the server starts; over
HTTP each request carries a bearer token that maps to exactly one namespace
(:mod:`memory_ledger.replay.mcp.tokens`); a request without a known token is answered 401
with an empty body before the SDK sees it. A tool call that names an argument the tool does
not have (``tenant``, ``namespace``, ...), leaves out a required one or gives one a value of
the wrong JSON type (``"k": "five"``, ``"k": true``) is refused as a one-line tool error and
does nothing.

Recording: each command tool runs as a direct command whose session id names the caller,
``mcp-<client>-<hex>`` (over HTTP ``mcp-<token name>-<client>-<hex>``, the client being the
name the MCP client sent when it connected; a name in which the secret detector finds a
secret is left out, ``client`` standing in when no name is left), so ``explain`` shows which
MCP call created, corrected, pinned or forgot a memory. Recalls go through one session per caller
(``mcp-<client>-<hex>``) and are recorded as RecallServed like any session's (buffered, written
within about a second). ``as_of`` recalls, ``explain`` and ``memory_map`` are audit reads and
record nothing.

Over stdio every line gets an answer: one that is no JSON a parse error (-32700), one whose
JSON holds a lone surrogate escape is served with U+FFFD in its place (the SDK's own stdio
loop drops both without a word).

Errors raised on purpose (a bad argument, an unknown memory, a secret in a statement) reach
the client as tool errors carrying the typed error's message, naming the tool's arguments
(``memory``, ``as_of``) rather than the engine's parameters; nothing else of an exception
(no traceback) leaves the server. No error or result (the SDK's JSON-RPC errors included)
quotes more of a value the client sent than a short prefix (:data:`QUOTE_CHARS`, with the
length when cut) in which secret shapes are redacted (:func:`_quoted`); a recall's
structured ``query`` is cut to :data:`QUERY_ECHO_CHARS` characters, redacted alike.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import re
import socket
import sys
import types
import typing
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Mapping
from datetime import datetime
from typing import Any, BinaryIO, Final, TypeVar, cast

import anyio
import msgspec
import msgspec.inspect
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    CallToolResult,
    ErrorData,
    JSONRPCError,
    TextContent,
    ToolAnnotations,
)
from starlette.authentication import AuthCredentials
from starlette.types import ASGIApp, Receive, Scope, Send

from memory_ledger.commands.aio.engine import AsyncMemoryEngine
from memory_ledger.commands.aio.session import AsyncMemorySession
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.commands.errors import (
    MemoryLedgerError,
    UnknownMemoryError,
)
from memory_ledger.commands.recall.index import RecallResult, RecallScope
from memory_ledger.commands.recall.policy import check_recall_k
from memory_ledger.commands.secrets import contains_secret, redact
from memory_ledger.commands.telemetry.spans import traced_method
from memory_ledger.ledger.ids import Namespace
from memory_ledger.replay.audit import lineage
from memory_ledger.replay.audit.lineage_text import render_text
from memory_ledger.replay.audit.points import NaiveTimestampError, PointError, parse_point
from memory_ledger.replay.audit.rebuild import PositionOutOfRangeError
from memory_ledger.replay.audit.timetravel import as_of
from memory_ledger.replay.mcp.tokens import TokenRegistry

__all__ = ["MAP_URI", "Caller", "MemoryMcpServer", "TokenGate"]

MAP_URI: Final = "memory://map"
"""The memory map resource."""

READ_FLUSH_SECONDS: Final = 1.0
"""A caller's buffered recall records are written at most about this long after a recall."""

QUOTE_CHARS: Final = 40
"""At most this many characters of a value a caller sent are quoted in an error or a
result's text (secret shapes redacted first; :func:`_quoted`)."""

QUERY_ECHO_CHARS: Final = 200
"""At most this many characters of a recall's query come back in its structured ``query``."""

MESSAGE_CHARS: Final = 500
"""A tool error's message is cut to this many characters (a last bound: each message quotes
caller input through :func:`_quoted` already)."""

_SCAN_CHARS: Final = 4096
"""How much of a caller's value the secret detector scans before a prefix of it is quoted:
far more than is quoted, so a secret that starts inside the quoted prefix is found whole."""

INSTRUCTIONS: Final = """\
Long-term memory of the user you are talking to (one namespace, chosen by the server).
- recall(query, k, about, attribute): look things up before answering questions about the \
user, their people, projects and preferences. Set `about` to a subject and `attribute` to a \
predicate from the memory map below when one fits (they rank matching memories first).
- remember(statement, ...): store one self-contained fact the user wants kept; subject + \
predicate + value make it a keyed fact that a later value supersedes.
- correct(statement, target, subject): replace what memory says; forget(memory): drop one \
memory; pin(memory): keep one forever. Pass the memory's id (the `id` recall returned) as \
`target` / `memory` whenever you have one. Words alone only name a memory holding every one \
of them (forget, pin) or, for correct, a memory about the same subject and attribute; \
otherwise the call is refused (no_clear_target, ambiguous_match) listing candidate ids.
- explain(memory_id): where a memory came from and what changed it.
Never store secrets (passwords, API keys, tokens)."""

T = TypeVar("T")

_CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "memory_ledger_mcp_caller", default=None
)
_INTEGRAL_FLOAT_BOUND = 2.0**63
"""An integral float (``5.0``) passes as an integer argument only below this magnitude: the
SDK's validation (pydantic) turns a float into an int only within 64 bits."""
_LABEL_UNSAFE = re.compile(r"[^A-Za-z0-9._]+")


_NAMESPACE_WORDS = frozenset(
    {"tenant", "principal", "scope_id", "scope", "namespace", "user", "user_id", "agent_id"}
)
"""Argument names that try to choose a namespace (told that the server fixes it)."""


class Caller(msgspec.Struct, frozen=True, kw_only=True):
    """Who a request comes from: the namespace it may touch and the client label recorded in
    session ids (``mcp-<label>-<hex>``)."""

    namespace: Namespace
    label: str

    @property
    def prefix(self) -> str:
        """The session-id prefix of this caller's commands."""
        return f"mcp-{self.label}-"


def _label(*parts: str | None) -> str:
    """The caller label of session ids from client-supplied names (the token name, the name
    the client sent when it connected): each cleaned to ``[A-Za-z0-9._-]`` and cut to 40
    characters. A name in which the secret detector finds a secret (a client named after its
    API key) is left out whole, so no part of it reaches the ledger; ``client`` when nothing
    is left."""
    cleaned = []
    for part in parts:
        if not part or contains_secret(part):
            continue
        safe = _LABEL_UNSAFE.sub("-", part).strip("-")[:40]
        if safe and not contains_secret(safe):
            cleaned.append(safe)
    return "-".join(cleaned) or "client"


def _short(value: str, limit: int = QUOTE_CHARS) -> str:
    """At most ``limit`` characters of ``value`` (``...`` added when cut) with every secret
    shape redacted (``[REDACTED:<kind>]``, :func:`~memory_ledger.commands.secrets.redact`).
    Redaction runs on the first :data:`_SCAN_CHARS` characters before the cut, so no part of
    a secret that the prefix would show survives."""
    shown = redact(value[:_SCAN_CHARS]).text
    if len(shown) > limit or len(value) > _SCAN_CHARS:
        shown = shown[: max(limit - 3, 0)] + "..."
    return shown


def _quoted(value: object, limit: int = QUOTE_CHARS) -> str:
    """A value a caller sent, as an error or a result's text may quote it: the ``repr`` of
    its :func:`_short` prefix (control and invisible characters escaped), followed by its
    length when it was cut: ``'qqqq...' (2,000,000 characters)``. Never more than about
    ``limit + 30`` characters, never a secret shape."""
    text = value if isinstance(value, str) else str(value)
    shown = _short(text, limit)
    quoted = repr(shown)
    if shown != text and len(text) > limit:
        quoted += f" ({len(text):,} characters)"
    return quoted


def _error_text(error: BaseException, arguments: Collection[str], names: Mapping[str, str]) -> str:
    """The one-line message of a tool error raised on purpose, in the tool's words.

    ``arguments`` are the tool's argument names and ``names`` maps the engine's parameter
    names to them (``{"statement_or_id": "memory"}``, ``{"at": "as_of"}``): a mapped name
    holding an underscore is replaced wherever it stands in the message as a word, and when
    the error names its ``parameter`` (:class:`~memory_ledger.ledger.errors.InvalidArgumentError`,
    :class:`~memory_ledger.commands.errors.CommandRejectedError`) and the message does not say
    which tool argument that was, the argument is put first (``as_of: position 9 is beyond the
    ledger head 3``). Secret shapes are redacted and the message is cut to
    :data:`MESSAGE_CHARS`."""
    message = " ".join(str(error)[: 4 * _SCAN_CHARS].split())
    for engine_name, argument in names.items():
        if "_" in engine_name:
            message = re.sub(rf"\b{re.escape(engine_name)}\b", argument, message)
    parameter = getattr(error, "parameter", None)
    if isinstance(parameter, str):
        argument = names.get(parameter, parameter)
        if argument in arguments and not re.search(rf"\b{re.escape(argument)}\b", message):
            message = f"{argument}: {message}"
    return _short(message, MESSAGE_CHARS)


_JSON_TYPES: Final[dict[type, str]] = {
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
    list: "an array",
    dict: "an object",
}


def _fits(value: Any, hint: Any) -> bool:
    """Whether the JSON value ``value`` has the declared type ``hint`` (strictly: no bool for
    an int, no string for a number; an integral float is an integer when it has 64 bits or
    fewer, :data:`_INTEGRAL_FLOAT_BOUND`: the SDK's validation, which runs after this check,
    refuses a larger one in its own multi-line words)."""
    if (
        isinstance(value, float)
        and value.is_integer()
        and abs(value) < _INTEGRAL_FLOAT_BOUND
        and _accepts(hint, int)
    ):
        return True
    if isinstance(value, bool) and not _accepts(hint, bool):
        return False
    try:
        msgspec.convert(value, type=hint, strict=True)
    except msgspec.ValidationError:
        return False
    return True


def _accepts(hint: Any, kind: type) -> bool:
    return hint is kind or kind in _members(hint)


def _members(hint: Any) -> tuple[Any, ...]:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def _expected(hint: Any) -> str:
    """The declared type ``hint`` in JSON words (``an integer``, ``a string or null``)."""
    names = []
    for member in _members(hint):
        origin = typing.get_origin(member) or member
        name = _JSON_TYPES.get(origin, getattr(origin, "__name__", str(origin)))
        items = typing.get_args(member) if origin is list else ()
        if len(items) == 1:
            name = f"an array of items that are each {_expected(items[0])}"
        names.append(name)
    return " or ".join(names)


def _given_as(value: Any, hint: Any) -> str:
    """What a client gave for an argument declared ``hint``: :func:`_given`, and for an
    array where an array of some item type is declared, its first item that is not one
    (``an array whose item 2 is the number 5``)."""
    if isinstance(value, list):
        for member in _members(hint):
            items = typing.get_args(member) if typing.get_origin(member) is list else ()
            if len(items) == 1:
                for index, item in enumerate(value):
                    if not _fits(item, items[0]):
                        return f"an array whose item {index} is {_given(item)}"
    return _given(value)


def _bounded_data(data: Any, depth: int = 0) -> Any:
    """``data`` of a JSON-RPC error with each string cut to a short, redacted prefix
    (:func:`_short`), arrays and objects to their first 10 members; ``None`` for structure
    nested deeper than 3 levels."""
    if isinstance(data, str):
        return _short(data)
    if depth >= 3 and isinstance(data, (list, dict)):
        return None
    if isinstance(data, list):
        return [_bounded_data(item, depth + 1) for item in data[:10]]
    if isinstance(data, dict):
        items = list(data.items())[:10]
        return {_short(str(key)): _bounded_data(value, depth + 1) for key, value in items}
    return data


def _bounded_error(error: MCPError) -> MCPError:
    """``error`` with its message cut to a short, redacted form (:data:`MESSAGE_CHARS`) and
    its data bounded (:func:`_bounded_data`); ``error`` itself when nothing changes."""
    message = _short(" ".join(error.message.split()), MESSAGE_CHARS)
    data = _bounded_data(error.data)
    if message == error.message and data == error.data:
        return error
    return MCPError(code=error.code, message=message, data=data)


def _given(value: Any) -> str:
    """What a client gave, in JSON words: ``the string "five"``, ``the number 1.5``."""
    kind = next((word for cls, word in _JSON_TYPES.items() if type(value) is cls), None)
    if kind is None or isinstance(value, (list, dict)) or value is None:
        return kind or type(value).__name__
    if isinstance(value, str):
        shown = json.dumps(_short(value))
        if len(value) > QUOTE_CHARS:
            shown += f" ({len(value):,} characters)"
    else:
        shown = _short(json.dumps(value))
    article = kind.split(" ", 1)[1]
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        article = "number"
    return f"the {article} {shown}"


def _result(text: str, data: dict[str, Any]) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=msgspec.to_builtins(data),
    )


class MemoryMcpServer:
    """An MCP server over one open :class:`AsyncMemoryEngine`.

    :param memory: the engine (the server does not close it).
    :param namespace: the fixed namespace (stdio); exactly one of ``namespace`` and
        ``tokens`` is given.
    :param tokens: the bearer tokens of the HTTP transport, each mapping to one namespace.
    :raises ValueError: both or neither of ``namespace`` and ``tokens``.

    ``mcp`` is the SDK's ``MCPServer`` (run it with :meth:`serve_stdio` or
    :meth:`serve_http`, or mount :meth:`http_app`). Note that the SDK configures the root
    logger (WARNING) when this object is made: meant for a server process of its own.
    """

    def __init__(
        self,
        memory: AsyncMemoryEngine,
        *,
        namespace: Namespace | None = None,
        tokens: TokenRegistry | None = None,
        name: str = "memory-ledger",
    ) -> None:
        if (namespace is None) == (tokens is None):
            msg = "give exactly one of namespace (stdio) and tokens (HTTP)"
            raise ValueError(msg)
        self.memory = memory
        self.namespace = namespace.validated() if namespace is not None else None
        self.tokens = tokens
        self._readers: dict[tuple[str, str], AsyncMemorySession] = {}
        self._reader_lock = asyncio.Lock()
        self._flushing: dict[tuple[str, str], asyncio.Task[None]] = {}
        self._arguments: dict[str, tuple[str, ...]] = {}
        self._required: dict[str, frozenset[str]] = {}
        self._hints: dict[str, dict[str, Any]] = {}
        self.mcp: MCPServer[Any] = MCPServer(
            name, instructions=INSTRUCTIONS, log_level="WARNING", middleware=[self._middleware]
        )
        read_only = ToolAnnotations(read_only_hint=True, idempotent_hint=True)
        change = ToolAnnotations(read_only_hint=False, destructive_hint=False)
        for tool, hints in (
            (self.remember, change),
            (self.remember_many, change),
            (self.recall, ToolAnnotations(read_only_hint=False, idempotent_hint=True)),
            (self.forget, ToolAnnotations(read_only_hint=False, destructive_hint=True)),
            (self.correct, change),
            (self.pin, change),
            (self.explain, read_only),
            (self.memory_map, read_only),
        ):
            self._add_tool(tool, hints)
        self.mcp.resource(
            MAP_URI,
            name="memory_map",
            title="Memory map",
            description="Subjects and attributes this memory holds, with counts.",
            mime_type="text/plain",
        )(self._map_resource)

    def _add_tool(self, fn: Callable[..., Awaitable[Any]], annotations: ToolAnnotations) -> None:
        parameters = inspect.signature(fn).parameters
        self._arguments[fn.__name__] = tuple(parameters)
        self._required[fn.__name__] = frozenset(
            name for name, p in parameters.items() if p.default is inspect.Parameter.empty
        )
        hints = typing.get_type_hints(fn)
        self._hints[fn.__name__] = {name: hints[name] for name in parameters}
        for hint in self._hints[fn.__name__].values():
            msgspec.inspect.type_info(hint)  # a type msgspec cannot check fails here, not later
        self.mcp.add_tool(fn, annotations=annotations, structured_output=False)

    # Who is calling ------------------------------------------------------------------------

    def _caller_of(self, ctx: ServerRequestContext[Any, Any]) -> Caller:
        client: str | None = None
        params = ctx.session.client_params
        if params is not None and params.client_info is not None:
            client = params.client_info.name
        elif ctx.method == "initialize" and isinstance(ctx.params, Mapping):
            info = ctx.params.get("clientInfo")
            name = info.get("name") if isinstance(info, Mapping) else None
            client = name if isinstance(name, str) else None
        if self.namespace is not None:
            return Caller(namespace=self.namespace, label=_label(client))
        request = ctx.request
        user = getattr(request, "scope", {}).get("user") if request is not None else None
        if not isinstance(user, AuthenticatedUser) or not user.access_token.claims:
            raise MCPError(code=INVALID_REQUEST, message="unauthenticated request")
        namespace = user.access_token.claims.get("namespace")
        if not isinstance(namespace, Namespace):
            raise MCPError(code=INVALID_REQUEST, message="unauthenticated request")
        return Caller(namespace=namespace, label=_label(user.access_token.client_id, client))

    async def _middleware(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Resolve the caller of every tool call, resource read and handshake; refuse
        tool arguments a tool does not declare; put the memory map in the instructions.
        A JSON-RPC error of any request quotes at most a short, redacted prefix of what the
        client sent (the SDK's own echo the whole method name or resource URI):
        :func:`_bounded_error`."""
        try:
            return await self._handle(ctx, call_next)
        except MCPError as e:
            bounded = _bounded_error(e)
            if bounded is e:
                raise
            raise bounded from None

    async def _handle(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        if ctx.method not in ("initialize", "tools/call", "resources/read"):
            return await call_next(ctx)
        caller = self._caller_of(ctx)
        if ctx.method == "tools/call" and isinstance(ctx.params, Mapping):
            refusal = self._refuse_unknown_tool(ctx.params)
            if refusal is None:
                refusal = self._refuse_unknown_arguments(ctx.params)
            if refusal is None:
                refusal = self._refuse_mistyped_arguments(ctx.params)
            if refusal is not None:
                return refusal
        token = _CALLER.set(caller)
        try:
            result = await call_next(ctx)
        finally:
            _CALLER.reset(token)
        if ctx.method == "initialize" and isinstance(result, dict):
            memory_map = await self.memory.memory_map(caller.namespace)
            result["instructions"] = f"{INSTRUCTIONS}\n\nMemory map:\n{memory_map}"
        return result

    def _refuse_unknown_tool(self, params: Mapping[str, Any]) -> CallToolResult | None:
        """A tool error for a call of a tool this server does not have, quoting at most a
        short, redacted prefix of the name it was given (the SDK's own answer echoes the
        whole name) and naming the tools; None for a known tool (or a name that is no
        string, which the SDK refuses)."""
        name = params.get("name")
        if not isinstance(name, str) or name in self._arguments:
            return None
        text = f"unknown tool {_quoted(name)}; the tools are {', '.join(self._arguments)}"
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    def _refuse_unknown_arguments(self, params: Mapping[str, Any]) -> CallToolResult | None:
        """A tool error naming the arguments a call gave that its tool does not declare, or
        the required ones it left out (with the arguments the tool takes); None when the
        arguments are well named. A namespace word among them (``tenant``, ...) is told
        that the namespace comes from the server."""
        name = str(params.get("name"))
        allowed = self._arguments.get(name)
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if allowed is None or not isinstance(arguments, Mapping):
            return None
        extra = sorted(str(key) for key in arguments if key not in allowed)
        missing = sorted(self._required.get(name, frozenset()) - set(arguments))
        if not extra and not missing:
            return None
        parts = []
        if extra:
            shown = ", ".join(_quoted(key) for key in extra[:5])
            if len(extra) > 5:
                shown += f" and {len(extra) - 5} more"
            parts.append(f"unexpected argument(s) {shown}")
        if missing:
            parts.append(f"missing argument(s) {', '.join(map(repr, missing))}")
        takes = ", ".join(allowed) if allowed else "no arguments"
        text = f"{name}: {'; '.join(parts)}; {name} takes {takes}"
        if any(key.lower() in _NAMESPACE_WORDS for key in extra):
            text += (
                "; the namespace is fixed by the server (its configuration or your token) and "
                "is never a tool argument"
            )
        text += "; nothing was done"
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    def _refuse_mistyped_arguments(self, params: Mapping[str, Any]) -> CallToolResult | None:
        """A one-line tool error naming each argument whose value does not have the type
        its tool declares (the expected type and what was given), or None when they all do.
        Checked strictly, as JSON values: ``true`` is no integer and ``"5"`` no number; an
        integral float (``5.0``) is an integer, as in JSON Schema."""
        name = str(params.get("name"))
        hints = self._hints.get(name)
        arguments = params.get("arguments")
        if hints is None or not isinstance(arguments, Mapping):
            return None
        wrong = [
            f"argument {key!r} must be {_expected(hints[key])}, got {_given_as(value, hints[key])}"
            for key, value in arguments.items()
            if key in hints and not _fits(value, hints[key])
        ]
        if not wrong:
            return None
        text = f"{name}: {'; '.join(wrong)}; nothing was done"
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    @staticmethod
    def _caller() -> Caller:
        caller = _CALLER.get()
        if caller is None:  # only reachable if the middleware was bypassed
            raise ToolError("unauthenticated request")
        return caller

    async def _typed(self, call: Awaitable[T], tool: str, **names: str) -> T:
        """Await ``call`` (made by ``tool``); an error raised on purpose becomes a tool
        error with its message in the tool's words (:func:`_error_text`; ``names`` maps the
        engine's parameter names to ``tool``'s arguments), redacted and bounded."""
        try:
            return await call
        except (MemoryLedgerError, ValueError) as e:
            raise ToolError(_error_text(e, self._arguments.get(tool, ()), names)) from None

    async def _reader(self, caller: Caller) -> AsyncMemorySession:
        key = (caller.namespace.key(), caller.label)
        async with self._reader_lock:
            reader = self._readers.get(key)
            if reader is None:
                session_id = caller.prefix + uuid.uuid4().hex
                reader = await self.memory.session(caller.namespace, session_id)
                self._readers[key] = reader
            return reader

    def _flush_soon(self, caller: Caller, reader: AsyncMemorySession) -> None:
        key = (caller.namespace.key(), caller.label)
        running = self._flushing.get(key)
        if running is None or running.done():
            self._flushing[key] = asyncio.get_running_loop().create_task(self._flush(reader))

    @staticmethod
    async def _flush(reader: AsyncMemorySession) -> None:
        await asyncio.sleep(READ_FLUSH_SECONDS)
        try:
            await reader.flush_reads()
        except Exception:  # noqa: BLE001 - read records may be lost, never commands
            pass

    # Tools ---------------------------------------------------------------------------------

    async def remember(
        self,
        statement: str,
        subject: str | None = None,
        predicate: str | None = None,
        value: str | None = None,
    ) -> CallToolResult:
        """Store one self-contained statement in long-term memory (durable on return).

        Give subject + predicate + value for a keyed fact ("Alice" / "lives in" /
        "Porto"): a later remember of the same subject and predicate supersedes it.
        Remembering an active statement again reinforces it.
        """
        caller = self._caller()
        done = await self._typed(
            self.memory.direct(caller.prefix).remember(
                caller.namespace, statement, subject=subject, predicate=predicate, value=value
            ),
            "remember",
        )
        superseded = [str(m) for m in done.report.superseded]
        text = f"remembered {done.memory_id}: {' '.join(statement.split())}"
        if superseded:
            text += f" (supersedes {', '.join(superseded)})"
        return _result(
            text,
            {
                "memory_id": done.memory_id,
                "superseded": superseded,
                "session_id": done.session_id,
                "position": done.position,
            },
        )

    async def remember_many(self, statements: list[str]) -> CallToolResult:
        """Store several self-contained statements at once, as ONE command: all of them or,
        when one is refused (empty, secret-shaped), none (durable on return)."""
        caller = self._caller()
        try:
            done = await self.memory.direct(caller.prefix).remember_many(
                caller.namespace, statements
            )
        except (MemoryLedgerError, ValueError) as e:
            if getattr(e, "reason_code", None) == "empty_batch":  # the engine says "ops"
                raise ToolError("statements holds no statement") from None
            text = _error_text(e, ("statements",), {"ops": "statements"})
            raise ToolError(
                re.sub(r"\bops\[(\d+)\]\.statement\b", r"statements[\1]", text)
            ) from None
        ids = [str(outcome.memory_id) for outcome in done.outcomes]
        superseded = [str(m) for m in done.report.superseded]
        text = f"remembered {len(ids)} statements in one command ({done.session_id})"
        return _result(
            text,
            {
                "memory_ids": ids,
                "superseded": superseded,
                "session_id": done.session_id,
                "position": done.position,
            },
        )

    async def recall(
        self,
        query: str,
        k: int = 5,
        about: str | None = None,
        attribute: str | None = None,
        as_of: int | str | None = None,
    ) -> CallToolResult:
        """Recall the memories that best match ``query`` (at most ``k``; a ``k`` above the
        server's ``recall_max_k``, 50 unless configured, is refused naming the maximum).

        ``about`` (a subject) and ``attribute`` (a predicate) from the memory map rank
        matching memories first; they never filter. ``as_of`` (a ledger position, as an
        integer or its digits, or an ISO 8601 time with a zone, ``Z`` or ``+02:00``) answers
        as memory stood then (lexical).
        """
        caller = self._caller()
        if as_of is not None:
            result = await self._typed(
                self.memory.run(
                    _recall_as_of, self.memory.engine, caller.namespace, query, k, as_of
                ),
                "recall",
                at="as_of",
            )
        else:
            # A namespace that was erased cannot open its reader session: a typed tool error.
            reader = await self._typed(self._reader(caller), "recall")
            result = await self._typed(
                reader.recall_scoped(query, None, RecallScope(), about, attribute, k), "recall"
            )
            self._flush_soon(caller, reader)
        lines = [
            f"{hit.rank}. {hit.statement} (id {hit.memory_id}, score {hit.score:.3f}"
            + (f", occurred {hit.occurred_at:%Y-%m-%d}" if hit.occurred_at else "")
            + ")"
            for hit in result
        ]
        text = "\n".join(lines) if lines else f"no memory matches {_quoted(query)}"
        semantic = result.semantic.state if result.semantic is not None else "off"
        return _result(
            text,
            {
                "query": _short(query, QUERY_ECHO_CHARS),
                "position": result.position,
                "semantic": semantic,
                "results": [
                    {
                        "rank": hit.rank,
                        "memory_id": hit.memory_id,
                        "statement": hit.statement,
                        "subject": hit.subject,
                        "predicate": hit.predicate,
                        "score": hit.score,
                        "evidence": list(hit.evidence),
                        "occurred_at": hit.occurred_at,
                    }
                    for hit in result
                ],
            },
        )

    async def forget(self, memory: str) -> CallToolResult:
        """Forget one memory. Pass its id as ``memory`` (the id recall returned) whenever you
        have one; words name only the one memory holding every one of them, and a call
        whose words name none or several is refused, listing candidate ids to retry with.
        A forgotten memory is never recalled again (its history stays auditable)."""
        caller = self._caller()
        done = await self._typed(
            self.memory.direct(caller.prefix).forget(caller.namespace, memory),
            "forget",
            statement_or_id="memory",
        )
        return _result(
            f"forgot {done.memory_id}",
            {"memory_id": done.memory_id, "session_id": done.session_id, "position": done.position},
        )

    async def correct(
        self, statement: str, target: str | None = None, subject: str | None = None
    ) -> CallToolResult:
        """Replace what memory says with ``statement``: the memory ``target`` is superseded
        and the new statement keeps its subject and predicate. Pass ``target`` (the id
        recall returned) whenever you have one. Without it, only a memory about the same
        subject and attribute with another value is replaced ("Alice lives in Porto."
        replaces "Alice lives in Lisbon.", never Bob's city); ``subject`` (e.g. "Alice")
        says whose memory it is. When memories are near but none clearly matches, the call
        is refused listing candidate ids; when none is near, the statement is stored."""
        caller = self._caller()
        done = await self._typed(
            self.memory.direct(caller.prefix).correct(
                caller.namespace, statement, target=target, subject=subject
            ),
            "correct",
        )
        text = f"now {done.memory_id}: {' '.join(statement.split())}"
        if done.target is not None:
            text += f" (replaces {done.target})"
        return _result(
            text,
            {
                "memory_id": done.memory_id,
                "replaced": done.target,
                "session_id": done.session_id,
                "position": done.position,
            },
        )

    async def pin(self, memory: str) -> CallToolResult:
        """Pin one memory: it is never pruned. Pass its id as ``memory`` (the id recall
        returned) whenever you have one; words name only the one memory holding every one
        of them."""
        caller = self._caller()
        done = await self._typed(
            self.memory.direct(caller.prefix).pin(caller.namespace, memory),
            "pin",
            statement_or_id="memory",
        )
        return _result(
            f"pinned {done.memory_id}",
            {"memory_id": done.memory_id, "session_id": done.session_id, "position": done.position},
        )

    async def explain(self, memory_id: str) -> str:
        """The lineage of one memory (its id, or a prefix of 4+ hex digits): the evidence and
        the command or extraction it came from, every change since (with the session, e.g.
        ``mcp-<client>-...``, that made it) and how often it was recalled."""
        caller = self._caller()
        reader = self._readers.get((caller.namespace.key(), caller.label))
        if reader is not None:  # this caller's own recalls show up at once
            await self._typed(reader.flush_reads(), "explain")
        return await self._typed(
            self.memory.run(_explain_in, self.memory.engine, caller.namespace, memory_id),
            "explain",
            text="memory_id",
        )

    async def memory_map(self) -> str:
        """The subjects and attributes memory holds (with counts): use them as recall's
        ``about`` and ``attribute``."""
        caller = self._caller()
        return await self._typed(self.memory.memory_map(caller.namespace), "memory_map")

    async def _map_resource(self) -> str:
        return await self.memory_map()

    # Serving -------------------------------------------------------------------------------

    def http_app(self, host: str = "127.0.0.1", path: str = "/mcp") -> ASGIApp:
        """The streamable HTTP app at ``path``, behind the bearer-token gate.

        :raises ValueError: this server has no tokens (it was made for stdio).
        """
        if self.tokens is None:
            raise ValueError("an HTTP server needs bearer tokens")
        app = self.mcp.streamable_http_app(streamable_http_path=path, json_response=True, host=host)
        return TokenGate(app, self.tokens)

    async def serve_stdio(self) -> None:
        """Serve one client over this process's stdin/stdout until it disconnects.

        Unlike the SDK's own stdio loop, which silently drops a line its JSON parser refuses,
        every line is answered: a line that is no JSON gets a JSON-RPC parse error (code
        -32700, id null), and a JSON string holding a lone surrogate escape (``"\\ud800"``)
        reaches the tools with U+FFFD in its place.
        """
        try:
            lowlevel = _lowlevel_server(self.mcp)
            stdin = getattr(sys.stdin, "buffer", None)
            if lowlevel is None or stdin is None:
                await self.mcp.run_stdio_async()
            else:
                await _serve_stdio_lines(lowlevel, stdin)
        finally:
            await self.aclose()

    async def serve_http(
        self,
        host: str,
        port: int,
        *,
        on_ready: Callable[[str], None] | None = None,
        sock: socket.socket | None = None,
    ) -> None:
        """Serve streamable HTTP on ``host:port`` (path ``/mcp``) until cancelled;
        ``on_ready(url)`` is called once it listens. ``sock``: a socket already bound to
        that address (``memory-ledger mcp --http`` binds it first, refusing a bad address
        in words), served on instead of binding."""
        import uvicorn

        config = uvicorn.Config(
            self.http_app(host),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="on",
        )
        server = uvicorn.Server(config)

        async def announce() -> None:
            while not server.started and not server.should_exit:
                await asyncio.sleep(0.05)
            if server.started and on_ready is not None:
                on_ready(f"http://{host}:{port}/mcp")

        watcher = asyncio.get_running_loop().create_task(announce())
        try:
            await server.serve(sockets=None if sock is None else [sock])
        finally:
            watcher.cancel()
            await self.aclose()

    async def aclose(self) -> None:
        """Flush and close the recall sessions (the engine stays open)."""
        for task in self._flushing.values():
            task.cancel()
        readers, self._readers = list(self._readers.values()), {}
        for reader in readers:
            try:
                await reader.aclose()
            except Exception as e:  # noqa: BLE001 - shutting down: say so, go on
                print(f"memory-ledger mcp: closing a session failed: {e}", file=sys.stderr)


class TokenGate:
    """ASGI middleware: an HTTP request must carry ``Authorization: Bearer <token>`` with a
    token of the registry, else it is answered 401 with an empty body (and nothing about
    why). A known token becomes the request's authenticated user, carrying its namespace;
    the token itself is kept nowhere (the user's ``token`` field holds its digest prefix)."""

    def __init__(self, app: ASGIApp, tokens: TokenRegistry) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        entry = None
        for key, value in scope.get("headers", ()):
            if key.lower() == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer" and token.strip():
                    entry = self.tokens.lookup(token.strip())
                break
        if entry is None:
            await send(
                {
                    "type": "http.response.start",
                    "status": 401,
                    "headers": [(b"www-authenticate", b"Bearer"), (b"content-length", b"0")],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return
        access = AccessToken(
            token=entry.sha256[:12],
            client_id=entry.name,
            scopes=[],
            claims={"namespace": entry.namespace},
        )
        scope = dict(scope)
        scope["user"] = AuthenticatedUser(access)
        scope["auth"] = AuthCredentials([])
        await self.app(scope, receive, send)


def _lowlevel_server(mcp: MCPServer[Any]) -> Server[Any] | None:
    """The SDK's low-level server behind ``mcp``: what ``MCPServer.run_stdio_async`` runs
    over the stdio streams. The SDK has no public accessor for it, so this reads the private
    attribute ``_lowlevel_server`` (SDK 2.x) and is the only place that does; None when a
    later SDK keeps it elsewhere (then ``serve_stdio`` falls back to ``run_stdio_async``,
    losing only the handling of unparsable lines)."""
    found = getattr(mcp, "_lowlevel_server", None)
    return found if isinstance(found, Server) else None


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _stdio_line(line: str) -> str | None:
    """The JSON-RPC text to hand the SDK for one line read from stdin: the line itself, or,
    when its JSON decodes to text holding lone surrogates (which the SDK's parser refuses),
    the message re-serialised with U+FFFD in their place; None when the line is no JSON (or
    JSON nested past the recursion limit: answered as a parse error, never a dead server)."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError):  # a line nested too deeply killed the server
        return None
    if "\\u" not in line:  # a lone surrogate can only come from an escape
        return line
    text = json.dumps(message, ensure_ascii=False)
    if not _LONE_SURROGATE.search(text):
        return line
    return _LONE_SURROGATE.sub("\ufffd", text)


class _StdinLines:
    """The lines of a binary stdin as UTF-8 text (undecodable bytes become U+FFFD), each
    passed through :func:`_stdio_line`; blank lines are skipped and a line that is no JSON
    is answered with a parse error on ``replies`` (set once the transport is up)."""

    def __init__(self, source: BinaryIO) -> None:
        self.source = source
        self.replies: Any = None
        self.ready = anyio.Event()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for raw in anyio.wrap_file(self.source):
            line = raw.decode("utf-8", errors="replace")
            if not line.strip():
                continue
            usable = _stdio_line(line)
            if usable is not None:
                yield usable
                continue
            await self.ready.wait()
            error = JSONRPCError(
                jsonrpc="2.0", id=None, error=ErrorData(code=PARSE_ERROR, message="Parse error")
            )
            await self.replies.send(SessionMessage(error))


async def _serve_stdio_lines(lowlevel: Server[Any], source: BinaryIO) -> None:
    """Run ``lowlevel`` as ``MCPServer.run_stdio_async`` does, over the SDK's public
    ``stdio_server`` (which keeps stdout's handling), reading requests from ``source``
    through :class:`_StdinLines`."""
    lines = _StdinLines(source)
    # stdio_server only iterates its stdin (``async for line in stdin``).
    async with stdio_server(stdin=cast("anyio.AsyncFile[str]", lines)) as (read, write):
        lines.replies = write
        lines.ready.set()
        await lowlevel.run(read, write, lowlevel.create_initialization_options())


def _as_of_point(value: int | float | str) -> int | datetime:
    """The point ``as_of`` names: an integer (or an integral float, as JSON Schema counts
    integers) or a string of digits is a ledger position, other text an ISO 8601 time with
    a zone (:func:`~memory_ledger.replay.audit.points.parse_point`). Positions are not checked
    against the ledger head here (:func:`~memory_ledger.replay.audit.timetravel.as_of` does).

    :raises PositionOutOfRangeError: a negative position, as an integer or as text
        (``parameter`` ``"as_of"``).
    :raises NaiveTimestampError: a time without a zone (``parameter`` ``"as_of"``).
    :raises PointError: text that is neither; the message quotes at most a short, redacted
        prefix of it (:func:`_quoted`).
    """
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = value if isinstance(value, str) else str(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raw = text.strip()
    if raw.startswith("-") and raw[1:].isdigit():
        msg = (
            f"as_of position {_quoted(raw)} is negative; positions start at 1 "
            "(0 is the empty ledger)"
        )
        raise PositionOutOfRangeError(msg, parameter="as_of")
    try:
        return parse_point(text, "as_of")
    except NaiveTimestampError:
        msg = (
            f"as_of {_quoted(text.strip())} has no time zone; add an offset such as Z or "
            "+02:00 (e.g. 2024-03-05T10:00Z); a time without one is not guessed"
        )
        raise NaiveTimestampError(msg, parameter="as_of") from None
    except PointError as e:
        msg = (
            "as_of must be a ledger position (an integer, 0 or more) or an ISO 8601 time "
            f"with a zone (2024-03-05T10:00Z), got {_quoted(text)}"
        )
        raise PointError(msg, parameter="as_of", reason_code=e.reason_code) from None


@traced_method("recall", lambda engine, namespace, *_: (engine, namespace), text_at=2)
def _recall_as_of(
    engine: MemoryEngine, namespace: Namespace, query: str, k: int, point: int | float | str
) -> RecallResult:
    """Recall as memory stood at ``point`` (a position or a time, :func:`_as_of_point`);
    blocking.

    :raises InvalidArgumentError: ``k`` is not a positive integer (``parameter`` ``"k"``);
        ``RecallLimitError`` (``k_too_large``) when it is above ``recall_max_k``.
    :raises PointError: ``point`` is no position or time; ``PositionOutOfRangeError`` when
        it is negative or beyond the ledger head (``parameter`` ``"at"``).
    """
    check_recall_k(k, engine.config.recall_max_k)  # before the past is folded
    with as_of(engine, _as_of_point(point)) as then:
        return then.recall(namespace, query, k)


@traced_method("explain", lambda engine, namespace, *_: (engine, namespace))
def _explain_in(engine: MemoryEngine, namespace: Namespace, text: str) -> str:
    """The lineage text of memory ``text`` (id or prefix) of ``namespace``; a memory of
    another namespace is unknown, exactly like one that does not exist.

    :raises UnknownMemoryError: no memory of ``namespace`` has that id (or several share
        the prefix), quoting at most a short, redacted prefix of ``text``; ``reason_code``
        ``not_a_memory_id`` when ``text`` is no UUID or hex prefix at all.
    """
    try:
        found = lineage.explain(engine, text, namespace=namespace)
    except lineage.UnknownMemoryError as e:
        if e.reason_code == "not_a_memory_id":
            msg = f"{_quoted(text)} is not a memory id (a UUID or a prefix of 4+ hex digits)"
            raise UnknownMemoryError(msg, reason_code="not_a_memory_id") from None
        raise UnknownMemoryError(_quoted(text)) from None
    if found.namespace != namespace:
        raise UnknownMemoryError(_quoted(text))
    return render_text(found)
