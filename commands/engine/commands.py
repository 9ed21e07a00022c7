"""The engine's commands that change memory by name: direct commands (``remember``,
``forget``, ``correct``, ``pin``, ``forget_all``) and erasure by crypto-shredding
(``erase``, ``rotate_master_key``). A base of
:class:`~memory_ledger.commands.engine.memory_engine.MemoryStore`; the attributes below are set by
its ``__init__``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, cast
from uuid import UUID

import msgspec

from memory_ledger.commands.canonical.bulk_forget import forget_all_at
from memory_ledger.commands.engine.batch import (
    BATCH_SESSION_PREFIX,
    BatchOp,
    BatchResult,
    Remember,
    apply_batch,
)
from memory_ledger.commands.engine.direct import DirectCommands, DirectResult
from memory_ledger.commands.engine.encryption import ErasureReport, erase_namespaces
from memory_ledger.commands.engine.receipt import (
    ErasingEngine,
    ReceiptScanError,
    SigningKeySpec,
    load_signing_key,
    make_receipt,
)
from memory_ledger.commands.recall.index import NamespaceRecallIndex
from memory_ledger.commands.recall.lexical import SourceTranscripts, stem
from memory_ledger.commands.telemetry.spans import traced, traced_method
from memory_ledger.ledger.errors import MemoryLedgerError
from memory_ledger.ledger.ids import Namespace, normalize_statement
from memory_ledger.ledger.key_errors import MasterKeyError
from memory_ledger.ledger.keyring import Keyring, NamespaceMatch
from memory_ledger.ledger.master_key import MasterKeySpec, master_key_from
from memory_ledger.projections.columnar import session_key
from memory_ledger.projections.erasure import present_namespaces
from memory_ledger.projections.store import ProjectionStore, held_slots, remove_idle_slots

if TYPE_CHECKING:
    import duckdb

    from memory_ledger.commands.recall.semantic import SemanticChannel
    from memory_ledger.commands.store import MemoryStore
    from memory_ledger.projections.canonical import CanonicalMemory

__all__ = ["EngineCommands"]


class EngineCommands:
    """Direct commands and erasure of ``MemoryStore`` (one of its bases)."""

    keyring: Keyring
    recall_index: NamespaceRecallIndex
    canonical: CanonicalMemory
    transcripts: SourceTranscripts
    semantic: SemanticChannel | None
    _memory_maps: dict[str, tuple[int, str]]
    path: Path
    projections: ProjectionStore

    @property
    def _engine(self) -> MemoryStore:
        return cast("MemoryStore", self)

    # Direct commands (the short way in; see commands/engine/direct.py) ---------------------------

    def remember(
        self,
        namespace: Namespace,
        statement: str,
        *,
        subject: str | None = None,
        predicate: str | None = None,
        value: str | None = None,
        tags: Sequence[str] = (),
        occurred_at: datetime | None = None,
    ) -> DirectResult:
        """Store ``statement`` as canonical memory of ``namespace``, durable on return
        (:meth:`~memory_ledger.commands.engine.direct.DirectCommands.remember`; ``occurred_at``:
        when it was said, the value's valid time).
        """
        return DirectCommands(self._engine).remember(
            namespace,
            statement,
            subject=subject,
            predicate=predicate,
            value=value,
            tags=tags,
            occurred_at=occurred_at,
        )

    def forget(self, namespace: Namespace, statement_or_id: str | UUID) -> DirectResult:
        """Forget one memory of ``namespace`` by id or by its words, durable on return
        (:meth:`~memory_ledger.commands.engine.direct.DirectCommands.forget`).
        """
        return DirectCommands(self._engine).forget(namespace, statement_or_id)

    def correct(
        self,
        namespace: Namespace,
        statement: str,
        *,
        target: str | UUID | None = None,
        subject: str | None = None,
        occurred_at: datetime | None = None,
    ) -> DirectResult:
        """Supersede the memory ``target`` (or, without one, the memory ``statement``
        corrects: the same subject and attribute with another value; ``subject``, when
        given, decides whose) with ``statement``, durable on return
        (:meth:`~memory_ledger.commands.engine.direct.DirectCommands.correct`, which says how a
        target is chosen from words and what is refused; ``occurred_at``: when it was said, the
        new value's valid time).
        """
        return DirectCommands(self._engine).correct(
            namespace, statement, target=target, subject=subject, occurred_at=occurred_at
        )

    def pin(self, namespace: Namespace, statement_or_id: str | UUID) -> DirectResult:
        """Pin one memory of ``namespace`` by id or by its words (never pruned), durable on
        return (:meth:`~memory_ledger.commands.engine.direct.DirectCommands.pin`).
        """
        return DirectCommands(self._engine).pin(namespace, statement_or_id)

    def apply_batch(
        self,
        namespace: Namespace,
        ops: Iterable[BatchOp | str],
        *,
        session_prefix: str = BATCH_SESSION_PREFIX,
        vacant: Iterable[tuple[str, str]] = (),
    ) -> BatchResult:
        """Write ``ops`` (:class:`Remember` / :class:`Forget`, a string remembers itself) as
        ONE command of ``namespace``: one append condition, one transaction, one sync,
        durable and reconciled on return; refused whole, naming ``ops[i]``, before anything
        is written (:func:`commands.engine.batch.apply_batch`, which lists the errors).
        ``session_prefix`` names the caller in the batch's session id (``batch-<hex>``;
        e.g. ``langgraph-`` for the LangGraph store), so ``explain`` shows who wrote it.
        ``vacant``: (subject, predicate) keys that must hold nothing when the batch is
        decided (else ``key_not_vacant``, nothing written: a delete of a key found empty).
        """
        with traced(self, "apply_batch", namespace) as span:
            return span.result(
                apply_batch(
                    self._engine, namespace, ops, session_prefix=session_prefix, vacant=vacant
                )
            )

    def remember_many(self, namespace: Namespace, items: Iterable[Remember | str]) -> BatchResult:
        """Remember every item (a string or :class:`Remember`) as ONE command
        (:meth:`apply_batch`): a batch costs one sync, not one per memory."""
        with traced(self, "remember_many", namespace) as span:
            return span.result(apply_batch(self._engine, namespace, items))

    def forget_all(self, namespace: Namespace) -> int:
        """Forget every retrievable memory of exactly ``namespace`` in one command (durable
        on return) and return how many (:func:`commands.canonical.bulk_forget.forget_all`):
        the ledger records the command and each memory it forgot; other namespaces are
        untouched.
        With nothing to forget it writes nothing and returns 0.

        :raises InvalidNamespaceError: a namespace part is missing or empty (never "all").
        :raises ConcurrencyConflictError: concurrent commands kept overtaking it.
        """
        with traced(self, "forget_all", namespace) as span:
            count, position = forget_all_at(self._engine, namespace)
            span.position(position)
            return span.result(count)

    # Erasure (commands/engine/encryption.py) -----------------------------------------------------

    def remove_idle_projections(self) -> int:
        """Delete this host's projection files that no process holds (after an erasure:
        they may hold erased rows; each is rebuilt from the ledger when next used); return
        how many are held by running processes (:func:`projections.store.remove_idle_slots`)."""
        return remove_idle_slots(self.path / "projections", keep=self.projections.path)

    def _drop_erased_content(self) -> None:
        """Empty every in-process index and cache that may hold an erased namespace's text
        (run, holding the serving lock, after the serving state applied a
        ``NamespaceErased`` record); they refill on use."""
        self.recall_index.clear()
        self._drop_erased_read_models()

    def _drop_erased_read_models(self) -> None:
        """The caches :meth:`_drop_erased_content` empties, but the recall index (run
        after the DuckDB catch-up applied a ``NamespaceErased`` record, holding the
        projection lock: the serving state drops its own when it reaches the record)."""
        self.transcripts.clear()
        self._memory_maps.clear()
        if self.semantic is not None:  # rows not yet written of the namespaces kept stay
            erased = self.projections.erased
            self.semantic.clear(lambda key: not erased.key_erased(key))
        stem.cache_clear()
        session_key.cache_clear()
        normalize_statement.cache_clear()
        from memory_ledger.commands.secrets import clear_scan_cache

        clear_scan_cache()

    def _take_connection(self, conn: duckdb.DuckDBPyConnection) -> None:
        """Hand the projection file's new connection to every reader that holds one (after
        the file was rewritten to drop an erased namespace's old blocks)."""
        self.canonical.conn = conn
        if self.semantic is not None:
            self.semantic.vectors.conn = conn

    def erase(
        self,
        tenant: str,
        principal: str | None = None,
        scope_id: str | None = None,
        *,
        requested_by: str = "",
        signing_key: SigningKeySpec | None = None,
    ) -> ErasureReport:
        """Erase a tenant's namespaces, a principal's, or one namespace by crypto-shredding
        (``commands.engine.encryption``, issue #16): their data keys are destroyed, a
        ``NamespaceErased`` record says what and by whom, and their rows leave every
        projection. The chain still verifies; other namespaces are untouched.

        :raises InvalidNamespaceError: a part is empty or too long, or a scope id is given
            without its principal.
        :raises EncryptionNotConfiguredError: the store keeps payloads in clear.
        :raises KeyStoreError: the key store cannot be written (nothing was erased).
        :raises LedgerReadOnlyError: the store is open read-only.
        :raises SigningKeyError: ``signing_key`` is unreadable or not an Ed25519 private key
            (nothing was erased).
        :raises ReceiptScanError: with ``signing_key``: the erasure is done but an erased
            name is still in clear in a file or table of the store (no receipt); or
            (``readers_open``) other processes hold projection files of the store, so no
            receipt could be made: nothing was erased.

        With ``signing_key`` (a PEM file of ``memory-ledger keys new --signing``, or an
        ``Ed25519PrivateKey``), the report's ``receipt`` is the signed erasure receipt
        (``commands/engine/receipt.py``; docs/erasure.md, "Receipts"); None when nothing
        was erased.
        """
        with traced(self, "erase", _named(tenant, principal, scope_id)) as span:
            return span.result(self._erase(tenant, principal, scope_id, requested_by, signing_key))

    def _erase(
        self,
        tenant: str,
        principal: str | None,
        scope_id: str | None,
        requested_by: str,
        signing_key: SigningKeySpec | None,
    ) -> ErasureReport:
        match = NamespaceMatch(tenant=tenant, principal=principal, scope_id=scope_id)
        if signing_key is None:
            return erase_namespaces(self._engine, match, requested_by=requested_by)
        key = load_signing_key(signing_key)
        match.validated()
        if not self._engine.read_only:
            readers = held_slots(self.path / "projections", keep=self.projections.path)
            if readers:
                # Their files keep the erased rows until they next read: the receipt's scan
                # could only fail, after the keys are gone, and no later call could sign it.
                msg = (
                    f"{readers} other process(es) hold projection files of this store (a "
                    "debugger, an MCP server, another engine): a receipt needs every file "
                    "scanned clean, and theirs keep erased rows until they next read. Stop "
                    "them, or erase without a receipt; nothing was erased"
                )
                raise ReceiptScanError(msg, reason_code="readers_open")
        with self._engine.read_models() as live:
            named = [
                ns
                for ns in present_namespaces(live.conn)
                if ns.tenant == tenant
                and principal in (None, ns.principal)
                and scope_id in (None, ns.scope_id)
            ]
        report = erase_namespaces(self._engine, match, requested_by=requested_by)
        if not report.namespaces:
            return report
        engine = cast("ErasingEngine", self)
        receipt = make_receipt(engine, match, report, named, key)
        return msgspec.structs.replace(report, receipt=receipt)

    @traced_method("rotate_master_key", lambda self, *_: (self, None))
    def rotate_master_key(self, new_master_key: MasterKeySpec) -> int:
        """Re-wrap every live data key under ``new_master_key`` (events are not touched);
        return how many keys. From then on only the new key opens the store.

        :raises EncryptionNotConfiguredError: the store keeps payloads in clear.
        :raises MasterKeyError: the new key is invalid.
        """
        new = master_key_from(new_master_key)
        if new is None:
            msg = "rotate_master_key needs a new master key"
            raise MasterKeyError(msg, reason_code="master_key_invalid")
        return self.keyring.rotate(new)


def _named(tenant: object, principal: object, scope_id: object) -> Namespace | None:
    """The one namespace an erasure names (tenant, principal and scope all given and
    valid), for its span's namespace digest; None for a wider or invalid match (the
    erasure itself refuses an invalid one)."""
    if not all(isinstance(part, str) for part in (tenant, principal, scope_id)):
        return None
    try:
        return Namespace(str(tenant), str(principal), str(scope_id))
    except MemoryLedgerError:
        return None
