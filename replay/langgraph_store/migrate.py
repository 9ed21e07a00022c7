"""Moving items between any LangGraph ``BaseStore`` and a :class:`LedgerStore`.

:func:`import_store` lists the source's namespaces, reads every item (``search`` of each
namespace, paged) and writes them as puts of the ledger store with their original
``updated_at`` kept as the occurred time (valid time: an older value imported after a
newer one never retires it); :func:`export_store` writes the ledger store's current items
into another store (LangGraph stores set their own times).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import msgspec
from langgraph.store.base import BaseStore, Item, PutOp

from memory_ledger.replay.langgraph_store.writes import Put

if TYPE_CHECKING:
    from memory_ledger.replay.langgraph_store.store import LedgerStore

__all__ = ["MigrationReport", "export_store", "import_store", "iter_items"]

_PAGE = 500


class MigrationReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a migration moved: ``namespaces`` and ``items`` read and written."""

    namespaces: int
    items: int


def iter_items(store: BaseStore, page: int = _PAGE) -> Iterator[Item]:
    """Every item of ``store``: each namespace it lists, searched page by page (no query,
    so every item of the namespace; items of deeper namespaces are skipped here and read
    under their own)."""
    offset = 0
    spaces: list[tuple[str, ...]] = []
    while True:
        listed = store.list_namespaces(limit=page, offset=offset)
        spaces.extend(listed)
        if len(listed) < page:
            break
        offset += page
    for namespace in spaces:
        offset = 0
        while True:
            found = store.search(namespace, limit=page, offset=offset)
            for item in found:
                if tuple(item.namespace) == tuple(namespace):
                    yield item
            if len(found) < page:
                break
            offset += page


def import_store(source: BaseStore, target: LedgerStore, *, batch: int = 100) -> MigrationReport:
    """Copy every item of ``source`` into ``target`` as puts (``batch`` per write), each
    with the source's ``updated_at`` as its occurred time.

    :raises CommandRejectedError: an item the engine refuses (a secret-shaped value, a
        value over 2,000 characters); the items before it are recorded.
    """
    spaces: set[tuple[str, ...]] = set()
    count = 0
    pending: list[Put] = []
    for item in iter_items(source):
        spaces.add(tuple(item.namespace))
        pending.append(
            Put(
                namespace=tuple(item.namespace),
                key=item.key,
                value=dict(item.value),
                fields=target.fields,
                occurred_at=_aware(item.updated_at),
            )
        )
        count += 1
        if len(pending) >= batch:
            target.writer.apply(pending)
            pending = []
    if pending:
        target.writer.apply(pending)
    return MigrationReport(namespaces=len(spaces), items=count)


def export_store(source: LedgerStore, target: BaseStore, *, batch: int = 100) -> MigrationReport:
    """Copy every current item of ``source`` into ``target`` (puts, ``batch`` per call)."""
    spaces: set[tuple[str, ...]] = set()
    ops: list[PutOp] = []
    count = 0
    for item in iter_items(source):
        spaces.add(tuple(item.namespace))
        ops.append(PutOp(tuple(item.namespace), item.key, dict(item.value)))
        count += 1
        if len(ops) >= batch:
            target.batch(ops)
            ops = []
    if ops:
        target.batch(ops)
    return MigrationReport(namespaces=len(spaces), items=count)


def _aware(when: datetime) -> datetime:
    """A source's time with a zone (a naive one is taken as UTC, as LangGraph stores write)."""
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)
