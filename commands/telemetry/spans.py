"""One span per memory operation, and the operation-duration and records-written metrics.

An engine entry point wraps its work in :func:`traced` and hands its result to
:meth:`OperationSpan.result`::

    with traced(self, "remember", namespace, text=statement) as span:
        return span.result(DirectCommands(self).remember(namespace, statement))

The span is started under the host's current span (OpenTelemetry's context), named by the
operation's GenAI name (``create_memory``, ``search_memory``, ``update_memory``,
``delete_memory``: :data:`~memory_ledger.commands.telemetry.conventions.OPERATIONS`), kind
``INTERNAL`` (the store runs inside the host's process: no remote call is made), with the
attributes of :mod:`~memory_ledger.commands.telemetry.conventions`. Attributes are computed
only for a recording span. An error sets the span's status to ``ERROR`` with the typed
error's ``reason_code`` as its description and ``error.type``: never the message (it may
quote user text), and the exception is not recorded as a span event for the same reason.

Providers are the host's, through the API (the global ``TracerProvider`` and
``MeterProvider``, or those set on
:class:`~memory_ledger.commands.telemetry.options.Telemetry`): nothing here sets a
provider. Off (no OpenTelemetry in the process, or ``enabled = False``), :func:`traced`
returns a shared no-op whose ``result`` returns its argument.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from time import perf_counter
from types import ModuleType, TracebackType
from typing import Any, ParamSpec, TypeVar

from memory_ledger.commands.telemetry.content import door_text
from memory_ledger.commands.telemetry.conventions import (
    CONTENT_WITHHELD,
    ERROR_TYPE,
    GEN_AI_OPERATION_NAME,
    LEDGER_POSITION,
    MEMORY_QUERY_TEXT,
    MEMORY_RECORD_ID,
    MEMORY_RECORDS,
    MEMORY_STORE_ID,
    NAMESPACE_DIGEST,
    OPERATION,
    OPERATIONS,
    REASON_CODE,
    RECORDS_ADMITTED,
    RECORDS_RETURNED,
    Operation,
)
from memory_ledger.commands.telemetry.guard import telemetry_failed
from memory_ledger.commands.telemetry.options import Telemetry
from memory_ledger.ledger.errors import MemoryLedgerError
from memory_ledger.ledger.ids import Namespace

__all__ = [
    "OperationSpan",
    "catching_up",
    "direct_command",
    "error_type",
    "traced",
    "traced_method",
]

T = TypeVar("T")
P = ParamSpec("P")

_SEARCHES = frozenset({"recall", "session.recall", "langgraph.search"})

_NAMES: dict[str, dict[str, str]] = {
    operation: {GEN_AI_OPERATION_NAME: gen_ai, OPERATION: operation}
    for operation, gen_ai in OPERATIONS.items()
}
"""Each operation's name attributes, built once (the SDK copies what it is given)."""


class _Off:
    """The no-op of an operation when telemetry is off."""

    __slots__ = ()

    def __enter__(self) -> _Off:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def result(self, value: T) -> T:
        """``value``, unchanged."""
        return value

    def position(self, value: int) -> None:
        """Nothing."""


_OFF = _Off()


def traced(
    engine: object,
    operation: Operation,
    namespace: object = None,
    *,
    text: object = None,
    record_id: object = None,
) -> OperationSpan | _Off:
    """The span of one ``operation`` of ``engine`` (its ``telemetry`` attribute decides),
    as a context manager yielding an object whose ``result(value)`` records what the
    operation returned and returns it.

    :param namespace: the operation's namespace (recorded as its keyed digest only).
    :param text: the statement written or the query searched (recorded only with content
        on, after the secret door).
    :param record_id: the memory the operation names by id (``gen_ai.memory.record.id``;
        a text naming one is content, not an id).
    """
    telemetry = getattr(engine, "telemetry", None)
    if not isinstance(telemetry, Telemetry):
        return _OFF
    trace = telemetry.api()
    if trace is None:
        return _OFF
    return OperationSpan(engine, telemetry, trace, operation, namespace, text, record_id)


def direct_command(
    operation: Operation, *, text: bool = False
) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Trace a method ``(self, namespace, statement_or_id, ...)`` of an object holding its
    engine as ``_engine`` (``DirectCommands``: the one place a remember, forget, correct or
    pin is carried out, whichever surface asked: the engine, the async API, the MCP server).
    ``text``: the second argument is the statement written (content), else what the command
    names (an id is recorded as ``gen_ai.memory.record.id``); a ``target`` keyword is the
    memory a correction names."""

    def wrap(method: Callable[P, T]) -> Callable[P, T]:
        @functools.wraps(method)
        def run(*args: P.args, **kwargs: P.kwargs) -> T:
            engine = getattr(args[0], "_engine", None)
            namespace = args[1] if len(args) > 1 else kwargs.get("namespace")
            named = args[2] if len(args) > 2 else None
            record_id = kwargs.get("target") if text else named
            with traced(
                engine,
                operation,
                namespace,
                text=named if text else None,
                record_id=record_id,
            ) as span:
                return span.result(method(*args, **kwargs))

        return run

    return wrap


def traced_method(
    operation: Operation,
    where: Callable[..., tuple[object, object]],
    *,
    text_at: int | None = None,
) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Trace a function as ``operation``: ``where(*positional_arguments)`` gives the engine
    (its telemetry decides) and the namespace (recorded as its digest) of the call; the result
    goes through :meth:`OperationSpan.result`. ``text_at``: the index of the positional
    argument holding the query searched (content, recorded only with content on). The one
    wrapper of the operations a function carries out whole (a session's ``prune``, the
    engine's ``memory_map``)."""

    def wrap(method: Callable[P, T]) -> Callable[P, T]:
        @functools.wraps(method)
        def run(*args: P.args, **kwargs: P.kwargs) -> T:
            engine, namespace = where(*args)
            text = args[text_at] if text_at is not None and len(args) > text_at else None
            with traced(engine, operation, namespace, text=text) as span:
                return span.result(method(*args, **kwargs))

        return run

    return wrap


@contextmanager
def catching_up(engine: object, to: int | None) -> Iterator[None]:
    """Time one catch-up of ``engine``'s read models (``to``: its target, None for the
    ledger head): a catch-up to the head that returns marks the read models caught up
    (:data:`~memory_ledger.commands.telemetry.conventions.PROJECTION_LAG_SECONDS`), and
    with telemetry on its duration is recorded (``CATCH_UP_DURATION``)."""
    telemetry = getattr(engine, "telemetry", None)
    if not isinstance(telemetry, Telemetry):
        yield
        return
    start = perf_counter()
    failure: str | None = None
    try:
        yield
    except BaseException as e:
        failure = error_type(e)
        raise
    finally:
        if failure is None and to is None:
            telemetry.caught_up()
        if telemetry.api() is not None:
            attributes = {} if failure is None else {ERROR_TYPE: failure}
            try:
                histogram = telemetry.catch_up_histogram(engine)
                if histogram is not None:
                    histogram.record(perf_counter() - start, attributes)
            except Exception as e:  # noqa: BLE001 - telemetry never changes the operation
                telemetry_failed("metrics.record", e)


def error_type(exc: BaseException) -> str:
    """``error.type`` of ``exc``: a typed error's ``reason_code``, else the exception's
    fully qualified class name (never its message)."""
    if isinstance(exc, MemoryLedgerError):
        return str(exc.reason_code)
    cls = type(exc)
    return (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )


class OperationSpan:
    """The span and the duration measurement of one running operation (see the module)."""

    __slots__ = (
        "_engine",
        "_gen_ai",
        "_operation",
        "_record_id",
        "_namespace",
        "_recording",
        "_scope",
        "_span",
        "_start",
        "_telemetry",
        "_text",
        "_trace",
    )

    def __init__(
        self,
        engine: object,
        telemetry: Telemetry,
        trace: ModuleType,
        operation: Operation,
        namespace: object,
        text: object,
        record_id: object,
    ) -> None:
        self._engine, self._telemetry, self._trace = engine, telemetry, trace
        self._operation = operation
        self._gen_ai = OPERATIONS[operation]
        self._namespace, self._text, self._record_id = namespace, text, record_id
        self._span: Any = None
        self._recording = False
        self._scope: Any = None
        self._start = 0.0

    def __enter__(self) -> OperationSpan:
        trace = self._trace
        span: Any = None
        try:
            span = self._telemetry.tracer(trace).start_span(
                self._gen_ai, kind=trace.SpanKind.INTERNAL, attributes=_NAMES[self._operation]
            )
            recording = bool(span.is_recording())
            if recording:
                self._describe(span)
            if recording or span.get_span_context().is_valid:
                # current while it runs (a sampled-out span too: its children follow it);
                # the invalid span of an API without an SDK is not worth a context switch
                scope = trace.use_span(
                    span, end_on_exit=True, record_exception=False, set_status_on_exception=False
                )
                scope.__enter__()
                self._scope = scope
            self._span, self._recording = span, recording
        except Exception as e:  # noqa: BLE001 - telemetry never changes the operation
            telemetry_failed("span.start", e)
            if span is not None:
                try:
                    span.end()
                except Exception as again:  # noqa: BLE001
                    telemetry_failed("span.end", again)
        self._start = perf_counter()
        return self

    def _describe(self, span: Any) -> None:
        telemetry = self._telemetry
        store = telemetry.store_name()
        if store:
            span.set_attribute(MEMORY_STORE_ID, store)
        if isinstance(self._namespace, Namespace):
            span.set_attribute(NAMESPACE_DIGEST, telemetry.namespace_digest(self._namespace))
        if self._record_id is not None and not isinstance(self._record_id, str | bytes):
            span.set_attribute(MEMORY_RECORD_ID, str(self._record_id))
        if telemetry.content and self._operation in _SEARCHES and self._text is not None:
            query = door_text(self._text)
            if query is None:
                span.set_attribute(CONTENT_WITHHELD, "secret_detected")
            else:
                span.set_attribute(MEMORY_QUERY_TEXT, query)

    def result(self, value: T) -> T:
        """Record what the operation returned (ids, counts, ledger position and, with
        content on, the records) on a recording span; return ``value``."""
        span = self._span
        if span is not None and self._recording:
            try:
                self._describe_result(span, value)
            except Exception:  # noqa: BLE001 - telemetry never fails an operation
                try:
                    span.set_attribute(CONTENT_WITHHELD, "unreadable_result")
                except Exception as e:  # noqa: BLE001
                    telemetry_failed("span.attributes", e)
        return value

    def position(self, value: int) -> None:
        """Record ``value`` as the ledger position of the operation's last event written
        (for an operation whose result does not carry one, e.g. ``forget_all``'s count;
        0 or less: nothing was written, nothing recorded)."""
        span = self._span
        if value > 0 and span is not None and self._recording:
            try:
                span.set_attribute(LEDGER_POSITION, value)
            except Exception as e:  # noqa: BLE001 - telemetry never fails an operation
                telemetry_failed("span.attributes", e)

    def _describe_result(self, span: Any, value: object) -> None:
        position = getattr(value, "position", None)
        if position is None:
            position = (
                max(
                    getattr(value, "evidence_position", 0), getattr(value, "extraction_position", 0)
                )
                or None
            )
        if isinstance(position, int) and position > 0:
            span.set_attribute(LEDGER_POSITION, position)
        memory_id = getattr(value, "memory_id", None)
        if memory_id is not None:
            span.set_attribute(MEMORY_RECORD_ID, str(memory_id))
        results = getattr(value, "results", None)
        if isinstance(results, tuple):
            span.set_attribute(RECORDS_RETURNED, len(results))
        elif isinstance(value, list) and self._operation in _SEARCHES:
            span.set_attribute(RECORDS_RETURNED, len(value))
        admitted = _admitted(value)
        if admitted is not None:
            span.set_attribute(RECORDS_ADMITTED, admitted)
        if self._telemetry.content:
            self._records(span, value, memory_id, results)

    def _records(self, span: Any, value: object, memory_id: object, results: object) -> None:
        records: list[dict[str, object]] = []
        withheld = False
        if isinstance(results, tuple):
            for hit in results:
                content = door_text(getattr(hit, "statement", None))
                if content is None:
                    withheld = True
                    continue
                record: dict[str, object] = {"id": str(hit.memory_id), "content": content}
                score = getattr(hit, "score", None)
                if isinstance(score, int | float):
                    record["score"] = float(score)
                records.append(record)
        elif self._operation not in _SEARCHES and isinstance(self._text, str):
            content = door_text(self._text)
            if content is None:
                withheld = True
            else:
                record = {"content": content}
                if memory_id is not None:
                    record["id"] = str(memory_id)
                records.append(record)
        if withheld:
            span.set_attribute(CONTENT_WITHHELD, "secret_detected")
        if records:
            span.set_attribute(MEMORY_RECORDS, json.dumps(records, ensure_ascii=False))

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        seconds = perf_counter() - self._start
        span = self._span
        failure = error_type(exc) if exc is not None else None
        if failure is not None and span is not None and self._recording:
            try:
                span.set_attribute(ERROR_TYPE, failure)
                if isinstance(exc, MemoryLedgerError):
                    span.set_attribute(REASON_CODE, failure)
                span.set_status(self._trace.Status(self._trace.StatusCode.ERROR, failure))
            except Exception as e:  # noqa: BLE001 - telemetry never changes the operation
                telemetry_failed("span.status", e)
        if self._scope is not None:
            try:
                self._scope.__exit__(exc_type, exc, tb)  # ends the span: processors run
            except Exception as e:  # noqa: BLE001 - telemetry never changes the operation
                if e is not exc:
                    telemetry_failed("span.end", e)
        attributes = _NAMES[self._operation]
        if failure is not None:
            attributes = {**attributes, ERROR_TYPE: failure}
        try:
            histogram = self._telemetry.instruments(self._engine)
            if histogram is not None:
                histogram.record(seconds, attributes)
        except Exception as e:  # noqa: BLE001 - telemetry never changes the operation
            telemetry_failed("metrics.record", e)


def _admitted(value: object) -> int | None:
    """Memories a write admitted, read from its result (a direct command's, a batch's, a
    turn's, a reconciliation's), or None."""
    intent = getattr(value, "intent", None)
    if intent is not None:
        if intent not in ("remember", "correct"):
            return None
        return int(getattr(value, "memory_id", None) is not None)
    outcomes = getattr(value, "outcomes", None)
    if isinstance(outcomes, tuple):
        return len(outcomes)
    candidates = getattr(value, "candidates", None)
    activated = getattr(value, "activated", None)
    if isinstance(activated, tuple):
        return len(activated)
    if isinstance(candidates, int) and hasattr(value, "extraction_position"):
        return candidates
    return None
