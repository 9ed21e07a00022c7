"""The key store of a PostgreSQL ledger: one row in ``<events table>_keys`` beside it.

Hosts sharing a PostgreSQL ledger share its data keys (each host's store folder holds only
its projection files). The table holds the same
:class:`~memory_ledger.ledger.key_store.KeyStoreState` the LMDB store's file holds, as one msgpack
value with a ``generation`` counter:

- :meth:`PostgresKeyStore.update` reads the row ``FOR UPDATE`` (serialising writers across
  hosts), applies the change and writes the new value in the same transaction;
- after a change that destroyed keys (an erasure, a rotation) the table is rewritten by
  ``VACUUM FULL``, so the old row versions holding the wrapped keys leave the table's files
  (the server's write-ahead log and its backups keep them until recycled: the README's
  "Erasure" section says what a host must do);
- :meth:`PostgresKeyStore.changed` asks the server for the generation at most once a
  second (it runs before every append), so a key erased by another host is dropped here
  within about a second;
- that second is never a window for writes: the key store hands the recorder
  :meth:`PostgresKeyStore.destroyed_key_error`, which every append of sealed states runs in
  its own transaction, locking the row ``FOR SHARE`` (an erasure's ``update`` holds it ``FOR
  UPDATE``). An append thus commits before the keys are destroyed, or sees them destroyed
  and is refused with :class:`~memory_ledger.ledger.key_errors.NamespaceErasedError`
  (nothing written; the next :meth:`changed` says True, so the keyring rereads and later
  calls fail before sealing).

Driver errors are raised as the ledger's typed errors (``PostgresLedgerApplicationRecorder.
_typed``), naming the ledger without its password.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Any, TypeVar
from uuid import UUID

import msgspec
import psycopg
from eventsourcing.persistence import PersistenceError
from psycopg.sql import SQL, Identifier

from memory_ledger.ledger.errors import LedgerConnectionError
from memory_ledger.ledger.key_errors import KeyStoreError, NamespaceErasedError
from memory_ledger.ledger.key_store import KeyStoreState

if TYPE_CHECKING:
    from memory_ledger.ledger.postgres import PostgresLedgerApplicationRecorder

__all__ = ["PostgresKeyStore"]

T = TypeVar("T")
_decoder = msgspec.msgpack.Decoder(KeyStoreState)
_encoder = msgspec.msgpack.Encoder()


_ASK_NOW = -math.inf
"""``_checked`` that makes the next :meth:`PostgresKeyStore.changed` ask the server,
whatever the monotonic clock reads (it counts from boot: soon after one, it is below any
``poll_interval``, which a 0.0 here made a wait of up to ``poll_interval``)."""


class PostgresKeyStore:
    """The data keys of a PostgreSQL ledger (see the module doc).

    :param recorder: the ledger's application recorder (its datastore, schema and table).
    :param read_only: refuse writes, and never create the table.
    :param poll_interval: seconds between two generation checks of :meth:`changed`.
    :raises LedgerError: (from its methods) the server cannot be reached or refused.
    :raises KeyStoreError: the stored value is damaged, or a write on a read-only store.
    """

    def __init__(
        self,
        recorder: PostgresLedgerApplicationRecorder,
        *,
        read_only: bool = False,
        poll_interval: float = 1.0,
    ) -> None:
        self.recorder = recorder
        self.read_only = read_only
        self.poll_interval = poll_interval
        datastore = recorder.datastore
        table = f"{recorder.events_table_name}_keys"
        recorder.check_identifier_length(table)
        self.description = f"{recorder.ledger_path} table {table}"
        kw = {"schema": Identifier(datastore.schema), "table": Identifier(table)}
        self._sql_create = SQL(
            "CREATE TABLE IF NOT EXISTS {schema}.{table} ("
            "id int PRIMARY KEY CHECK (id = 1), generation bigint NOT NULL, state bytea NOT NULL)"
        ).format(**kw)
        self._sql_exists = SQL("SELECT to_regclass(%s)")
        self._qualified = f"{datastore.schema}.{table}"
        self._sql_advisory = "SELECT pg_advisory_xact_lock(hashtext(%s))"
        self._lock_name = f"memory-ledger:{self._qualified}"
        self._sql_select = SQL(
            "SELECT generation, state FROM {schema}.{table} WHERE id = 1"
        ).format(**kw)
        self._sql_generation = SQL("SELECT generation FROM {schema}.{table} WHERE id = 1").format(
            **kw
        )
        self._sql_lock = SQL(
            "SELECT generation, state FROM {schema}.{table} WHERE id = 1 FOR UPDATE"
        ).format(**kw)
        self._sql_upsert = SQL(
            "INSERT INTO {schema}.{table} (id, generation, state) VALUES (1, %s, %s) "
            "ON CONFLICT (id) DO UPDATE SET generation = excluded.generation, "
            "state = excluded.state"
        ).format(**kw)
        self._sql_vacuum = SQL("VACUUM FULL {schema}.{table}").format(**kw)
        self._sql_share = SQL(
            "SELECT generation, CASE WHEN generation = %s THEN NULL ELSE state END "
            "FROM {schema}.{table} WHERE id = 1 FOR SHARE"
        ).format(**kw)
        self._seen: int | None = None
        self._checked = _ASK_NOW
        self._created = False
        self._destroyed: tuple[int, dict[bytes, UUID]] = (-1, {})
        """``(generation, {destroyed key id: its namespace id})`` as last read by
        :meth:`destroyed_key_error` (replaced whole: threads may append at once)."""
        recorder.sealed_key_check = self.destroyed_key_error

    def _guard(self, action: Callable[[], T], *, retry: bool = True) -> T:
        """``action()`` with the ledger's typed errors; with ``retry``, run again on a new
        connection while the connection fails, as appends are
        (:meth:`PostgresLedgerApplicationRecorder.retrying`: a connection the server dropped
        is not an error while the server is up). Every action here is safe to run again."""
        try:
            if retry:
                return self.recorder.retrying(lambda _retried: action())
            return action()
        except (PersistenceError, psycopg.Error) as e:
            raise self.recorder._typed(e) from None  # noqa: SLF001 (the recorder's translation)

    def _decode(self, data: bytes) -> KeyStoreState:
        try:
            return _decoder.decode(data)
        except msgspec.DecodeError as e:
            msg = f"the key store {self.description} is damaged: {e}"
            raise KeyStoreError(msg, reason_code="key_store_damaged") from None

    def _table_exists(self, curs: Any) -> bool:
        curs.execute(self._sql_exists, (self._qualified,))
        row = curs.fetchone()
        value = row[0] if not isinstance(row, dict) else next(iter(row.values()))
        return value is not None

    def _ensure_table(self) -> None:
        if self._created or self.read_only:
            return

        def create() -> None:
            with self.recorder.datastore.transaction(commit=True) as curs:
                curs.execute(self._sql_advisory, (self._lock_name,))
                curs.execute(self._sql_create)

        self._guard(create)
        self._created = True

    @staticmethod
    def _values(row: Any) -> tuple[int, bytes]:
        if isinstance(row, dict):
            return int(row["generation"]), bytes(row["state"])
        return int(row[0]), bytes(row[1])

    def read(self) -> KeyStoreState:
        """The stored state (empty when nothing was stored yet)."""

        def select() -> tuple[int, bytes] | None:
            with self.recorder.datastore.transaction(commit=False) as curs:
                if not self._created and not self._table_exists(curs):
                    return None
                curs.execute(self._sql_select)
                row = curs.fetchone()
            return None if row is None else self._values(row)

        found = self._guard(select)
        self._checked = time.monotonic()
        if found is None:
            self._seen = 0
            return KeyStoreState()
        self._seen = found[0]
        return self._decode(found[1])

    def changed(self) -> bool:
        """Whether another writer changed the keys since the last :meth:`read` (asks the
        server at most once per ``poll_interval``, once, without retrying; False in between,
        and while the server cannot be reached: the next call asks again)."""
        now = time.monotonic()
        if now - self._checked < self.poll_interval:
            return False
        self._checked = now

        def generation() -> int:
            with self.recorder.datastore.transaction(commit=False) as curs:
                if not self._created and not self._table_exists(curs):
                    return 0
                curs.execute(self._sql_generation)
                row = curs.fetchone()
            if row is None:
                return 0
            return int(row["generation"] if isinstance(row, dict) else row[0])

        try:
            return self._guard(generation, retry=False) != self._seen
        except LedgerConnectionError:
            # The server is away: the command's own append retries (and fails typed if it
            # stays away); ask again at the next call instead of failing a read here.
            self._checked = _ASK_NOW
            return False

    def destroyed_key_error(
        self, curs: psycopg.Cursor[Any], key_ids: Collection[bytes]
    ) -> NamespaceErasedError | None:
        """Run by the recorder inside an append's transaction (its table lock held) for a
        batch sealed with the data keys ``key_ids`` (16-byte ids): lock the key row ``FOR
        SHARE`` (until the append commits or rolls back; an erasure's :meth:`update` waits
        for it, or it waits for the erasure and reads the keys it left) and return the error
        to refuse the batch with when one of those keys is destroyed, else None. The
        destroyed keys are decoded again only when the generation changed.

        After a refusal :meth:`changed` says True, so the keyring rereads the keys at its
        next refresh and refuses the namespace before sealing anything.

        :raises psycopg.Error: the server failed (the recorder translates and retries it).
        :raises KeyStoreError: the stored value is damaged.
        """
        known, destroyed = self._destroyed
        curs.execute(self._sql_share, (known,))
        row = curs.fetchone()
        if row is None:  # no key stored yet: none destroyed
            return None
        generation, data = (row["generation"], row["state"]) if isinstance(row, dict) else row
        if data is not None:
            state = self._decode(bytes(data))
            destroyed = {r.key_id.bytes: r.namespace_id for r in state.keys if r.erased}
            self._destroyed = (int(generation), destroyed)
        erased = sorted({str(destroyed[k]) for k in key_ids if k in destroyed})
        if not erased:
            return None
        self._seen = None  # the keyring's next refresh rereads the keys
        self._checked = _ASK_NOW
        msg = (
            f"namespace {', '.join(erased)} was erased (by this host or another) before this "
            "write committed; nothing was written (use another principal or scope id)"
        )
        return NamespaceErasedError(msg)

    def update(self, change: Callable[[KeyStoreState], tuple[KeyStoreState | None, T]]) -> T:
        """Apply ``change`` to the freshest state under the row lock; store the result in
        the same transaction (durable on commit). A change that destroys wrapped keys is
        followed by ``VACUUM FULL`` of the table. A broken connection is retried on a new
        one, ``change`` then runs again on the state it finds (so it must recognise its own
        earlier result: a commit whose reply was lost).

        :raises KeyStoreError: the store is read-only.
        """
        if self.read_only:
            msg = f"the key store {self.description} is open read-only"
            raise KeyStoreError(msg, reason_code="read_only")
        self._ensure_table()
        destroyed = False

        def run() -> tuple[T, int]:
            nonlocal destroyed
            with self.recorder.datastore.transaction(commit=True) as curs:
                # The row lock alone serializes nothing while the row does not exist yet:
                # two hosts creating the first state (the store key) would both read none
                # and the later upsert would replace the other's key, which that host
                # keeps deriving ids with. The table's advisory lock serializes every
                # update, the first included (updates are rare: a new namespace's key).
                curs.execute(self._sql_advisory, (self._lock_name,))
                curs.execute(self._sql_lock)
                row = curs.fetchone()
                generation, state = (0, KeyStoreState())
                if row is not None:
                    generation, data = self._values(row)
                    state = self._decode(data)
                new, result = change(state)
                if new is None:
                    return result, generation
                before = {r.key_id: r.wrapped for r in state.keys}
                destroyed = any(before.get(r.key_id) not in (None, r.wrapped) for r in new.keys)
                curs.execute(self._sql_upsert, (generation + 1, _encoder.encode(new)))
                return result, generation + 1

        result, generation = self._guard(run)
        self._seen = generation
        if destroyed:
            self._vacuum()
        return result

    def _vacuum(self) -> None:
        def vacuum() -> None:
            with self.recorder.datastore.get_connection() as conn:
                autocommit = conn.autocommit
                conn.autocommit = True
                try:
                    conn.execute(self._sql_vacuum)
                finally:
                    conn.autocommit = autocommit

        self._guard(vacuum)
