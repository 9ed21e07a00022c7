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

from memory_ledger.ledger.errors import MemoryLedgerError
from memory_ledger.replay.langgraph_store.writes import Put, RefusedWrite

if TYPE_CHECKING:
    from memory_ledger.replay.langgraph_store.store import LedgerStore

__all__ = ["MigrationReport", "RefusedPut", "export_store", "import_store", "iter_items"]

_PAGE = 500


class RefusedPut(msgspec.Struct, frozen=True, kw_only=True):
    """One item an import refused: its LangGraph ``namespace`` and ``key``, the
    ``reason_code`` (``secret_detected``, ``value_too_large``...) and the ``parameter`` that
    failed (``value``, ``key``...). Never the value."""

    namespace: tuple[str, ...]
    key: str
    reason_code: str
    parameter: str | None = None


class MigrationReport(msgspec.Struct, frozen=True, kw_only=True):
    """What a migration moved: ``namespaces`` read, ``items`` written and the items
    ``refused`` (an import's: each on its own, the others written)."""

    namespaces: int
    items: int
    refused: tuple[RefusedPut, ...] = ()


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
    with the source's ``updated_at`` as its occurred time. An item the engine refuses (a
    secret-shaped value, a value over 64 KB, one not JSON) is refused alone: it is reported
    in ``refused`` (namespace, key and reason code, never the value) and the others are
    written, as the mem0 import does.

    :raises MemoryLedgerError: an error that is no item's refusal (the ledger unavailable,
        the namespace erased); the batches before it are recorded.
    """
    spaces: set[tuple[str, ...]] = set()
    count = 0
    refused: list[RefusedPut] = []
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
        if len(pending) >= batch:
            count += _write(target, pending, refused)
            pending = []
    if pending:
        count += _write(target, pending, refused)
    return MigrationReport(namespaces=len(spaces), items=count, refused=tuple(refused))


def _write(target: LedgerStore, puts: list[Put], refused: list[RefusedPut]) -> int:
    """Write ``puts`` as one batch, leaving out each put the engine refuses (added to
    ``refused``) and sending the rest again; the count written. A refusal that names no put
    is told put by put (each sent alone)."""
    while puts:
        outcome = target.writer.attempt(puts)
        if not isinstance(outcome, RefusedWrite):
            return len(puts)
        if outcome.put is None:
            if len(puts) == 1:
                refused.append(_refused(puts[0], outcome.error))
                return 0
            return sum(_write(target, [put], refused) for put in puts)
        refused.append(_refused(puts[outcome.put], outcome.error))
        puts = puts[: outcome.put] + puts[outcome.put + 1 :]
    return 0


def _refused(put: Put, error: MemoryLedgerError) -> RefusedPut:
    return RefusedPut(
        namespace=put.namespace,
        key=put.key,
        reason_code=error.reason_code,
        parameter=getattr(error, "parameter", None),
    )


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
