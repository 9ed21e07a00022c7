"""Import a mem0 store with its history: every ADD, UPDATE and DELETE, at its own time.

``import_mem0(engine, history_db, namespace=..., user_map=..., owners=...)`` replays mem0's
history database (:mod:`~memory_ledger.replay.imports.mem0_history`) row by row, in mem0's
order, as this engine's direct commands, each with the row's own time as its occurred
(valid) time:

- ``ADD``: a remember of ``new_memory``;
- ``UPDATE``: a correction of the memory that holds the mem0 memory's current value (its
  target by id), superseding it with ``new_memory`` (an UPDATE that keeps the text is
  ``unchanged``: nothing to write);
- ``DELETE``: a forget of that memory.

The namespace comes from the host, never from the data: ``namespace`` for everything, or
``user_map`` (mem0 ``user_id`` -> namespace) with ``owners`` (who each memory belongs to,
from mem0's vector store: :func:`~memory_ledger.replay.imports.mem0_owners.read_qdrant_owners`);
a memory whose user is not mapped goes to ``namespace`` when given, else it is refused
(``unmapped_user``, or ``owner_unknown`` for a memory the vector store no longer holds).

Idempotent and resumable: each row is one command (one transaction) whose session id is
derived from the mem0 memory id and the row id (``mem0-<40 hex>``). A rerun finds the rows
already written (``already``) and writes only the rest, so an import interrupted anywhere,
then run again, ends in the state of one clean run; rows mem0 added since are imported.

Refused rows (a secret-shaped text, a text the engine's validation refuses, a row of an
unknown event, a row whose ``created_at`` or ``updated_at`` is not a time (``bad_timestamp``,
naming the column), a DELETE or UPDATE of a memory that was never imported) are counted with
their reason code, never their text; the import goes on. An UPDATE of a memory whose ADD was
refused remembers the new text.

Limits: two mem0 memories holding the same text are one memory here (memory ids derive
from the namespace and the statement), so deleting one in mem0 forgets both here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from datetime import datetime
from pathlib import Path
from uuid import UUID

import msgspec

from memory_ledger.commands.canonical.explicit_command import CommandSpec, checked_statement
from memory_ledger.commands.engine.direct import DirectCommands
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.commands.errors import CommandRejectedError
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.ids import (
    Namespace,
    normalize_statement,
)
from memory_ledger.replay.imports.mem0_history import (
    HistoryRow,
    count_history,
    read_history,
    row_time,
)
from memory_ledger.replay.imports.mem0_owners import Mem0Owner
from memory_ledger.replay.imports.shared import (
    REFUSALS,
    RefusedItem,
    keyed_session_id,
    shown_id,
)

__all__ = ["MEM0_SESSION_PREFIX", "Mem0ImportReport", "import_mem0"]

MEM0_SESSION_PREFIX = "mem0-"
"""Session ids of imported mem0 rows start with this (``explain`` shows the import)."""


class Mem0ImportReport(msgspec.Struct, frozen=True, kw_only=True):
    """What :func:`import_mem0` did: ``rows`` read; ``imported`` written now; ``already``
    written by an earlier run; ``unchanged`` UPDATEs that kept the text (nothing to write);
    ``refused`` the rows refused (reason codes, never text); ``namespaces`` how many
    namespaces received rows; ``position`` the ledger head after it; ``seconds`` wall time."""

    history_db: str
    rows: int
    imported: int
    already: int
    unchanged: int
    refused: tuple[RefusedItem, ...]
    namespaces: int
    position: int
    seconds: float


class _Current(msgspec.Struct):
    """Where a mem0 memory stands here: the memory holding its value and that value's
    normalized text (None: nothing imported holds it)."""

    memory: UUID | None = None
    normalized: str | None = None


class _Importer:
    """One run of :func:`import_mem0` (its counts and the state of each mem0 memory)."""

    def __init__(
        self,
        engine: MemoryEngine,
        namespace: Namespace | None,
        user_map: Mapping[str, Namespace],
        owners: Mapping[str, Mem0Owner] | None,
    ) -> None:
        self.engine = engine
        self.direct = DirectCommands(engine, MEM0_SESSION_PREFIX)
        self.namespace = namespace
        self.user_map = user_map
        self.owners = owners
        self.current: dict[str, _Current] = {}
        self.imported = self.already = self.unchanged = 0
        self.refused: list[RefusedItem] = []
        self.used: set[Namespace] = set()

    def refuse(self, row: HistoryRow, reason: str, parameter: str | None = None) -> None:
        self.refused.append(
            RefusedItem(
                item=shown_id(row.row_id),
                memory=shown_id(row.memory_id),
                event=row.event if row.event in ("ADD", "UPDATE", "DELETE") else "other",
                reason_code=reason,
                parameter=parameter,
            )
        )

    def place(self, row: HistoryRow) -> Namespace | str:
        """The namespace of ``row``'s memory, or the reason code refusing it."""
        if self.owners is not None and self.user_map:
            owner = self.owners.get(row.memory_id)
            user = owner.user_id if owner is not None else None
            if user is not None and user in self.user_map:
                return self.user_map[user]
            if self.namespace is None:
                return "owner_unknown" if owner is None else "unmapped_user"
        assert self.namespace is not None  # import_mem0 checked one of them is given
        return self.namespace

    def spec(self, row: HistoryRow, state: _Current) -> CommandSpec | str:
        """The command of ``row`` (given where its memory stands), or a reason code for a
        row that writes nothing (``unchanged``) or is refused."""
        at: datetime | None = row_time(row)
        if row.bad_time is not None:
            return "bad_timestamp"
        if row.event == "DELETE":
            if state.memory is None:
                return "nothing_to_forget"
            return CommandSpec(intent="forget", text=None, target=state.memory, occurred_at=at)
        if row.event not in ("ADD", "UPDATE"):
            return "unknown_event"
        text = row.new_memory
        if text is None or not text.strip():
            return "empty_statement"
        if row.event == "UPDATE" and state.memory is not None:
            if normalize_statement(text) == state.normalized:
                return "unchanged"
            return CommandSpec(intent="correct", text=text, target=state.memory, occurred_at=at)
        return CommandSpec(intent="remember", text=text, occurred_at=at)

    def apply(self, row: HistoryRow) -> None:
        """Import one row (or count it as already there, unchanged or refused)."""
        placed = self.place(row)
        if isinstance(placed, str):
            self.refuse(row, placed)
            return
        namespace = placed
        state = self.current.setdefault(row.memory_id, _Current())
        spec = self.spec(row, state)
        if spec == "unchanged":
            self.unchanged += 1
            return
        if isinstance(spec, str):
            self.refuse(row, spec, row.bad_time if spec == "bad_timestamp" else None)
            return
        session_id = keyed_session_id(MEM0_SESSION_PREFIX, row.memory_id, row.row_id)
        try:
            text = spec.text
            if text is not None:
                text = checked_statement(text, "new_memory")
                spec = CommandSpec(
                    intent=spec.intent, text=text, target=spec.target, occurred_at=spec.occurred_at
                )
            if self.engine.load_stream(
                self.engine.keyring.digests.session_stream_id(namespace, session_id)
            ):
                self.already += 1
            else:
                self.direct.run_many(namespace, [spec], session_id=session_id)
                self.imported += 1
        except CommandRejectedError as e:
            if e.reason_code != "session_exists":
                self.refuse(row, e.reason_code, getattr(e, "parameter", None))
                return
            self.already += 1  # another run wrote it meanwhile
        except REFUSALS as e:
            self.refuse(row, getattr(e, "reason_code", "refused"), getattr(e, "parameter", None))
            return
        self.used.add(namespace)
        if spec.intent == "forget":
            state.memory = state.normalized = None
        else:
            assert spec.text is not None
            state.normalized = normalize_statement(spec.text)
            state.memory = self.engine.keyring.digests.memory_id(namespace, state.normalized)


def import_mem0(
    engine: MemoryEngine,
    history_db: str | Path,
    *,
    namespace: Namespace | None = None,
    user_map: Mapping[str, Namespace] | None = None,
    owners: Mapping[str, Mem0Owner] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Mem0ImportReport:
    """Import mem0's history database ``history_db`` into ``engine`` (module docstring).

    :param namespace: the namespace of every memory (or, with ``user_map``, of those whose
        user it does not map).
    :param user_map: mem0 ``user_id`` -> namespace; needs ``owners``.
    :param owners: who each mem0 memory belongs to (mem0 memory id -> :class:`Mem0Owner`).
    :param progress: called with (rows done, rows in all) as the import goes.
    :raises InvalidArgumentError: neither ``namespace`` nor ``user_map`` is given, or
        ``user_map`` without ``owners``.
    :raises InvalidNamespaceError: a namespace part is empty or invalid.
    :raises Mem0HistoryMissingError: no file at ``history_db``.
    :raises Mem0HistoryUnreadableError: not a SQLite database, or damaged.
    :raises Mem0HistorySchemaError: no ``history`` table of mem0's schema (the message names
        the columns expected).
    """
    started = time.perf_counter()
    users = dict(user_map or {})
    if namespace is None and not users:
        msg = "say where the memories go: a namespace, or a mapping of mem0 user ids"
        raise InvalidArgumentError(msg, parameter="namespace")
    if users and owners is None:
        msg = "a mapping of mem0 user ids needs the owners read from mem0's vector store"
        raise InvalidArgumentError(msg, parameter="owners")
    for target in [namespace, *users.values()]:
        if target is not None:
            target.validated()
    total = count_history(history_db)
    importer = _Importer(engine, namespace, users, owners)
    rows = 0
    for row in read_history(history_db):
        importer.apply(row)
        rows += 1
        if progress is not None:
            progress(rows, total)
    return Mem0ImportReport(
        history_db=str(history_db),
        rows=rows,
        imported=importer.imported,
        already=importer.already,
        unchanged=importer.unchanged,
        refused=tuple(importer.refused),
        namespaces=len(importer.used),
        position=engine.head,
        seconds=time.perf_counter() - started,
    )
