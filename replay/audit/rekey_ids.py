"""The id map of an id format step (``memory-ledger migrate --store DIR``; :mod:`.rekey`).

A store of id format 1 holds, in its records and its key store, ids that are uuid5 digests
of names and statements (:mod:`memory_ledger.ledger.ids`). Every such id is a version-5
UUID; nothing else the engine stores is (event ids of other kinds are uuid4: key ids,
erasure command ids, store ids). The step therefore maps **every version-5 UUID** it meets:

- to its keyed digest (:class:`~memory_ledger.ledger.digests.IdDigests` of format 2) where
  the event that defines it names its inputs: a namespace (and its tenant and principal), a
  session (``SessionOpened``, a direct command's ``DirectCommandApplied`` and every event
  carrying a ``session_id``), a memory
  (``MemoryActivated.normalized``), an explicit command, a candidate, a ``forget_all``
  command and its stream;
- to a digest under a **throwaway key** (random, never stored, gone when the step ends)
  otherwise: ids derived from other ids with inputs the records do not carry (snapshot ids,
  recall streams), and every id of an erased namespace, whose names nobody can read any
  more;
- to itself for the stream of a ``NamespaceErased`` record (derived from its random
  command id: nothing to hide, and the engine finds an erasure's record by it).

Within one run the same old id always maps to the same new id, so streams stay streams and
references stay references.

:class:`IdRewriter` learns the map from decoded events (:meth:`IdRewriter.learn`, a first
pass over the ledger), resolves it once the target's digests exist
(:meth:`IdRewriter.resolve`), then rewrites events and key records. The map lives in this
process's memory only: written anywhere, the old->new pairs would confirm guesses of the
old (public) digests.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any
from uuid import UUID, uuid5

import msgspec

from memory_ledger.ledger import ids
from memory_ledger.ledger.digests import IdDigests, keyed_uuid
from memory_ledger.ledger.events import (
    ERASURE_NAMESPACE,
    CandidateExtracted,
    CandidateRejected,
    DirectCommandApplied,
    ErasedPayload,
    ExplicitCommandApplied,
    LedgerEvent,
    MemoryActivated,
    NamespaceErased,
    NamespaceForgotten,
    SessionOpened,
)
from memory_ledger.ledger.ids import ID_ROOT, Namespace
from memory_ledger.ledger.key_store import DataKeyRecord

__all__ = ["IdRewriter"]

_NAME_DERIVED = 5
"""The UUID version of every id format 1 derives from names (uuid5)."""
_ID_STRINGS = frozenset({"supersedes", "conflicts_with", "evidence", "decision_evidence"})
"""Fields whose strings may hold memory ids (an extractor's relations; evidence)."""
_FORGET_SEARCH = 100_000
"""How far before its position a ``forget_all`` record's decision head is looked for."""


class IdRewriter:
    """Maps the ids of a format-1 store to format 2 (see the module doc)."""

    def __init__(self) -> None:
        self._pending: list[tuple[UUID, Callable[[IdDigests], UUID]]] = []
        self._outer: list[tuple[UUID, Callable[[IdDigests], UUID]]] = []
        self._map: dict[UUID, UUID] = {}
        self._throwaway = os.urandom(32)
        self.namespaces: set[Namespace] = set()
        """The live namespaces the ledger names (read from events that decoded)."""
        self.unknown = 0
        """How many old ids were mapped under the throwaway key."""

    # Pass 1 ------------------------------------------------------------------------------

    def _later(self, old: UUID, new: Callable[[IdDigests], UUID]) -> None:
        self._pending.append((old, new))

    def learn(self, event: LedgerEvent, position: int) -> None:
        """Note the ids ``event`` (at ``position``) defines, with how to derive their keyed
        form (an :class:`ErasedPayload` defines none)."""
        ns = event.namespace
        if isinstance(event, NamespaceErased):  # its stream derives from a random command id
            self._map[event.originator_id] = event.originator_id
        if isinstance(event, ErasedPayload) or ns == ERASURE_NAMESPACE:
            return
        self.learn_namespace(ns)
        self._learn_inside(event, ns, position)

    def learn_namespace(self, ns: Namespace) -> None:
        """Note the namespace, tenant and principal ids of ``ns`` (also of an erased
        namespace whose records were stored in clear, before the store encrypted: its
        erasure record must keep naming it, so that those records stay hidden)."""
        if ns not in self.namespaces:
            self.namespaces.add(ns)
            old_ns, old_tenant, old_principal = (
                uuid5(ID_ROOT, "namespace\x1f" + ns.key()),
                uuid5(ID_ROOT, "tenant\x1f" + ns.tenant),
                uuid5(ID_ROOT, "principal\x1f" + ns.tenant + "\x1f" + ns.principal),
            )
            self._outer.append((old_ns, lambda d: d.namespace_id(ns)))
            self._outer.append((old_tenant, lambda d: d.tenant_id(ns.tenant)))
            self._outer.append((old_principal, lambda d: d.principal_id(ns.tenant, ns.principal)))

    def _learn_inside(self, event: LedgerEvent, ns: Namespace, position: int) -> None:
        session = getattr(event, "session_id", None)
        if isinstance(session, str):
            sid = session
            self._later(ids.session_stream_id(ns, sid), lambda d: d.session_stream_id(ns, sid))
            if isinstance(event, SessionOpened | DirectCommandApplied):  # a session stream
                self._later(event.originator_id, lambda d: d.session_stream_id(ns, sid))
            if isinstance(event, MemoryActivated):
                norm = event.normalized
                self._later(event.originator_id, lambda d: d.memory_id(ns, norm))
            elif isinstance(event, ExplicitCommandApplied):
                turn, intent, statement = event.turn_id, event.intent, event.statement
                self._later(
                    event.command_id,
                    lambda d: d.command_id(
                        ns, d.session_stream_id(ns, sid), turn, intent, statement
                    ),
                )
            elif isinstance(event, CandidateExtracted | CandidateRejected):
                turn, index = event.turn_id, event.index
                self._later(
                    event.candidate_id,
                    lambda d: ids.candidate_id(d.session_stream_id(ns, sid), turn, index),
                )
        if isinstance(event, NamespaceForgotten):
            after = _forget_head(ns, event.command_id, position)
            if after is not None:
                self._later(event.command_id, lambda d: d.bulk_forget_command_id(ns, after))
                self._later(
                    event.originator_id,
                    lambda d: d.bulk_forget_stream_id(ns, d.bulk_forget_command_id(ns, after)),
                )

    def resolve_outer(self, digests: IdDigests) -> None:
        """Derive the noted namespace, tenant and principal ids under ``digests`` (the
        target store's, format 2: under its store key), before the key store's records are
        rewritten with them."""
        for old, new in self._outer:
            self._map.setdefault(old, new(digests))
        self._outer = []

    def resolve(self, digests: IdDigests) -> None:
        """Derive every other noted id under ``digests`` (ids inside namespaces: under each
        namespace's key, which the rewritten key store gives)."""
        self.resolve_outer(digests)
        for old, new in self._pending:
            self._map.setdefault(old, new(digests))
        self._pending = []

    # Pass 2 ------------------------------------------------------------------------------

    def new_id(self, old: UUID) -> UUID:
        """The format-2 id of ``old`` (itself when not name-derived)."""
        if old.version != _NAME_DERIVED:
            return old
        found = self._map.get(old)
        if found is None:
            found = self._map[old] = keyed_uuid(self._throwaway, "migrated\x1f" + str(old))
            self.unknown += 1
        return found

    def _new_text(self, value: str) -> str:
        if len(value) != 36:  # noqa: PLR2004 (the text form of a UUID)
            return value
        try:
            old = UUID(value)
        except ValueError:
            return value
        found = self._map.get(old)
        return value if found is None else str(found)

    def _value(self, value: Any, strings: bool) -> Any:
        if isinstance(value, UUID):
            return self.new_id(value)
        if strings and isinstance(value, str):
            return self._new_text(value)
        if isinstance(value, tuple):
            return tuple(self._value(v, strings) for v in value)
        if isinstance(value, msgspec.Struct) and not isinstance(value, Namespace):
            return self.struct(value)
        return value

    def struct(self, value: Any) -> Any:
        """``value`` (an event or one of its parts) with every id rewritten."""
        changes = {}
        for name in value.__struct_fields__:
            old = getattr(value, name)
            new = self._value(old, name in _ID_STRINGS)
            if new is not old:
                changes[name] = new
        return msgspec.structs.replace(value, **changes) if changes else value

    def key_record(self, record: DataKeyRecord, *, ids_from_data_key: bool) -> DataKeyRecord:
        """``record`` with its namespace, tenant and principal ids rewritten; a live
        record's namespace ids keyed by its data key when ``ids_from_data_key``."""
        return msgspec.structs.replace(
            record,
            namespace_id=self.new_id(record.namespace_id),
            tenant_id=self.new_id(record.tenant_id),
            principal_id=self.new_id(record.principal_id),
            ids_from_data_key=ids_from_data_key and not record.erased,
        )


def _forget_head(namespace: Namespace, command: UUID, position: int) -> int | None:
    """The ledger head a ``forget_all`` decided at (its command id derives from it)."""
    prefix = f"forget-all\x1f{namespace.key()}\x1f"
    for after in range(position - 1, max(-1, position - 1 - _FORGET_SEARCH), -1):
        if uuid5(ID_ROOT, prefix + str(after)) == command:
            return after
    return None
