"""Budgeted context assembly: providers -> items -> rank -> dedupe -> budget -> render.

Source: the A3S Code "Context" document. Context is resolved once, at the start of a turn:
every registered :class:`ContextProvider` is queried concurrently with the turn's
:class:`ContextQuery`, their :class:`ContextItem` results are deduplicated, ranked, cut to an
:class:`AssemblyPolicy` budget and rendered into one plain-text block
(:class:`AssembledContext`).

Rules, in pipeline order:

* **Providers.** Queried concurrently on a ``ThreadPoolExecutor`` (one worker per provider,
  a fresh pool per :meth:`ContextAssembler.assemble` call), each call bounded by
  ``timeout_s`` from submission. A ``"fail_open"`` provider (the default) that raises or times
  out is skipped and reported in :attr:`AssembledContext.skipped`; a ``"fail_closed"`` one
  makes ``assemble`` raise :class:`ContextProviderError` naming it (the turn fails). Empty
  results are dropped. A timed-out call cannot be killed: its worker thread is abandoned and
  finishes (or not) on its own.
* **Dedupe.** Items whose normalized text (:func:`ledger.ids.normalize_statement`: NFKC,
  casefold, whitespace collapsed, trailing punctuation stripped) is equal are one item. The
  kept one is required over non-required, then higher relevance, then earlier source
  (provider order), then smaller ``item_id``. The others are dropped as ``"duplicate"``.
* **Rank.** Required items first, then relevance descending; ties break by
  ``(source, item_id)``.
* **Budget.** Required items (e.g. AGENTS.md instructions) are always kept, even beyond the
  budgets, and count against them. The remaining items are taken greedily in rank order; an
  item that would exceed ``max_items`` or ``max_tokens`` is dropped as ``"over_budget"``, one
  that would exceed ``max_items_per_source`` or ``max_tokens_per_source`` as
  ``"source_limit"`` (global limits are checked first), and selection continues with the next
  (possibly smaller) item.
* **Render.** Selected items grouped by source, sources in provider order, items in rank
  order: ``"## <source>\\n- <text>\\n..."``, groups separated by a blank line; continuation
  lines of a multi-line text are indented by two spaces.

Tokens are counted by a pluggable ``token_counter`` (``text -> int``): by default
:func:`memory_ledger.projections.tokens.estimate_tokens` (one token per CJK character,
otherwise about four characters per token), re-exported here. Give the assembler the
engine's or session's counter (``ContextAssembler(..., token_counter=session.token_counter)``)
so the memory map and context budgets count alike.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Literal, Protocol, runtime_checkable

import msgspec

from memory_ledger.commands.context.knowledge_binding import KnowledgeBinding, KnowledgeBindingError
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.ledger.arguments import check_timeout
from memory_ledger.ledger.errors import InvalidArgumentError, InvalidArgumentTypeError
from memory_ledger.ledger.ids import normalize_statement
from memory_ledger.projections.tokens import TokenCounter, estimate_tokens

__all__ = [
    "BALANCED",
    "DEFAULT_TIMEOUT_S",
    "AssembledContext",
    "AssemblyPolicy",
    "ContextAssembler",
    "ContextItem",
    "ContextProvider",
    "ContextProviderError",
    "ContextQuery",
    "DropReason",
    "DroppedItem",
    "FailureMode",
    "SkippedProvider",
    "StaticContextProvider",
    "assemble_items",
    "estimate_tokens",
    "render_context",
]

FailureMode = Literal["fail_open", "fail_closed"]
"""What a provider's failure does: ``"fail_open"`` skips it, ``"fail_closed"`` fails the turn."""

DropReason = Literal["duplicate", "over_budget", "source_limit"]
"""Why an item was not selected."""

_FAILURE_MODES: frozenset[str] = frozenset({"fail_open", "fail_closed"})

DEFAULT_TIMEOUT_S = 5.0
"""Default bound on each provider call, in seconds (this module's choice, not A3S's)."""


class ContextItem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One piece of candidate context from a provider.

    ``source`` is the provider name (the assembler stamps it), ``kind`` e.g. ``"memory"``,
    ``"instruction"`` or ``"resource"``, ``relevance`` a finite score in ``[0, 1]``.
    ``required`` items are always selected. Memory items carry ``memory_id`` and ``revision``
    so the session can record which memories were admitted to the turn.

    Raises :class:`InvalidArgumentError` (a ``ValueError``) when ``relevance`` is not a
    finite number in ``[0, 1]``.
    """

    item_id: str
    source: str
    kind: str
    text: str
    relevance: float
    required: bool = False
    memory_id: str | None = None
    revision: int | None = None
    metadata: dict[str, str] = {}

    def __post_init__(self) -> None:
        if not math.isfinite(self.relevance) or not 0.0 <= self.relevance <= 1.0:
            msg = (
                f"context item {self.item_id!r}: relevance must be in [0, 1], "
                f"got {self.relevance!r}"
            )
            raise InvalidArgumentError(msg, parameter="relevance")


class ContextQuery(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """What every provider is asked at the start of a turn: the session, turn and query text."""

    session_id: str
    turn_id: int
    query: str


class AssemblyPolicy(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Budgets of one assembly: items and estimated tokens, globally and per source.

    All four limits are non-negative integers (:class:`InvalidArgumentError`, a
    ``ValueError``, naming the limit, otherwise). Required items may exceed them; see the
    module docstring.
    """

    max_items: int
    max_tokens: int
    max_items_per_source: int
    max_tokens_per_source: int

    def __post_init__(self) -> None:
        for name in ("max_items", "max_tokens", "max_items_per_source", "max_tokens_per_source"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                msg = f"assembly policy {name} must be a non-negative int, got {value!r}"
                raise InvalidArgumentError(msg, parameter=name)


BALANCED = AssemblyPolicy(
    max_items=12, max_tokens=4000, max_items_per_source=6, max_tokens_per_source=2500
)
"""A3S Code Context: balanced policy 12 items / 4,000 tokens, 6 items / 2,500 tokens per source
(so a single provider cannot crowd out the others)."""


class DroppedItem(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """An input item that was not selected: its id, source and :data:`DropReason`."""

    item_id: str
    source: str
    reason: DropReason


class SkippedProvider(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A fail-open provider that raised or timed out: its name, the error type and message.

    A timeout is reported with ``error_type`` ``"TimeoutError"``.
    """

    provider: str
    error_type: str
    message: str


class AssembledContext(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The resolved context of one turn.

    ``items`` are the selected items in rank order (required first); ``dropped`` the other
    input items (duplicates in rank order, then budget drops in rank order); ``skipped`` the
    fail-open providers that failed, in provider order; ``estimated_tokens`` the sum of the
    selected items' text estimates (the quantity the budgets govern; headings in ``rendered``
    are not counted); ``rendered`` the plain-text block (empty when nothing was selected).
    """

    items: tuple[ContextItem, ...]
    dropped: tuple[DroppedItem, ...]
    skipped: tuple[SkippedProvider, ...]
    estimated_tokens: int
    rendered: str


class ContextProviderError(MemoryLedgerError, RuntimeError):
    """A fail-closed context provider raised or timed out; the turn fails.

    ``provider`` names it; ``error_type`` and ``message`` describe the failure (``error_type``
    is ``"TimeoutError"`` for a timeout). The original exception is the ``__cause__``.
    """

    reason_code = "context_provider_failed"

    def __init__(self, provider: str, error_type: str, message: str) -> None:
        super().__init__(f"context provider {provider!r} failed: {error_type}: {message}")
        self.provider = provider
        self.error_type = error_type
        self.message = message


@runtime_checkable
class ContextProvider(Protocol):
    """A source of context items, queried once per turn (possibly from a worker thread).

    ``query`` is synchronous and may raise; what a failure does is ``failure_mode``
    (``"fail_open"`` by default: a provider object without the attribute is fail-open).
    """

    @property
    def name(self) -> str:
        """Unique provider name; becomes the ``source`` of its items."""
        ...

    @property
    def failure_mode(self) -> FailureMode:
        """``"fail_open"`` (skip and report on failure) or ``"fail_closed"`` (fail the turn)."""
        ...

    def query(self, q: ContextQuery) -> Sequence[ContextItem]:
        """Items relevant to ``q``; may be empty, may raise."""
        ...


class StaticContextProvider:
    """A provider returning fixed items for every query (for hosts and tests).

    Items are returned with their ``source`` set to ``name``.
    """

    def __init__(
        self,
        name: str,
        items: Sequence[ContextItem] = (),
        failure_mode: FailureMode = "fail_open",
    ) -> None:
        if failure_mode not in _FAILURE_MODES:
            msg = f"failure_mode must be 'fail_open' or 'fail_closed', got {failure_mode!r}"
            raise InvalidArgumentError(msg, parameter="failure_mode")
        self._name = name
        self._failure_mode: FailureMode = failure_mode
        self._items = tuple(
            item if item.source == name else msgspec.structs.replace(item, source=name)
            for item in items
        )

    @property
    def name(self) -> str:
        return self._name

    @property
    def failure_mode(self) -> FailureMode:
        return self._failure_mode

    def query(self, q: ContextQuery) -> Sequence[ContextItem]:
        return self._items


def _failure_mode_of(provider: ContextProvider) -> FailureMode:
    mode = getattr(provider, "failure_mode", "fail_open")
    if mode == "fail_open":
        return "fail_open"
    if mode == "fail_closed":
        return "fail_closed"
    msg = f"context provider {provider.name!r}: unknown failure_mode {mode!r}"
    raise InvalidArgumentError(msg, parameter="failure_mode")


def _call_provider(provider: ContextProvider, name: str, q: ContextQuery) -> list[ContextItem]:
    """Run one provider (in a worker thread), check its result and stamp ``source``."""
    result = provider.query(q)
    if result is None or isinstance(result, str | bytes):
        msg = f"provider returned {type(result).__name__}, expected a sequence of ContextItem"
        raise TypeError(msg)
    items: list[ContextItem] = []
    for item in result:
        if not isinstance(item, ContextItem):
            msg = f"provider returned a {type(item).__name__}, expected ContextItem"
            raise TypeError(msg)
        items.append(item if item.source == name else msgspec.structs.replace(item, source=name))
    return items


class ContextAssembler:
    """Resolves a turn's context from ``providers`` under ``policy``.

    Providers are queried concurrently, each bounded by ``timeout_s`` seconds; see the module
    docstring for the failure, dedupe, rank, budget and render rules. Provider names must be
    unique; their order is the source order. ``token_counter`` (``text -> int``, default
    :func:`estimate_tokens`) sizes items against the policy's token budgets. A knowledge
    provider (one exposing a ``KnowledgeBinding`` as ``binding``) is refused: a binding
    belongs to a session.

    :raises InvalidArgumentError: (a ``ValueError``) ``timeout_s`` is not a positive finite
        number, a provider name repeats, or a failure mode is unknown; names the parameter.
    :raises InvalidArgumentTypeError: ``token_counter`` is not callable.
    :raises KnowledgeBindingError: ``provider_refused`` for a knowledge provider.
    """

    def __init__(
        self,
        providers: Sequence[ContextProvider],
        policy: AssemblyPolicy = BALANCED,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        *,
        token_counter: TokenCounter = estimate_tokens,
    ) -> None:
        check_timeout("timeout_s", timeout_s, allow_none=False)
        if timeout_s <= 0:
            msg = f"timeout_s must be a positive number, got {timeout_s!r}"
            raise InvalidArgumentError(msg, parameter="timeout_s", reason_code="out_of_range")
        if not callable(token_counter):
            msg = f"token_counter must be a callable text -> int, got {token_counter!r}"
            raise InvalidArgumentTypeError(msg, parameter="token_counter")
        for provider in providers:
            if isinstance(getattr(provider, "binding", None), KnowledgeBinding):
                msg = (
                    "a knowledge provider cannot join the generic provider list (its binding "
                    "would not be recorded); bind it with engine.session(..., knowledge=...)"
                )
                raise KnowledgeBindingError("provider_refused", msg)
        names = [p.name for p in providers]
        seen: set[str] = set()
        for name in names:
            if name in seen:
                msg = f"duplicate context provider name {name!r}"
                raise InvalidArgumentError(msg, parameter="providers")
            seen.add(name)
        self._providers = tuple(providers)
        self._names = tuple(names)
        self._modes = tuple(_failure_mode_of(p) for p in providers)
        self.policy = policy
        self.timeout_s = timeout_s
        self.token_counter = token_counter

    @property
    def provider_names(self) -> tuple[str, ...]:
        """Provider names in source order."""
        return self._names

    def assemble(self, q: ContextQuery) -> AssembledContext:
        """Query every provider concurrently and assemble the turn's context.

        Raises :class:`ContextProviderError` for the first fail-closed provider (in provider
        order) that raised or timed out.
        """
        outcomes = self._query_all(q)
        gathered: list[ContextItem] = []
        skipped: list[SkippedProvider] = []
        for name, mode, outcome in zip(self._names, self._modes, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                error_type, message = type(outcome).__name__, str(outcome)
                if mode == "fail_closed":
                    raise ContextProviderError(name, error_type, message) from outcome
                skipped.append(SkippedProvider(name, error_type, message))
            else:
                gathered.extend(outcome)
        assembled = assemble_items(gathered, self.policy, token_counter=self.token_counter)
        return msgspec.structs.replace(assembled, skipped=tuple(skipped))

    def _query_all(self, q: ContextQuery) -> list[list[ContextItem] | BaseException]:
        if not self._providers:
            return []
        pool = ThreadPoolExecutor(
            max_workers=len(self._providers), thread_name_prefix="context-provider"
        )
        try:
            futures: list[Future[list[ContextItem]]] = [
                pool.submit(_call_provider, provider, name, q)
                for provider, name in zip(self._providers, self._names, strict=True)
            ]
            deadline = time.monotonic() + self.timeout_s
            outcomes: list[list[ContextItem] | BaseException] = []
            for name, future in zip(self._names, futures, strict=True):
                try:
                    outcomes.append(future.result(timeout=max(0.0, deadline - time.monotonic())))
                except FutureTimeoutError:
                    future.cancel()
                    outcomes.append(
                        TimeoutError(f"provider {name!r} did not answer within {self.timeout_s}s")
                    )
                except Exception as exc:  # reported per failure mode
                    outcomes.append(exc)
            return outcomes
        finally:
            # Never wait for an abandoned (timed-out) provider call.
            pool.shutdown(wait=False, cancel_futures=True)


def _rank_key(item: ContextItem, position: int) -> tuple[bool, float, str, str, int]:
    return (not item.required, -item.relevance, item.source, item.item_id, position)


def assemble_items(
    items: Sequence[ContextItem],
    policy: AssemblyPolicy = BALANCED,
    *,
    token_counter: TokenCounter = estimate_tokens,
) -> AssembledContext:
    """Dedupe, rank, budget and render ``items`` (already gathered; no providers involved).

    Item sizes are ``token_counter(item.text)``. Source order is the order in which sources
    first appear in ``items``. Every input item ends up in exactly one of ``items`` or
    ``dropped`` of the result; ``skipped`` is empty.
    """
    source_index: dict[str, int] = {}
    for item in items:
        source_index.setdefault(item.source, len(source_index))

    # Dedupe: best per normalized text.
    best: dict[str, int] = {}
    for position, item in enumerate(items):
        key = normalize_statement(item.text)
        current = best.get(key)
        if current is None or _dedupe_key(item, position, source_index) < _dedupe_key(
            items[current], current, source_index
        ):
            best[key] = position
    kept_positions = set(best.values())
    duplicates = sorted(
        (p for p in range(len(items)) if p not in kept_positions),
        key=lambda p: _rank_key(items[p], p),
    )
    ranked = sorted(kept_positions, key=lambda p: _rank_key(items[p], p))

    # Budget.
    total_items = 0
    total_tokens = 0
    source_items: dict[str, int] = {}
    source_tokens: dict[str, int] = {}
    selected: list[ContextItem] = []
    dropped = [DroppedItem(items[p].item_id, items[p].source, "duplicate") for p in duplicates]
    for position in ranked:
        item = items[position]
        tokens = token_counter(item.text)
        s_items = source_items.get(item.source, 0)
        s_tokens = source_tokens.get(item.source, 0)
        if not item.required:
            reason: DropReason | None = None
            if total_items + 1 > policy.max_items or total_tokens + tokens > policy.max_tokens:
                reason = "over_budget"
            elif (
                s_items + 1 > policy.max_items_per_source
                or s_tokens + tokens > policy.max_tokens_per_source
            ):
                reason = "source_limit"
            if reason is not None:
                dropped.append(DroppedItem(item.item_id, item.source, reason))
                continue
        selected.append(item)
        total_items += 1
        total_tokens += tokens
        source_items[item.source] = s_items + 1
        source_tokens[item.source] = s_tokens + tokens

    return AssembledContext(
        items=tuple(selected),
        dropped=tuple(dropped),
        skipped=(),
        estimated_tokens=total_tokens,
        rendered=render_context(selected, list(source_index)),
    )


def _dedupe_key(
    item: ContextItem, position: int, source_index: dict[str, int]
) -> tuple[bool, float, int, str, int]:
    """Smaller is better: required, higher relevance, earlier source, smaller id, earlier."""
    return (
        not item.required,
        -item.relevance,
        source_index[item.source],
        item.item_id,
        position,
    )


def render_context(items: Sequence[ContextItem], source_order: Sequence[str] = ()) -> str:
    """Render ``items`` as ``"## <source>"`` groups of ``"- <text>"`` lines.

    Groups follow ``source_order`` (sources not in it follow, in first-appearance order);
    items keep their order within a group. Continuation lines of a multi-line text are
    indented by two spaces. Returns ``""`` for no items; otherwise ends with a newline.
    """
    groups: dict[str, list[str]] = {name: [] for name in source_order}
    for item in items:
        lines = item.text.strip().splitlines() or [""]
        entry = "- " + lines[0] + "".join("\n  " + line for line in lines[1:])
        groups.setdefault(item.source, []).append(entry)
    blocks = [
        f"## {source}\n" + "\n".join(entries) + "\n"
        for source, entries in groups.items()
        if entries
    ]
    return "\n".join(blocks)
