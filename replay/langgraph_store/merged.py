"""One merged batch of many calls: the calls of one event-loop tick as one read pass and
ONE engine command, with an answer or an error for each call.

:func:`run_merged` is what :class:`~memory_ledger.replay.langgraph_store.ticks.TickQueue`
runs on the store's worker thread for the calls its loop made in one tick (each call an
``abatch`` of one or more ops: ``aget``, ``aput``, ``adelete``, ``asearch`` and
``alist_namespaces`` are one op each). The semantics are those of one ``batch`` holding every
call's ops in call order, which is what LangGraph's ``AsyncBatchedBaseStore`` gives its SQL
stores (``langgraph/store/base/batch.py``: the ops of a tick de-duplicated, then one
``abatch``, whose PostgresStore and SqliteStore run the reads before the writes):

- every read answers from the store as it was before the tick's writes, and identical reads
  (equal ops) are run once and answered alike: equal answers, never the same objects (each
  call after the first gets its own copy of the items, so no caller edits another's value);
- the writes of all calls are collapsed per address (the last put of the tick wins) and sent
  as ONE engine command (:meth:`~memory_ledger.replay.langgraph_store.writes.Writer.attempt`:
  one transaction, one sync).

Unlike one ``batch``, errors stay per call. A read that fails (a filter with an unknown
operator) fails its own call only. When the engine refuses the merged write and names the
put it refused (a secret-shaped value), the call that made that put is taken out and the
rest sent again; the call taken out is then sent on its own, so its error is exactly what it
would have got alone, and the other calls of the tick are written. A refusal naming no put
(the merged batch as a whole) or another error of the engine sends every call's writes on
its own, in call order. A call that fails wrote nothing, so the last put that did not fail
wins its address.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import msgspec
from langgraph.store.base import Item, Op, PutOp, Result

from memory_ledger.ledger.errors import MemoryLedgerError
from memory_ledger.replay.langgraph_store.writes import Put, RefusedWrite, Writer

__all__ = ["Call", "Outcome", "collapse", "run_merged"]

Outcome = list[Result] | BaseException
"""A call's answer (one result per op, as ``abatch`` returns them) or its error."""


class Call(msgspec.Struct, frozen=True, gc=False):
    """One ``abatch`` call: its ops (checked) and its puts (one per :class:`PutOp` of
    ``ops``, in order, already converted). Not tracked by the garbage collector (it holds
    no cycle): tens of thousands wait at once."""

    ops: tuple[Op, ...]
    puts: tuple[Put, ...]


def collapse(puts: Sequence[Put]) -> list[Put]:
    """``puts`` with one put per address: the last, in its place (``batch``'s rule)."""
    kept: dict[tuple[tuple[str, ...], str], Put] = {}
    for put in puts:
        address = (put.namespace, put.key)
        kept.pop(address, None)
        kept[address] = put
    return list(kept.values())


def run_merged(
    calls: Sequence[Call], read: Callable[[Op], Result], writer: Writer
) -> list[Outcome]:
    """Run ``calls`` as one merged batch (the module's rules); one outcome per call, in
    order. ``read`` answers one read op (as of before the writes); ``writer`` sends the
    writes."""
    cache = _ReadCache()
    outcomes: list[Outcome] = [_answers(call, read, cache) for call in calls]
    writing = [i for i, call in enumerate(calls) if call.puts and isinstance(outcomes[i], list)]
    for i, error in _replaced_refusals(calls, writing, writer).items():
        outcomes[i] = error
        writing.remove(i)
    alone: list[int] = []
    while writing:
        owners: dict[tuple[tuple[str, ...], str], int] = {}
        puts: dict[tuple[tuple[str, ...], str], Put] = {}
        for i in writing:
            for put in calls[i].puts:
                address = (put.namespace, put.key)
                puts.pop(address, None)
                puts[address] = put
                owners[address] = i
        merged = list(puts.values())
        try:
            outcome = writer.attempt(merged)
        except MemoryLedgerError:
            alone.extend(writing)  # not about one put: each call on its own
            break
        except Exception as e:  # noqa: BLE001 - a defect: every writing call hears of it
            for i in writing:
                outcomes[i] = e
            break
        if not isinstance(outcome, RefusedWrite):
            break
        if outcome.put is None:
            alone.extend(writing)
            break
        refused = merged[outcome.put]
        owner = owners[(refused.namespace, refused.key)]
        writing.remove(owner)
        alone.append(owner)
    for i in sorted(alone):
        try:
            writer.apply(collapse(calls[i].puts))
        except Exception as e:  # noqa: BLE001 - the call's own error, typed by the writer
            outcomes[i] = e
    return outcomes


def _replaced_refusals(
    calls: Sequence[Call], writing: list[int], writer: Writer
) -> dict[int, BaseException]:
    """The calls whose put the engine would refuse although a later call's put of the same
    address replaces it in the merged batch (so the engine never sees it): each with the
    error it would get alone (:meth:`Writer.check`; equal puts checked once). A put replaced
    within its own call is not checked, as in ``batch``."""
    last: dict[tuple[tuple[str, ...], str], int] = {}
    for i in writing:
        for put in calls[i].puts:
            last[(put.namespace, put.key)] = i
    refused: dict[int, BaseException] = {}
    checked: dict[Any, BaseException | None] = {}
    for i in writing:
        for put in collapse(calls[i].puts):
            if last[(put.namespace, put.key)] == i or put.value is None:
                continue
            key = _hashable(put)
            error = checked.get(key, _UNCHECKED) if key is not None else _UNCHECKED
            if error is _UNCHECKED:
                error = writer.check(put)
                if key is not None:
                    checked[key] = error
            if isinstance(error, BaseException):
                refused[i] = error
                break
    return refused


_UNCHECKED = RuntimeError("unchecked")
"""A put not checked yet (a marker)."""


def _hashable(put: Put) -> Any:
    """``put`` as a key for the checks' memo (None: a value that cannot be one)."""
    try:
        return (put.namespace, put.key, msgspec.json.encode(put.value), put.fields, put.ttl)
    except (TypeError, ValueError, msgspec.EncodeError):  # a lone surrogate: UnicodeEncodeError
        return None


class _ReadCache:
    """The answers of the tick's reads by op: equal ops are read once, and a repeated
    op answered with a copy (:func:`_copied`). An op holding a dict or list (a search
    filter) is not hashable: it is keyed by its ``repr`` and compared."""

    def __init__(self) -> None:
        self._hashed: dict[Op, Result | BaseException] = {}
        self._other: dict[str, list[tuple[Op, Result | BaseException]]] = {}

    def get(self, op: Op, read: Callable[[Op], Result]) -> Result | BaseException:
        try:
            return _copied(self._hashed[op])
        except KeyError:
            answer = self._hashed[op] = _read(op, read)
            return answer
        except TypeError:
            pass
        same = self._other.setdefault(repr(op), [])
        for seen, answer in same:
            if seen == op:
                return _copied(answer)
        answer = _read(op, read)
        same.append((op, answer))
        return answer


def _copied(answer: Result | BaseException) -> Result | BaseException:
    """A read's answer for another call: its items (``Item``, ``SearchItem``) copied with
    their values (``copy.deepcopy``), so two calls never share a value they may edit; an
    error or a list of namespaces (tuples of strings) as it is."""
    if isinstance(answer, Item):
        return copy.deepcopy(answer)
    if isinstance(answer, list) and answer and isinstance(answer[0], Item):
        return copy.deepcopy(answer)
    return answer


def _read(op: Op, read: Callable[[Op], Result]) -> Result | BaseException:
    try:
        return read(op)
    except Exception as e:  # noqa: BLE001 - the op's own error, for its call only
        return e


def _answers(call: Call, read: Callable[[Op], Result], cache: _ReadCache) -> Outcome:
    answers: list[Result] = []
    for op in call.ops:
        if isinstance(op, PutOp):
            answers.append(None)
            continue
        answer: Any = cache.get(op, read)
        if isinstance(answer, BaseException):
            return answer
        answers.append(list(answer) if isinstance(answer, list) else answer)
    return answers
