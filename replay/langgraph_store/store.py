"""``LedgerStore``: a LangGraph ``BaseStore`` whose every put and delete is an engine command.

The tenant is an engine :class:`~memory_ledger.ledger.ids.Namespace` bound when the store
is constructed; LangGraph namespace tuples live inside it and never choose it. Reads in a
batch see the store as it was before the batch's writes (as LangGraph's ``InMemoryStore``);
the writes of a batch are collapsed per address (the last put wins) and sent together
(:meth:`~memory_ledger.replay.langgraph_store.writes.Writer.apply`). The async calls of
one event-loop tick are merged into one such batch, with an answer or an error per call
(:mod:`~memory_ledger.replay.langgraph_store.ticks`,
:mod:`~memory_ledger.replay.langgraph_store.merged`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from langgraph.store.base import (
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)
from langgraph.store.base import InvalidNamespaceError as LangGraphNamespaceError

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.telemetry.spans import traced, traced_method
from memory_ledger.ledger.arguments import check_count
from memory_ledger.ledger.errors import InvalidArgumentError, InvalidArgumentTypeError
from memory_ledger.ledger.ids import Namespace, check_namespace
from memory_ledger.replay.langgraph_store.async_calls import TickBatchedStore
from memory_ledger.replay.langgraph_store.configs import check_index, check_ttl
from memory_ledger.replay.langgraph_store.matching import (
    check_filter,
    matches_filter,
    matches_namespace,
)
from memory_ledger.replay.langgraph_store.merged import Call, Outcome, collapse, run_merged
from memory_ledger.replay.langgraph_store.reads import Current, ItemReader
from memory_ledger.replay.langgraph_store.records import has_indexed_text
from memory_ledger.replay.langgraph_store.ttl import Refresher
from memory_ledger.replay.langgraph_store.writes import Put, Writer

if TYPE_CHECKING:
    from memory_ledger.commands.recall import MemoryDoc
    from memory_ledger.replay.audit import Lineage
    from memory_ledger.replay.langgraph_store.audit import ItemVersion
    from memory_ledger.replay.langgraph_store.ttl import Sweeper

__all__ = ["LedgerStore", "StoreNamespaceError"]


class StoreNamespaceError(InvalidArgumentError, LangGraphNamespaceError):
    """A LangGraph namespace breaks LangGraph's rules (a label that is empty, not a string,
    holds ``.`` or NUL; for ``put``, also an empty namespace or a root label
    ``langgraph``): both the engine's typed error and LangGraph's
    ``InvalidNamespaceError``."""

    reason_code = "invalid_langgraph_namespace"


def _check_address(namespace: object, key: object) -> tuple[str, ...]:
    """The namespace as a tuple: a namespace must be a tuple (or list, as PostgresStore and
    SqliteStore take it) of labels and a key a string (typed errors, never a silent
    conversion of a string into its letters or of a number into text)."""
    if not isinstance(namespace, (tuple, list)):
        msg = f"namespace must be a tuple of strings, got {type(namespace).__name__}"
        raise InvalidArgumentTypeError(msg, parameter="namespace")
    if not isinstance(key, str):
        msg = f"key must be a string, got {type(key).__name__}"
        raise InvalidArgumentTypeError(msg, parameter="key")
    return tuple(namespace)


def _check_put_namespace(namespace: tuple[str, ...]) -> None:
    """LangGraph's rule for the namespace of ``put`` (``_validate_namespace`` of
    ``langgraph.store.base``): not empty, and its root label is not ``langgraph``.

    :raises StoreNamespaceError: it breaks the rule (LangGraph's message)."""
    if not namespace:
        raise StoreNamespaceError("Namespace cannot be empty.", parameter="namespace")
    if namespace[0] == "langgraph":
        msg = (
            'Root label for namespace cannot be "langgraph" (a namespace of '
            f"{len(namespace)} labels; its labels are not repeated here)"
        )
        raise StoreNamespaceError(msg, parameter="namespace")


def _label_problem(labels: Sequence[object]) -> str | None:
    """What is wrong with the first of ``labels`` that LangGraph's label rules refuse (its
    ``_validate_namespace_labels``: a string, not empty, no ``.`` or NUL), said by the
    label's place, never by its text (a refused label may hold a secret); None when LangGraph
    refuses none of them."""
    for index, label in enumerate(labels, start=1):
        where = f"namespace label {index} of {len(labels)}"
        if not isinstance(label, str):
            kind = type(label).__name__
            return f"{where} is not a string (a {kind}); namespace labels must be strings"
        if "." in label:
            return f"{where} contains a period ('.'); namespace labels cannot contain periods"
        if "\x00" in label:
            return f"{where} contains a NUL byte; namespace labels cannot contain NUL bytes"
        if not label:
            return f"{where} is empty; namespace labels cannot be empty strings"
    return None


def _namespace_refusal(op: Op) -> StoreNamespaceError:
    """The store's error for ``op``, whose labels LangGraph's ``validate_op_namespace``
    refused: LangGraph's message repeats every label (a secret in one reached the host's
    logs), so this one names the label's place and the rule it breaks, not its text."""
    paths: list[Sequence[object]] = []
    if isinstance(op, (GetOp, PutOp)):
        paths.append(op.namespace)
    elif isinstance(op, SearchOp):
        paths.append(op.namespace_prefix)
    elif isinstance(op, ListNamespacesOp):
        paths.extend(condition.path for condition in op.match_conditions or ())
    problem = next(
        (found for path in paths if (found := _label_problem(tuple(path))) is not None), None
    )
    msg = (
        f"Invalid namespace: {problem} (the labels are not repeated here)"
        if problem is not None
        else "Invalid namespace: a label breaks LangGraph's label rules (not repeated here)"
    )
    return StoreNamespaceError(msg, parameter="namespace")


def _as_tuples(op: Op) -> Op:
    """``op`` with a namespace (prefix) given as a list made a tuple (PostgresStore and
    SqliteStore read ``search(["docs"])`` as ``search(("docs",))``)."""
    if isinstance(op, (GetOp, PutOp)) and isinstance(op.namespace, list):
        return op._replace(namespace=tuple(op.namespace))
    if isinstance(op, SearchOp) and isinstance(op.namespace_prefix, list):
        return op._replace(namespace_prefix=tuple(op.namespace_prefix))
    return op


def _check_op(op: Op) -> None:
    """Check ``op`` as LangGraph's stores check an op handed to ``batch``: its labels only
    (``validate_op_namespace``: not empty, text, no ``.`` or NUL). An empty namespace and a
    root label ``langgraph`` are refused by ``put`` (LangGraph's ``_validate_namespace``),
    not here: InMemoryStore, PostgresStore and SqliteStore store such an op given to
    ``batch``, and so does this store. Counts, query and filter are checked for their type
    (typed errors, never a raw exception), and the filter's operators
    (:func:`~memory_ledger.replay.langgraph_store.matching.check_filter`)."""
    if isinstance(op, (GetOp, PutOp)):
        _check_address(op.namespace, op.key)  # a get is refused as a put is: by type
    if isinstance(op, SearchOp) and not isinstance(op.namespace_prefix, tuple):
        got = type(op.namespace_prefix).__name__
        msg = f"namespace_prefix must be a tuple of labels, got {got}"
        raise InvalidArgumentTypeError(msg, parameter="namespace_prefix")
    refused = False
    try:
        validate_op_namespace(op)
    except LangGraphNamespaceError:
        refused = True  # raised below, outside the handler: LangGraph's error (which
        # repeats the label) is not kept as the refusal's __context__ either
    if refused:
        raise _namespace_refusal(op)
    if isinstance(op, SearchOp):
        check_count("limit", op.limit, minimum=0)
        check_count("offset", op.offset, minimum=0)
        if op.query is not None and not isinstance(op.query, str):
            msg = f"query must be a string or None, got {type(op.query).__name__}"
            raise InvalidArgumentTypeError(msg, parameter="query", reason_code="not_a_string")
        if op.filter is not None and not isinstance(op.filter, Mapping):
            msg = f"filter must be a dict or None, got {type(op.filter).__name__}"
            raise InvalidArgumentTypeError(msg, parameter="filter")
        if op.filter is not None and not all(isinstance(k, str) for k in op.filter):
            msg = "filter keys must be strings (a field name or a dotted path)"
            raise InvalidArgumentTypeError(msg, parameter="filter", reason_code="not_a_string")
        check_filter(op.filter)
    elif isinstance(op, ListNamespacesOp):
        check_count("limit", op.limit, minimum=0)
        check_count("offset", op.offset, minimum=0)
        if op.max_depth is not None:
            check_count("max_depth", op.max_depth, minimum=0)


class LedgerStore(TickBatchedStore):
    """A LangGraph store over a memory-ledger engine, for one tenant ``namespace``.

    :param engine: an open :class:`~memory_ledger.commands.engine.MemoryEngine` (its
        semantic channel, if any, is the search's embedding function; see :meth:`open`).
    :param namespace: the engine namespace every item of this store lives in.
    :param index: LangGraph's ``IndexConfig``: its ``fields`` are what search indexes
        (default ``["$"]``, the whole document; with no ``index`` too: lexical search
        always works). Its ``embed``/``dims`` are used by :meth:`open`.
    :param ttl: LangGraph's ``TTLConfig`` (``default_ttl`` minutes,
        ``sweep_interval_minutes``, ``refresh_on_read``, default True as in LangGraph): an
        item's TTL counts from its last put or, when the read asks for it (``get`` and
        ``search`` with ``refresh_ttl``, whose default is ``refresh_on_read``), its last
        read; a read's refresh is a buffered read-path record
        (:class:`~memory_ledger.replay.langgraph_store.ttl.Refresher`).
    :param clock: the time TTLs are judged at (aware; default: the wall clock).
    :raises InvalidNamespaceError: ``namespace`` is not a valid engine namespace.
    :raises InvalidArgumentError: an ``index`` or ``ttl`` the store cannot use
        (:mod:`~memory_ledger.replay.langgraph_store.configs`: ``invalid_index_config``,
        ``invalid_ttl_config``; ``InvalidArgumentTypeError`` for a setting of the wrong
        type).
    """

    supports_ttl = True

    def __init__(
        self,
        engine: MemoryEngine,
        namespace: Namespace,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        owns_engine: bool = False,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        check_namespace(namespace)
        check_index(index)
        check_ttl(ttl)
        super().__init__("ledgerstore")
        self.engine = engine
        self.namespace = namespace
        self.index_config = index
        self.ttl_config = ttl
        fields = (index or {}).get("fields")
        self.fields: tuple[str, ...] | None = None if fields is None else tuple(fields)
        self.reader = ItemReader(engine, namespace)
        self.refresher = Refresher(engine, namespace, clock)
        self.writer = Writer(engine, namespace, self.reader, self.refresher)
        self._owns_engine = owns_engine
        self._sweeper: Sweeper | None = None

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        namespace: Namespace,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        clock: Callable[[], datetime] | None = None,
        **engine_options: Any,
    ) -> LedgerStore:
        """Open (or create) the store folder ``path`` and a store over it; closing the
        store closes the engine (``clock``: as the constructor's). With ``index["embed"]``
        (LangGraph embeddings or a function) and ``index["dims"]``, search is hybrid with
        that embedding function
        (:class:`~memory_ledger.replay.langgraph_store.embeddings.LangGraphEmbeddingProvider`);
        without it the engine's configured provider (or lexical recall) serves.

        :raises StoreUnavailableError: as :meth:`MemoryEngine.open`.
        :raises InvalidArgumentError: an ``index`` or ``ttl`` the store cannot use
            (``invalid_index_config``, ``invalid_ttl_config``, ``missing_dims``; before the
            folder is opened).
        """
        check_namespace(namespace)
        check_index(index)
        check_ttl(ttl)
        if index and index.get("embed") is not None and "embeddings" not in engine_options:
            from memory_ledger.replay.langgraph_store.embeddings import provider_for

            engine_options["embeddings"] = provider_for(index)
        engine = MemoryEngine.open(path, **engine_options)
        return cls(engine, namespace, index=index, ttl=ttl, owns_engine=True, clock=clock)

    # BaseStore ------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order: reads answer from the state before the batch's writes;
        the writes, collapsed per address (last put wins), are sent at the end as one
        engine command.

        :raises StoreNamespaceError: an op's namespace label breaks LangGraph's rules
            (:func:`_check_op`; nothing of the batch is done).
        :raises CommandRejectedError: a value the engine refuses (typed; e.g.
            ``SecretRefusedError`` for a secret-shaped value).
        :raises FilterError: a search filter with an unknown operator.
        """
        call = self._call(ops)
        now = self.refresher.clock()
        results = [None if isinstance(op, PutOp) else self._read(op, now) for op in call.ops]
        if call.puts:
            self.writer.apply(collapse(call.puts))
        return results

    def _call(self, ops: Iterable[Op]) -> Call:
        """``ops`` checked (:func:`_check_op`, the put's ``index``, the op's type) and its
        puts converted, before anything runs."""
        if isinstance(ops, (str, bytes, Mapping)) or not isinstance(ops, Iterable):
            msg = f"ops must be a sequence of operations, got {type(ops).__name__}"
            raise InvalidArgumentTypeError(msg, parameter="ops")
        checked = tuple(_as_tuples(op) for op in ops)
        puts: list[Put] = []
        for op in checked:
            _check_op(op)
            if isinstance(op, PutOp):
                puts.append(self._put(op))
            elif not isinstance(op, (GetOp, SearchOp, ListNamespacesOp)):
                msg = f"Unknown operation type: {type(op)}"
                raise InvalidArgumentError(msg, parameter="ops", reason_code="unknown_op")
        return Call(checked, tuple(puts))

    def _run_calls(self, calls: Sequence[Call]) -> list[Outcome]:
        """The calls of one tick as one merged batch (on the worker thread)."""
        now = self.refresher.clock()
        return run_merged(calls, lambda op: self._read(op, now), self.writer)

    def _read(self, op: Op, now: datetime) -> Result:
        if isinstance(op, GetOp):
            return self._get(op, now)
        if isinstance(op, SearchOp):
            return self._search(op, now)
        assert isinstance(op, ListNamespacesOp)  # _call let nothing else through
        return self._list_namespaces(op, now)

    # Operations ----------------------------------------------------------------------------

    def _address(self, namespace: tuple[str, ...], key: str) -> tuple[str, ...]:
        """The namespace of ``put``/``aput``, whose errors are the engine's typed errors
        too: :class:`StoreNamespaceError` (also LangGraph's ``InvalidNamespaceError``) for a
        namespace LangGraph refuses, ``InvalidArgumentTypeError`` for a key or namespace
        that is not text (LangGraph would store ``5`` as ``"5"`` and ``"users"`` as its
        letters)."""
        namespace = _check_address(namespace, key)
        _check_put_namespace(namespace)
        return namespace

    def _put(self, op: PutOp) -> Put:
        fields: tuple[str, ...] | None
        if op.index is False:
            fields = ()
        elif op.index is None:
            fields = self.fields
        elif isinstance(op.index, (list, tuple)) and all(isinstance(f, str) for f in op.index):
            fields = tuple(op.index)
        else:
            given = type(op.index).__name__
            if isinstance(op.index, (list, tuple)):
                odd = next(f for f in op.index if not isinstance(f, str))
                given = f"a {given} with an item of type {type(odd).__name__}"
            msg = f"index must be False, None or a list of field paths (strings), got {given}"
            raise InvalidArgumentTypeError(msg, parameter="index")
        value: Any = op.value
        if isinstance(value, Mapping):
            value = dict(value)  # anything else: encode_record names it (value_not_json)
        return Put(namespace=op.namespace, key=str(op.key), value=value, fields=fields, ttl=op.ttl)

    @traced_method("langgraph.get", lambda self, *_: (self.engine, self.namespace))
    def _get(self, op: GetOp, now: datetime) -> Item | None:
        current = self.reader.current(op.namespace, str(op.key))
        if current is None or self.refresher.expired(current, now):
            return None
        if op.refresh_ttl:
            self.refresher.refresh(current, now)
        return _item(current)

    def _search(self, op: SearchOp, now: datetime) -> list[SearchItem]:
        with traced(self.engine, "langgraph.search", self.namespace, text=op.query) as span:
            return span.result(self._ranked(op, now))

    def _ranked(self, op: SearchOp, now: datetime) -> list[SearchItem]:
        wanted = op.offset + op.limit
        if not op.query:
            return self._page(op, [], wanted, now)
        everything = max(1, self.engine.count_active_memories(self.namespace))
        depth = min(everything, max(50, 4 * wanted))
        while True:  # a shallow ranking first; deeper when the prefix or filter drop too many
            found, _, _ = self.engine.canonical_candidates(self.namespace, op.query, depth)
            # an item with no indexed text is not ranked (LangGraph indexes nothing of it):
            # it follows the matches unscored, however near its placeholder vector falls
            ranked = [(doc, score) for doc, score in found if has_indexed_text(doc.statement)]
            if depth >= everything or len(found) < depth:
                return self._page(op, ranked, wanted, now)
            kept = self._keep(op, ranked, wanted, now, unscored=False)
            if len(kept) >= wanted:
                return self._items(op, kept, wanted)
            depth = everything

    def _page(
        self, op: SearchOp, ranked: list[tuple[MemoryDoc, float]], wanted: int, now: datetime
    ) -> list[SearchItem]:
        return self._items(op, self._keep(op, ranked, wanted, now, unscored=True), wanted)

    def _keep(
        self,
        op: SearchOp,
        ranked: list[tuple[MemoryDoc, float]],
        wanted: int,
        now: datetime,
        *,
        unscored: bool,
    ) -> list[tuple[tuple[tuple[str, ...], str], float | None]]:
        """The first ``wanted`` addresses of the ranked matches (then, with ``unscored``,
        of every other item) in the prefix that pass the filter and have not expired."""
        prefix = op.namespace_prefix
        n = len(prefix)
        kept: list[tuple[tuple[tuple[str, ...], str], float | None]] = []
        candidates = self._candidates(ranked) if unscored else iter(ranked)
        for doc, score in candidates:
            decoded = self.reader.decoded(doc)
            if decoded is None:
                continue
            address, value, ttl = decoded
            if address[0][:n] != prefix or not matches_filter(value, op.filter):
                continue
            if ttl is not None:  # only an item with a TTL needs its times to be kept
                current = self.reader.current(*address)
                if current is None or self.refresher.expired(current, now):
                    continue
            kept.append((address, score))
            if len(kept) >= wanted:
                break
        return kept

    def _items(
        self,
        op: SearchOp,
        kept: list[tuple[tuple[tuple[str, ...], str], float | None]],
        wanted: int,
    ) -> list[SearchItem]:
        page: list[SearchItem] = []
        shown = kept[op.offset : wanted]
        currents = self.reader.currents([address for address, _ in shown])
        for (_, score), current in zip(shown, currents, strict=True):
            if current is not None:
                page.append(_search_item(current, score))
                if op.refresh_ttl:
                    self.refresher.refresh(current, self.refresher.clock())
        return page

    def _candidates(
        self, scored: list[tuple[MemoryDoc, float]]
    ) -> Iterator[tuple[MemoryDoc, float | None]]:
        """The query's matches (best first), then every other item without a score (read
        only when the matches do not fill the page)."""
        yield from scored
        seen = {doc.memory_id for doc, _ in scored}
        for doc, *_ in self.reader.docs():
            if doc.memory_id not in seen:
                yield doc, None

    @traced_method("langgraph.list_namespaces", lambda self, *_: (self.engine, self.namespace))
    def _list_namespaces(self, op: ListNamespacesOp, now: datetime) -> list[tuple[str, ...]]:
        conditions = [(c.match_type, c.path) for c in op.match_conditions or ()]
        spaces: set[tuple[str, ...]] = set()
        expiring: set[tuple[tuple[str, ...], str]] = set()
        for _, (namespace, key), _, ttl in self.reader.docs():
            if namespace in spaces:
                continue
            if ttl is not None:
                expiring.add((namespace, key))
                continue
            spaces.add(namespace)
        for namespace, key in expiring:  # only these need their times read
            current = self.reader.current(namespace, key)
            if current is not None and not self.refresher.expired(current, now):
                spaces.add(namespace)
        chosen = [ns for ns in spaces if matches_namespace(ns, conditions)]
        if op.max_depth is not None:
            chosen = list({ns[: op.max_depth] for ns in chosen})
        return sorted(chosen)[op.offset : op.offset + op.limit]

    # Extensions: what only a ledger can tell -------------------------------------------

    def history(self, namespace: tuple[str, ...], key: str) -> list[ItemVersion]:
        """Every recorded change of the item, oldest first
        (:func:`~memory_ledger.replay.langgraph_store.audit.item_history`)."""
        from memory_ledger.replay.langgraph_store.audit import item_history

        return item_history(self.reader, namespace, key)

    def get_as_of(
        self,
        namespace: tuple[str, ...],
        key: str,
        at: int | datetime | str,
        *,
        occurred: bool = False,
    ) -> Item | None:
        """The item as it stood at a ledger position or time
        (:func:`~memory_ledger.replay.langgraph_store.audit.item_as_of`)."""
        from memory_ledger.replay.langgraph_store.audit import item_as_of

        return item_as_of(self.reader, namespace, key, at, occurred=occurred)

    def explain(self, namespace: tuple[str, ...], key: str) -> Lineage | None:
        """The lineage of the item's current value, or None
        (:func:`~memory_ledger.replay.langgraph_store.audit.item_explain`)."""
        from memory_ledger.replay.langgraph_store.audit import item_explain

        return item_explain(self.reader, namespace, key)

    # Lifecycle -----------------------------------------------------------------------------

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> None:
        """Start the background sweeper (a thread) that records an expiry (a forget under
        the ``langgraph-ttl-`` session prefix) for every item whose TTL ran out; every
        ``sweep_interval_minutes`` (default: ``ttl.sweep_interval_minutes``, else 5)."""
        from memory_ledger.replay.langgraph_store.ttl import Sweeper

        if self._sweeper is None:
            minutes = sweep_interval_minutes or (self.ttl_config or {}).get(
                "sweep_interval_minutes"
            )
            self._sweeper = Sweeper(self.reader, self.writer, self.refresher, (minutes or 5) * 60.0)
            self._sweeper.start()

    def stop_ttl_sweeper(self) -> None:
        """Stop the sweeper (waits for a sweep under way)."""
        if self._sweeper is not None:
            self._sweeper.stop()
            self._sweeper = None

    def sweep_ttl(self) -> int:
        """Record an expiry for every item whose TTL has run out now (its last put, or its
        last read by any store over the ledger, is longer ago than its TTL); how many."""
        from memory_ledger.replay.langgraph_store.ttl import sweep

        return sweep(self.reader, self.writer, self.refresher)

    def close(self) -> None:
        """Stop the sweeper; run the async calls still queued and wait for those under way
        (a later async call raises ``EngineClosedError``); write the buffered refresh
        records; close the engine when :meth:`open` opened it."""
        self.stop_ttl_sweeper()
        self._ticks.close()
        self.refresher.close()
        if self._owns_engine:
            self.engine.close()

    def __enter__(self) -> LedgerStore:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _uuid(doc: MemoryDoc) -> Any:
    from uuid import UUID

    return UUID(doc.memory_id)


def _item(current: Current) -> Item:
    return Item(
        value=current.value,
        key=current.key,
        namespace=current.namespace,
        created_at=current.created_at,
        updated_at=current.updated_at,
    )


def _search_item(current: Current, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=current.namespace,
        key=current.key,
        value=current.value,
        created_at=current.created_at,
        updated_at=current.updated_at,
        score=score,
    )
