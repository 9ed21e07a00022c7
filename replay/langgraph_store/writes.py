"""Writing LangGraph puts as engine commands: a put is a ``remember`` of a keyed fact, a
delete (a put of None) and a TTL expiry are a ``forget``.

Every write is an engine command, so the secret door, the one decision path and the
namespace rules apply as to any other caller: a batch of puts and deletes is ONE
``MemoryEngine.apply_batch`` (session ``langgraph-<hex>``: one transaction, one sync); a TTL
expiry is a direct ``forget`` whose session id starts ``langgraph-ttl-`` (its recorded
reason: ``memory-ledger explain`` and :meth:`LedgerStore.history` show it).
:meth:`Writer.apply` is the one place a batch is sent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from memory_ledger.commands.engine import DirectCommands, Forget, Remember
from memory_ledger.commands.engine.batch import KEY_NOT_VACANT, check_op
from memory_ledger.commands.errors import (
    CommandRejectedError,
    SupersededTargetError,
    UnknownMemoryError,
)
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.replay.langgraph_store.records import PREDICATE, encode_record, subject_of

if TYPE_CHECKING:
    from uuid import UUID

    from memory_ledger.commands.engine import MemoryEngine
    from memory_ledger.ledger.ids import Namespace
    from memory_ledger.replay.langgraph_store.reads import Current, ItemReader

__all__ = ["EXPIRY_PREFIX", "ExpiryJudge", "Put", "RefusedWrite", "Writer", "in_langgraph_words"]

EXPIRY_PREFIX = "langgraph-ttl-"
"""Session id prefix of a TTL expiry (its recorded reason)."""
PUT_PREFIX = "langgraph-"
"""Session id prefix of a batch of puts and deletes (the store as the caller in explain)."""


_RETRIES = 5


class Put(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One write of a batch after collapsing: ``value`` None deletes; ``fields`` are the
    paths indexed (None: the whole document; ``()``: not indexed); ``ttl`` in minutes;
    ``occurred_at``: when it happened (an import keeps the original time). Not tracked by
    the garbage collector (it holds no cycle; a JSON value cannot): tens of thousands wait
    in a tick's queue at once."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any] | None
    fields: tuple[str, ...] | None = None
    ttl: float | None = None
    occurred_at: datetime | None = None


Refusal = CommandRejectedError | InvalidArgumentError
"""A typed refusal of one put: the engine's (:class:`CommandRejectedError`) or its
argument's, found while it is encoded (:class:`InvalidArgumentError`: a lone surrogate in
its value, key or namespace, ``not_utf8``; a TTL that is no number of minutes)."""


class RefusedWrite(msgspec.Struct, frozen=True, kw_only=True):
    """A batch of puts the engine refused (:meth:`Writer.attempt`): ``put`` is the index of
    the put it named (None: the batch as a whole), ``error`` the refusal in LangGraph's
    words (:func:`in_langgraph_words`), or the put's own argument error. Nothing of the
    batch was written."""

    put: int | None
    error: Refusal


class _Unencodable(Exception):
    """A put of a batch that cannot be recorded (raised and caught in this module)."""

    def __init__(self, put: int, error: Refusal) -> None:
        super().__init__(str(error))
        self.put = put
        self.error = error


def _remember(put: Put) -> Remember:
    """The engine op that records ``put`` (a value; not a delete).

    :raises CommandRejectedError: the value cannot be recorded (``value_not_json``,
        ``value_too_large``, ``address_too_long``).
    :raises InvalidArgumentError: the value, key or a namespace label holds a lone
        surrogate (``not_utf8``), or the TTL is no number of minutes in range."""
    assert put.value is not None
    record = encode_record(put.namespace, put.key, put.value, put.fields, put.ttl)
    return Remember(
        statement=record.statement,
        subject=record.subject,
        predicate=PREDICATE,
        value=record.value,
        tags=record.tags,
        occurred_at=put.occurred_at,
        document=True,
    )


def _op_index(parameter: str | None) -> int | None:
    """``i`` of an engine parameter ``ops[i]...`` (None: another parameter)."""
    if not parameter or not parameter.startswith("ops[") or "]" not in parameter:
        return None
    digits = parameter[4 : parameter.index("]")]
    return int(digits) if digits.isdigit() else None


class ExpiryJudge(Protocol):
    """What judges TTLs for a writer (``ttl.Refresher``): the time now and whether an
    item's TTL has run out at a time."""

    clock: Callable[[], datetime]

    def expired(self, current: Current, now: datetime) -> bool:
        """Whether ``current``'s TTL has run out at ``now``."""
        ...


class Writer:
    """Sends puts to the engine for one engine namespace.

    :param refresher: judges TTLs (``ttl.Refresher.expired``); with it, a write to an
        address whose value's TTL has run out records that expiry first, as a sweep would
        have (:meth:`expire_lapsed`). None: no write looks at TTLs.
    """

    def __init__(
        self,
        engine: MemoryEngine,
        namespace: Namespace,
        reader: ItemReader,
        refresher: ExpiryJudge | None = None,
    ) -> None:
        self.engine = engine
        self.namespace = namespace
        self.reader = reader
        self.refresher = refresher
        self.expiries = DirectCommands(engine, EXPIRY_PREFIX)

    def apply(self, puts: Sequence[Put]) -> int:
        """Send ``puts`` (already collapsed: one per address) as ONE engine command
        (:meth:`MemoryEngine.apply_batch`: one transaction, one sync, all or nothing); the
        ledger position of its last event (0: nothing to write). The one place a batch
        reaches the engine. A delete whose value was replaced or deleted meanwhile (the
        engine refuses the whole batch) is re-read and the batch sent again; so is a delete
        of an address found empty that holds a value when the batch is decided (the
        engine's ``vacant`` check: a value put meanwhile never survives a delete decided
        after it).

        :raises CommandRejectedError: a value the engine refuses (a secret-shaped value:
            ``secret_detected``; longer than ``MAX_VALUE_CHARS``: ``value_too_large``; not
            JSON: ``value_not_json``); ``parameter`` names ``value``, ``key`` or
            ``namespace`` and the message speaks of the put, never of the engine's fields
            (:func:`in_langgraph_words`); nothing was written.
        :raises InvalidArgumentError: a put whose value, key or namespace holds a lone
            surrogate (``not_utf8``), or whose TTL is out of range; nothing was written.
        """
        outcome = self.attempt(puts)
        if isinstance(outcome, RefusedWrite):
            raise outcome.error
        return outcome

    def attempt(self, puts: Sequence[Put]) -> int | RefusedWrite:
        """:meth:`apply`, with a refusal returned instead of raised: a
        :class:`RefusedWrite` naming the put the engine refused (its index in ``puts``),
        when the engine names one; nothing was written then. Any other error of the engine
        (the ledger unavailable, the namespace erased) is raised as :meth:`apply` raises it.
        """
        expiring = True
        for attempt in range(_RETRIES):
            try:
                ops, sources, vacant = self._ops(puts)
            except _Unencodable as e:
                return RefusedWrite(put=e.put, error=e.error)
            if expiring:  # once, before the batch; then its ops are read again
                expiring = False
                if self.expire_lapsed(puts):
                    ops, sources, vacant = self._ops(puts)
            if not ops:
                return 0
            try:
                result = self.engine.apply_batch(
                    self.namespace, ops, session_prefix=PUT_PREFIX, vacant=vacant
                )
            except (SupersededTargetError, UnknownMemoryError):
                if attempt == _RETRIES - 1 or not any(isinstance(op, Forget) for op in ops):
                    raise
            except CommandRejectedError as e:
                if e.reason_code == KEY_NOT_VACANT and attempt < _RETRIES - 1:
                    continue  # a value was put where a delete found none: read again
                index = _op_index(e.parameter)
                put = sources[index] if index is not None and index < len(sources) else None
                return RefusedWrite(put=put, error=in_langgraph_words(e, len(ops)))
            else:
                # the writer keeps the read model current: a get right after reads no ledger
                self.reader.wrote(result, [(put.namespace, put.key) for put in puts])
                return result.position
        return 0  # pragma: no cover (the loop returns or raises)

    def _ops(
        self, puts: Sequence[Put]
    ) -> tuple[list[Remember | Forget], list[int], list[tuple[str, str]]]:
        """The engine ops of ``puts``, for each the index of the put it came from, and the
        engine keys of the deletes of addresses that hold nothing (no op: the batch's
        ``vacant`` keys, checked when it is decided).

        :raises _Unencodable: a put that cannot be recorded (:func:`_remember`'s errors)."""
        ops: list[Remember | Forget] = []
        sources: list[int] = []
        vacant: list[tuple[str, str]] = []
        for index, put in enumerate(puts):
            if put.value is None:
                current = self.reader.current(put.namespace, put.key)
                if current is not None:
                    ops.append(Forget(target=current.memory_id))
                    sources.append(index)
                else:
                    vacant.append((subject_of(put.namespace, put.key), PREDICATE))
                continue
            try:
                ops.append(_remember(put))
            except (CommandRejectedError, InvalidArgumentError) as e:
                raise _Unencodable(index, e) from None
            sources.append(index)
        return ops, sources, vacant

    def check(self, put: Put) -> Refusal | None:
        """What the engine would refuse ``put`` with, sent alone (None: nothing; a delete
        is never refused here), told in LangGraph's words, or the put's own argument error
        (:func:`_remember`); nothing is written. For a put that a later put of its address
        replaces before anything is sent."""
        if put.value is None:
            return None
        try:
            op = _remember(put)
        except (CommandRejectedError, InvalidArgumentError) as e:
            return e
        try:
            check_op(op)
        except CommandRejectedError as e:
            return in_langgraph_words(e, 1)
        return None

    def expire_lapsed(self, puts: Sequence[Put]) -> int:
        """Record the expiry of each value at the addresses of ``puts`` whose TTL has run
        out now (:meth:`expire`, a command of its own before the puts' batch), so that a
        put or delete decides against the item as a sweep at that moment would have left
        it: a put after an expiry starts a new item (a new ``created_at``) and the history
        shows the expiry, whether a sweep ran before the put or not. How many expiries were
        recorded. Only addresses that may hold a value with a TTL are read
        (:meth:`ItemReader.with_ttl`)."""
        if self.refresher is None or not puts:
            return 0
        addresses = list(dict.fromkeys((put.namespace, put.key) for put in puts))
        holders = self.reader.with_ttl(addresses)
        if not holders:
            return 0
        now = self.refresher.clock()
        done = 0
        for namespace, key in holders:
            current = self.reader.current(namespace, key)
            if current is not None and self.refresher.expired(current, now):
                done += 1 if self.expire(namespace, key, current.memory_id) else 0
        return done

    def expire(self, namespace: tuple[str, ...], key: str, memory: UUID) -> int:
        """Record the expiry of ``memory``, the value at the address whose TTL ran out (a
        forget under :data:`EXPIRY_PREFIX`); 0 and nothing written when the address holds
        another value now (put again meanwhile) or none."""
        for _ in range(_RETRIES):
            current = self.reader.current(namespace, key)
            if current is None or current.memory_id != memory:
                return 0
            try:
                return self.expiries.forget(self.namespace, memory).position
            except (SupersededTargetError, UnknownMemoryError):
                continue  # replaced or deleted meanwhile: read again
        return 0


_WORDS = {"statement": "value", "value": "value", "subject": "key", "tags": "key"}
"""The LangGraph word for each field of the engine's item a put fills (``records``): the
statement is the value's indexed text, the subject and address tag are the key's digest
and address."""
_SAYS = {
    "secret_detected": "holds a secret-shaped string; nothing was written",
    "prompt_injection": "carries a prompt-injection marker; nothing was written",
    "forbidden_character": "holds a character no stored text may hold",
    "field_too_long": "is too long",
    "value_too_large": "is too large",
}


def in_langgraph_words(error: CommandRejectedError, writes: int) -> CommandRejectedError:
    """``error`` (the engine's refusal of ``ops[i]`` of a batch of ``writes`` engine ops) told
    in LangGraph's words: ``parameter`` is ``value`` or ``key`` instead of the engine's
    ``ops[i].statement``, ``subject`` or ``tags`` (``ops`` for the batch as a whole), and
    the message names the write by its place in the batch when the engine says it (never
    the text refused, nor the key: a refused key may be the secret). The reason code is
    the engine's."""
    parameter = error.parameter or ""
    name = parameter.rsplit(".", 1)[-1].split("[", 1)[0]  # ops[2].tags[0] -> tags
    if name == "ops":  # the batch as a whole (more writes than one command holds)
        message = f"the batch was refused ({error.reason_code}): {error}"
        return CommandRejectedError(message, error.reason_code, parameter="ops")
    word = _WORDS.get(name, "value")
    place = ""
    if writes > 1 and parameter.startswith("ops[") and "]" in parameter:
        place = f" of write {parameter[4 : parameter.index(']')]} of the batch (counting from 0)"
    says = _SAYS.get(error.reason_code, "was refused")
    what = "namespace or key" if name == "tags" else word  # the tag is the item's address
    message = f"the {what}{place} {says} ({error.reason_code})"
    return CommandRejectedError(message, error.reason_code, parameter=word)
