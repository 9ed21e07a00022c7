"""Deliberately broken stores: the kit's proof that it catches what it claims.

:func:`reference_store` is LangGraph's ``InMemoryStore`` kept in a JSON snapshot file
(rewritten, whole, after every write; read back on open), so that it persists and has bytes
to read; it passes every property. Each mutant breaks exactly one:

- :func:`leaking_namespace_store`: search matches the namespace prefix as a *string*, so
  ``("t", "a")`` also finds the items of ``("t", "ab")`` (``isolation``);
- :func:`soft_delete_store`: a delete hides the item but keeps it, value and all, in the
  snapshot as a tombstone (``delete``);
- :func:`lost_update_store`: a put copies its namespace, writes the copy, and puts the
  copy back, so concurrent puts to one namespace lose each other's writes (``concurrency``);
- :func:`lagging_index_store`: search answers from an index that applies each write only
  when the next one arrives (``read_your_writes``).

The folder is ``$MEMORY_LEDGER_MUTANT_DIR`` (the factories take no argument, as the kit
calls them); point ``--store-bytes`` at it.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from langgraph.store.base import BaseStore, Item, Op, PutOp, Result, SearchItem, SearchOp
from langgraph.store.memory import InMemoryStore

from memory_ledger.replay.conformance.factory import store_factory

__all__ = [
    "MUTANT_DIR_ENV",
    "lagging_index_store",
    "leaking_namespace_store",
    "lost_update_store",
    "reference_store",
    "soft_delete_store",
]

MUTANT_DIR_ENV = "MEMORY_LEDGER_MUTANT_DIR"


class SnapshotStore(BaseStore):
    """``InMemoryStore`` plus a snapshot file ``store.json`` in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.inner = InMemoryStore()
        self.path = folder / "store.json"
        self.lock = threading.RLock()
        self.tombstones: list[list[Any]] = []
        if self.path.exists():
            snapshot = json.loads(self.path.read_text(encoding="utf-8"))
            for ns, key, value, created, updated in snapshot["items"]:
                self.inner._data[tuple(ns)][key] = Item(
                    value=value,
                    key=key,
                    namespace=tuple(ns),
                    created_at=datetime.fromisoformat(created),
                    updated_at=datetime.fromisoformat(updated),
                )
            self.tombstones = snapshot["tombstones"]

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """The inner store's batch, then the snapshot when the batch wrote."""
        ops = list(ops)
        with self.lock:
            results = self.inner.batch(ops)
            if any(isinstance(op, PutOp) for op in ops):
                self.persist()
            return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """As :meth:`batch`."""
        return self.batch(ops)

    def persist(self) -> None:
        """Rewrite the snapshot (a new file renamed over the old: a reader or a kill sees
        the old or the new one, whole)."""
        with self.lock:
            items = [
                [
                    list(i.namespace),
                    i.key,
                    i.value,
                    i.created_at.isoformat(),
                    i.updated_at.isoformat(),
                ]
                for items in list(self.inner._data.values())
                for i in list(items.values())
            ]
            fresh = self.path.with_suffix(".tmp")
            fresh.write_text(json.dumps({"items": items, "tombstones": self.tombstones}))
            os.replace(fresh, self.path)


class LeakingNamespace(SnapshotStore):
    """Search by string prefix of the dotted namespace (the bug: ``a`` matches ``ab``)."""

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        results = super().batch([_widen(op) for op in ops])
        for index, op in enumerate(ops):
            if isinstance(op, SearchOp) and op.namespace_prefix:
                dotted = ".".join(op.namespace_prefix)
                wide = cast(list[SearchItem], results[index] or [])
                found = [i for i in wide if ".".join(i.namespace).startswith(dotted)]
                results[index] = found[op.offset : op.offset + op.limit]
        return results


def _widen(op: Op) -> Op:
    """A search of the parent namespace, every page (the leak's candidates)."""
    if isinstance(op, SearchOp) and op.namespace_prefix:
        return SearchOp(op.namespace_prefix[:-1], op.filter, 10_000, 0, op.query, op.refresh_ttl)
    return op


class SoftDelete(SnapshotStore):
    """A delete keeps the item's value in the snapshot (a tombstone)."""

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        with self.lock:
            for op in ops:
                if isinstance(op, PutOp) and op.value is None:
                    gone = self.inner.get(op.namespace, op.key)
                    if gone is not None:
                        self.tombstones.append([list(op.namespace), op.key, gone.value])
            return super().batch(ops)


class LostUpdate(SnapshotStore):
    """A put is read-copy-write of its namespace's dict, without the lock."""

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        if not ops or not all(isinstance(op, PutOp) and op.value is not None for op in ops):
            return super().batch(ops)
        for op in ops:
            assert isinstance(op, PutOp) and op.value is not None
            copy = dict(self.inner._data[op.namespace])
            time.sleep(0.002)  # the window another thread's put falls into
            now = datetime.now(UTC)
            old = copy.get(op.key)
            copy[op.key] = Item(
                value=dict(op.value),
                key=op.key,
                namespace=op.namespace,
                created_at=old.created_at if old else now,
                updated_at=now,
            )
            self.inner._data[op.namespace] = copy
        self.persist()
        return [None] * len(ops)


class LaggingIndex(SnapshotStore):
    """Search answers from a second store that gets each write batch one batch late."""

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)
        self.index = InMemoryStore()
        self.index._data.update({ns: dict(items) for ns, items in self.inner._data.items()})
        self.pending: list[Op] = []

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        with self.lock:
            writes = [op for op in ops if isinstance(op, PutOp)]
            searches = {i for i, op in enumerate(ops) if isinstance(op, SearchOp)}
            stale = self.index.batch([op for op in ops if isinstance(op, SearchOp)])
            results = super().batch(ops)
            for index, result in zip(sorted(searches), stale, strict=True):
                results[index] = result
            if writes:
                self.index.batch(self.pending)
                self.pending = list(writes)
            return results


def _folder() -> Path:
    place = os.environ.get(MUTANT_DIR_ENV)
    if not place:
        msg = f"set ${MUTANT_DIR_ENV} to the folder the mutant stores keep their snapshot in"
        raise RuntimeError(msg)
    folder = Path(place)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@store_factory(persistent=True)
def reference_store() -> BaseStore:
    """The control: passes every property."""
    return SnapshotStore(_folder())


@store_factory(persistent=True)
def leaking_namespace_store() -> BaseStore:
    """Fails ``isolation`` only."""
    return LeakingNamespace(_folder())


@store_factory(persistent=True)
def soft_delete_store() -> BaseStore:
    """Fails ``delete`` only."""
    return SoftDelete(_folder())


@store_factory(persistent=True)
def lost_update_store() -> BaseStore:
    """Fails ``concurrency`` only."""
    return LostUpdate(_folder())


@store_factory(persistent=True)
def lagging_index_store() -> BaseStore:
    """Fails ``read_your_writes`` only."""
    return LaggingIndex(_folder())
