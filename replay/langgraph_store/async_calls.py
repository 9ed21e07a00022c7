"""The async face of the LangGraph store: every async call is queued for its event loop's
next merged batch (:mod:`~memory_ledger.replay.langgraph_store.ticks`).

:class:`TickBatchedStore` implements LangGraph's async methods (``aget``, ``aput``,
``adelete``, ``asearch``, ``alist_namespaces``, ``abatch``) with the signatures, defaults
and namespace rules of ``BaseStore``'s own, but each builds its op and waits for its answer
directly: no nested ``abatch`` coroutine, no lists around a single op. The sync methods
(``get``, ``put``, ``delete``, ``search``, ``list_namespaces``) build the same ops and hand
them to ``batch``, so every call's namespace is checked in one place (``_call``) with the
store's typed errors, never by ``BaseStore``'s own checks (whose messages repeat the
namespace). Sixty thousand
pending calls are sixty thousand of everything a call holds while it waits, and the
garbage collector walks all of them on each full collection, so what a waiting call holds
is kept small. The subclass says how a call is checked (``_call``) and how a batch of calls
runs (``_run_calls``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, cast

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    ListNamespacesOp,
    MatchCondition,
    NamespacePath,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from langgraph.store.base import Item as LangGraphItem

from memory_ledger.replay.langgraph_store.merged import Call, Outcome
from memory_ledger.replay.langgraph_store.ticks import TickQueue

__all__ = ["TickBatchedStore"]


class TickBatchedStore(BaseStore):
    """A ``BaseStore`` whose async calls are merged per event-loop tick.

    :param name: the worker thread's name prefix.
    """

    def __init__(self, name: str) -> None:
        self._ticks = TickQueue(self._run_calls, name)

    @abstractmethod
    def _call(self, ops: Iterable[Op]) -> Call:
        """``ops`` checked, as one call (raises the call's typed errors)."""

    @abstractmethod
    def _run_calls(self, calls: Sequence[Call]) -> list[Outcome]:
        """A batch of calls run (on the worker thread): one outcome per call."""

    def _refresh(self, refresh_ttl: bool | None) -> bool:
        """LangGraph's default of ``refresh_ttl``: the TTL config's ``refresh_on_read``,
        else True."""
        if refresh_ttl is not None:
            return refresh_ttl
        return True if self.ttl_config is None else self.ttl_config.get("refresh_on_read", True)

    def _ttl(self, ttl: float | None | NotProvided) -> float | None:
        """LangGraph's default of ``ttl``: the TTL config's ``default_ttl``, else None."""
        if isinstance(ttl, NotProvided):
            return self.ttl_config.get("default_ttl") if self.ttl_config else None
        return ttl

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """``batch(ops)``, merged with the other async calls of this event-loop tick into one
        batch run on the store's worker thread (one read pass, identical reads run once, ONE
        engine command for every call's writes; the event loop never blocks;
        :mod:`~memory_ledger.replay.langgraph_store.ticks`). Every read of the tick sees the
        store before the tick's writes; the last put of an address wins; calls awaited one
        after another see each other. Errors stay per call
        (:mod:`~memory_ledger.replay.langgraph_store.merged`): a call the engine refuses
        wrote nothing and gets its own error, the other calls of the tick are done. The
        other async methods are one-op calls of the same kind.

        :raises EngineClosedError: the store was closed.
        :raises StoreNamespaceError: as ``batch`` (before anything is queued).
        :raises CommandRejectedError: as ``batch``, for this call's own writes.
        :raises FilterError: as ``batch``, for this call's own search.
        """
        call = self._call(ops)
        if not call.ops:
            return []
        return await self._ticks.submit(call)

    async def aget(
        self,
        namespace: tuple[str, ...],
        key: str,
        *,
        refresh_ttl: bool | None = None,
    ) -> LangGraphItem | None:
        """The item at ``namespace``/``key`` or None (``BaseStore.aget``)."""
        op = GetOp(namespace, str(key), self._refresh(refresh_ttl))
        found = (await self._ticks.submit(self._call((op,))))[0]
        return cast("LangGraphItem | None", found)

    def get(
        self,
        namespace: tuple[str, ...],
        key: str,
        *,
        refresh_ttl: bool | None = None,
    ) -> LangGraphItem | None:
        """The item at ``namespace``/``key`` or None (``BaseStore.get``, its labels checked
        by ``batch`` as every op's are, with the same typed errors as ``aget``)."""
        found = self.batch([GetOp(namespace, str(key), self._refresh(refresh_ttl))])[0]
        return cast("LangGraphItem | None", found)

    async def asearch(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        """The items under ``namespace_prefix`` that pass ``filter``, ranked by ``query``
        (``BaseStore.asearch``)."""
        op = SearchOp(namespace_prefix, filter, limit, offset, query, self._refresh(refresh_ttl))
        found = (await self._ticks.submit(self._call((op,))))[0]
        return cast("list[SearchItem]", found)

    def search(
        self,
        namespace_prefix: tuple[str, ...],
        /,
        *,
        query: str | None = None,
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh_ttl: bool | None = None,
    ) -> list[SearchItem]:
        """The items under ``namespace_prefix`` that pass ``filter``, ranked by ``query``
        (``BaseStore.search``, checked by ``batch``: the errors of ``asearch``)."""
        op = SearchOp(namespace_prefix, filter, limit, offset, query, self._refresh(refresh_ttl))
        return cast("list[SearchItem]", self.batch([op])[0])

    async def aput(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | None | NotProvided = NOT_PROVIDED,
    ) -> None:
        """Store ``value`` at ``namespace``/``key`` (``BaseStore.aput``)."""
        op = self._put_op(namespace, key, value, index, ttl)
        await self._ticks.submit(self._call((op,)))

    def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | None | NotProvided = NOT_PROVIDED,
    ) -> None:
        """``BaseStore.put``, its namespace and key checked by ``_address`` (``aput`` is
        its async twin, with the same errors)."""
        self.batch([self._put_op(namespace, key, value, index, ttl)])

    def _put_op(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None,
        ttl: float | None | NotProvided,
    ) -> PutOp:
        """The op of a ``put``/``aput``."""
        return PutOp(self._address(namespace, key), key, value, index, ttl=self._ttl(ttl))

    @abstractmethod
    def _address(self, namespace: tuple[str, ...], key: str) -> tuple[str, ...]:
        """The namespace of a ``put``, checked with its key (raises the typed errors)."""

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        """Delete the item at ``namespace``/``key`` (``BaseStore.adelete``)."""
        await self._ticks.submit(self._call((PutOp(namespace, str(key), None),)))

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        """Delete the item at ``namespace``/``key`` (``BaseStore.delete``, checked by
        ``batch``: the errors of ``adelete``)."""
        self.batch([PutOp(namespace, str(key), None, ttl=None)])

    async def alist_namespaces(
        self,
        *,
        prefix: NamespacePath | None = None,
        suffix: NamespacePath | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """The namespaces that match, truncated to ``max_depth``
        (``BaseStore.alist_namespaces``)."""
        op = _list_op(prefix, suffix, max_depth, limit, offset)
        found = (await self._ticks.submit(self._call((op,))))[0]
        return cast("list[tuple[str, ...]]", found)

    def list_namespaces(
        self,
        *,
        prefix: NamespacePath | None = None,
        suffix: NamespacePath | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """The namespaces that match, truncated to ``max_depth``
        (``BaseStore.list_namespaces``, checked by ``batch``: the errors of
        ``alist_namespaces``)."""
        op = _list_op(prefix, suffix, max_depth, limit, offset)
        return cast("list[tuple[str, ...]]", self.batch([op])[0])


def _list_op(
    prefix: NamespacePath | None,
    suffix: NamespacePath | None,
    max_depth: int | None,
    limit: int,
    offset: int,
) -> ListNamespacesOp:
    """The op of a ``list_namespaces``/``alist_namespaces`` (as ``BaseStore`` builds it)."""
    conditions: tuple[MatchCondition, ...] = ()
    if prefix:
        conditions += (MatchCondition(match_type="prefix", path=prefix),)
    if suffix:
        conditions += (MatchCondition(match_type="suffix", path=suffix),)
    return ListNamespacesOp(conditions, max_depth, limit, offset)
