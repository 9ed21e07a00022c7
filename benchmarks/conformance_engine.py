"""The engine's own API under the conformance kit: a thin ``BaseStore`` over
:class:`~memory_ledger.commands.MemoryEngine` (``--store-factory
benchmarks.conformance_engine:engine_store``; the store folder ``$CONFORMANCE_ENGINE_DIR``).

Where ``LedgerStore`` (``replay/langgraph_store``) is the engine's full LangGraph store, this
adapter uses only what a host calls on the engine, to show what the engine's API itself
guarantees:

- an item is one canonical memory, written with ``remember``: its statement is the JSON of
  ``[namespace, key, value]`` followed by a short digest of that JSON (the engine merges
  statements that are equal once casefolded and spaced alike; two values that differ only
  in case are two values here), its subject the address's digest and its predicate
  ``value``, so a new value of a key supersedes the old one (the engine's rule for one
  subject and predicate);
- a LangGraph namespace is one engine namespace (tenant ``conformance``, principal
  ``engine``, the scope id a digest of the labels);
- a get, a search and a listing read ``retrievable_memories`` (the serving state), the
  namespaces listed from the read models' scope ids; a search with a query ranks the
  items ``recall`` returns first (by its score), then the rest;
- a delete is ``forget`` of the key's memory (recorded: the ledger keeps the statement, as
  for ``LedgerStore``);
- no TTL (``supports_ttl`` is False); ``abatch`` runs ``batch`` in a thread.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.replay.conformance import store_factory
from memory_ledger.replay.langgraph_store.matching import (
    check_filter,
    matches_filter,
    matches_namespace,
)

TENANT, PRINCIPAL, PREDICATE = "conformance", "engine", "value"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _namespace(labels: tuple[str, ...]) -> Namespace:
    return Namespace(TENANT, PRINCIPAL, "ns" + _digest(json.dumps(list(labels))))


def _subject(labels: tuple[str, ...], key: str) -> str:
    return "lg" + _digest(json.dumps([list(labels), key]))


class EngineStore(BaseStore):
    """``BaseStore`` over a :class:`MemoryEngine` (see the module doc)."""

    supports_ttl = False

    def __init__(self, engine: MemoryEngine) -> None:
        self.engine = engine

    # Reads -------------------------------------------------------------------------------

    def _items(self, ns: Namespace) -> dict[str, tuple[tuple[str, ...], str, Any, Any]]:
        """The current items of one engine namespace by memory id: ``(labels, key, value,
        doc)``."""
        found = {}
        for doc in self.engine.retrievable_memories(ns):
            text, _, _ = doc.statement.rpartition(" #")
            try:
                labels, key, value = json.loads(text)
            except ValueError:
                continue
            found[doc.memory_id] = (tuple(labels), key, value, doc)
        return found

    def _scopes(self) -> list[Namespace]:
        with self.engine.read_models() as models:
            rows = models.conn.execute(
                "SELECT DISTINCT scope_id FROM canonical_memory WHERE tenant = ? AND principal = ?",
                [TENANT, PRINCIPAL],
            ).fetchall()
        return [Namespace(TENANT, PRINCIPAL, scope) for (scope,) in rows]

    def _all(self) -> Iterator[tuple[Namespace, tuple[str, ...], str, Any, Any]]:
        for ns in self._scopes():
            for labels, key, value, doc in self._items(ns).values():
                yield ns, labels, key, value, doc

    @staticmethod
    def _item(labels: tuple[str, ...], key: str, value: Any, doc: Any) -> Item:
        when = doc.occurred_at or _EPOCH
        return Item(value=value, key=key, namespace=labels, created_at=when, updated_at=when)

    def _current(self, labels: tuple[str, ...], key: str) -> tuple[Any, Any] | None:
        subject = _subject(labels, key)
        for found_labels, found_key, value, doc in self._items(_namespace(labels)).values():
            if doc.subject == subject and found_labels == labels and found_key == key:
                return value, doc
        return None

    def _get(self, op: GetOp) -> Item | None:
        found = self._current(tuple(op.namespace), op.key)
        return None if found is None else self._item(tuple(op.namespace), op.key, *found)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        check_filter(op.filter)
        prefix = tuple(op.namespace_prefix)
        rows = [
            (ns, labels, key, value, doc)
            for ns, labels, key, value, doc in self._all()
            if labels[: len(prefix)] == prefix and matches_filter(value, op.filter)
        ]
        rows.sort(key=lambda r: (r[1], r[2]))
        scores: dict[str, float] = {}
        if op.query:
            for ns in {r[0] for r in rows}:
                for hit in self.engine.recall(ns, op.query, 20).results:
                    scores[hit.memory_id] = hit.score
            rows.sort(key=lambda r: -scores.get(r[4].memory_id, float("-inf")))
        page = rows[op.offset : op.offset + op.limit]
        return [
            SearchItem(
                namespace=labels,
                key=key,
                value=value,
                created_at=doc.occurred_at or _EPOCH,
                updated_at=doc.occurred_at or _EPOCH,
                score=scores.get(doc.memory_id) if op.query else None,
            )
            for _, labels, key, value, doc in page
        ]

    def _list(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        conditions = [(c.match_type, tuple(c.path)) for c in op.match_conditions or ()]
        found: set[tuple[str, ...]] = set()
        for _, labels, _, _, _ in self._all():
            if matches_namespace(labels, conditions):
                found.add(labels[: op.max_depth] if op.max_depth is not None else labels)
        return sorted(found)[op.offset : op.offset + op.limit]

    # Writes ------------------------------------------------------------------------------

    def _put(self, op: PutOp) -> None:
        labels = tuple(op.namespace)
        ns = _namespace(labels)
        if op.value is None:
            found = self._current(labels, op.key)
            if found is not None:
                self.engine.forget(ns, UUID(found[1].memory_id))
            return
        text = json.dumps([list(labels), op.key, op.value], ensure_ascii=False, sort_keys=True)
        self.engine.remember(
            ns, f"{text} #{_digest(text)}", subject=_subject(labels, op.key), predicate=PREDICATE
        )

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; one result each (None for a put)."""
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op))
            elif isinstance(op, SearchOp):
                results.append(self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list(op))
            elif isinstance(op, PutOp):
                self._put(op)
                results.append(None)
            else:
                msg = f"unknown operation {type(op).__name__}"
                raise TypeError(msg)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a thread."""
        return await asyncio.to_thread(self.batch, list(ops))


@store_factory(persistent=True, processes=True)
@contextmanager
def engine_store() -> Iterator[BaseStore]:
    """:class:`EngineStore` over ``MemoryEngine.open($CONFORMANCE_ENGINE_DIR)``, closed after."""
    folder = os.environ.get("CONFORMANCE_ENGINE_DIR")
    if not folder:
        msg = "set $CONFORMANCE_ENGINE_DIR (where the store under test lives)"
        raise RuntimeError(msg)
    engine = MemoryEngine.open(folder, sync=True)
    try:
        yield EngineStore(engine)
    finally:
        engine.close()
