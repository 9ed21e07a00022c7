"""``MemoryStore``: what sessions, decisions and erasure use of the engine (issue 26 item 2).

The engine wing composes the lower wings (it opens sessions, runs direct commands, erases);
the session and canonical wings need only this small surface of it: append under a
condition, read a stream or a tag, the ledger head, the read models they query, the keyring
and the consistency-boundary switches. They type against this Protocol, so imports point
one way (``engine -> session -> canonical -> store``) and nothing smaller than a whole engine
can stand in for it in a test. ``commands.engine.memory_engine`` pins ``MemoryEngine`` to it
with a static check (mypy fails if the engine stops satisfying it).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol
from uuid import UUID

if TYPE_CHECKING:
    import duckdb
    from eventsourcing.dcb.api import DCBAppendCondition

    from memory_ledger.commands.config import MemoryConfig
    from memory_ledger.commands.recall.index import MemoryDoc
    from memory_ledger.commands.recall.semantic_status import SemanticStatus
    from memory_ledger.ledger.digests import IdDigests
    from memory_ledger.ledger.events import ExtractedItem, LedgerEvent
    from memory_ledger.ledger.ids import Namespace
    from memory_ledger.ledger.keyring import Keyring
    from memory_ledger.ledger.tags import TaggedRecorder
    from memory_ledger.projections.tokens import TokenCounter

__all__ = ["MemoryStore", "ReadModels"]


class ReadModels(NamedTuple):
    """The engine's projection connection, for read-only SQL, and the ledger position its
    read models reflect. Valid only inside
    :meth:`~memory_ledger.commands.engine.memory_engine.MemoryEngine.read_models`."""

    conn: duckdb.DuckDBPyConnection
    position: int


class MemoryStore(Protocol):
    """The engine as sessions, decisions (``commands.canonical``) and erasure see it.

    Ledger side: :meth:`append` (one durable transaction, under an append condition),
    :meth:`load_positioned`, :meth:`read_tagged`, :attr:`head`; the switches of the
    consistency boundary. Read side (read-your-writes: each catches the projections up
    first, unless it says otherwise): the retrievable memories, lexical/semantic candidates,
    vocabulary, prunable memories and the memory map.
    """

    path: Path
    config: MemoryConfig
    read_only: bool
    keyring: Keyring
    tagged_recorder: TaggedRecorder
    token_counter: TokenCounter
    consistency_boundary: bool
    decision_deadline: float
    decision_conflicts: int

    def append(
        self,
        events: Sequence[LedgerEvent],
        *,
        condition: DCBAppendCondition | None = None,
        cleared: Collection[ExtractedItem] = (),
        digests: IdDigests | None = None,
    ) -> list[int]: ...

    def load_positioned(
        self, stream_id: UUID, *, after: int = 0
    ) -> list[tuple[int, LedgerEvent]]: ...

    def read_tagged(self, tag: str, *, after: int = 0) -> list[tuple[int, LedgerEvent]]: ...

    def read_tagged_any(
        self, tags: Sequence[str], *, after: int = 0
    ) -> list[tuple[int, LedgerEvent]]: ...

    def load_stream(self, stream_id: UUID, *, after: int = 0) -> list[LedgerEvent]: ...

    def catch_up(self, to: int | None = None) -> int: ...

    def read_models(
        self, *, to: int | None = None, catch_up: bool = True
    ) -> AbstractContextManager[ReadModels]: ...

    def remove_idle_projections(self) -> int: ...

    @property
    def head(self) -> int: ...

    @property
    def projection_position(self) -> int: ...

    def ledger_guard(self) -> AbstractContextManager[None]: ...

    def retrievable_memory(self, namespace: Namespace, memory: UUID | str) -> MemoryDoc | None: ...

    def retrievable_memories(self, namespace: Namespace) -> list[MemoryDoc]: ...

    def memory_details(self, namespace: Namespace, ids: set[str]) -> dict[str, MemoryDoc]: ...

    def canonical_candidates(
        self,
        namespace: Namespace,
        query: str,
        depth: int,
        *,
        semantic: bool = True,
        min_lexical_score: float = 0.0,
    ) -> tuple[list[tuple[MemoryDoc, float]], SemanticStatus, int]: ...

    def vocabulary(
        self, namespace: Namespace, field: Literal["subject", "predicate"]
    ) -> list[tuple[str, int]]: ...

    def prunable_memories(
        self, namespace: Namespace, max_importance: float, max_uses: int
    ) -> list[dict[str, Any]]: ...

    def memory_map(
        self, namespace: Namespace, *, token_counter: TokenCounter | None = None
    ) -> str: ...
