"""A command's vectors before it returns: what to embed, derived from the events it appended,
and the deadline the command waits for them.

:func:`appended_vectors` is pure (event payloads in, ``(memory, text)`` pairs out; no read
model is read): every ``MemoryActivated`` of the batch gives its statement vector
(``embedding_text(item.subject, item.statement)``, exactly what verification later digests);
a memory whose stream starts in this batch (``originator_version`` 1) and whose source turn
(``TranscriptObserved`` of the same namespace, session and turn) is in the batch too also
gives its ``source`` vector (that turn is then its first transcript position, as the
canonical projection records it). Any other source vector is left to the indexer, which
reads the turn from the ledger.

:class:`ForegroundCalls` runs the embedding job of a command in one worker thread and waits
for it up to a deadline: a provider that hangs holds the command no longer than that, and
while a job that overran is still running no new job queues behind it (the command returns
at once; its memories stay pending until the indexer or the late job fills them).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout

import msgspec

from memory_ledger.commands.embeddings.base import embedding_text
from memory_ledger.commands.recall.lexical import CONTEXT_CHARS
from memory_ledger.ledger.events import (
    MemoryActivated,
    MemoryForgotten,
    MemoryPruned,
    MemorySuperseded,
    NamespaceForgotten,
    TranscriptObserved,
)
from memory_ledger.projections.vectors import PendingMemory

__all__ = ["ForegroundCalls", "OwnPositions", "appended_vectors", "retired_by"]

WORKER_THREAD = "memory-ledger-vectors"
"""The name of the worker thread that runs a command's embedding calls."""


def appended_vectors(
    events: Sequence[object], fields: Sequence[str] = ("statement",)
) -> tuple[list[PendingMemory], list[str]]:
    """The vectors a batch of appended events makes due: ``(memories, texts)``, parallel
    lists, statements first in event order, then the source vectors derivable from the
    batch (only when ``fields`` has ``source``). Pure: payloads only."""
    memories: list[PendingMemory] = []
    texts: list[str] = []
    sources: list[tuple[PendingMemory, str]] = []
    turns: dict[tuple[str, str, str, str, int], str] | None = None
    for event in events:
        if not isinstance(event, MemoryActivated):
            continue
        ns, item = event.namespace, event.item
        memory = PendingMemory(
            tenant=ns.tenant,
            principal=ns.principal,
            scope_id=ns.scope_id,
            memory_id=str(event.originator_id),
            revision=event.originator_version,
            subject=item.subject,
            statement=item.statement,
        )
        memories.append(memory)
        texts.append(embedding_text(item.subject, item.statement))
        if "source" not in fields or event.originator_version != 1:
            continue
        if turns is None:
            turns = {
                (e.namespace.tenant, e.namespace.principal, e.namespace.scope_id)
                + (e.session_id, e.turn_id): e.transcript[:CONTEXT_CHARS]
                for e in events
                if isinstance(e, TranscriptObserved)
            }
        turn = turns.get((ns.tenant, ns.principal, ns.scope_id, event.session_id, event.turn_id))
        if turn:  # an empty turn embeds the statement, as the indexer's source_text does
            sources.append((msgspec.structs.replace(memory, field="source"), turn))
    for memory, text in sources:
        memories.append(memory)
        texts.append(text)
    return memories, texts


def retired_by(events: Sequence[object]) -> tuple[list[tuple[str, str]], list[str]]:
    """What a batch makes unretrievable: ``([(namespace key, memory id)], [namespace keys
    forgotten whole])`` (superseded, forgotten, pruned memories; ``NamespaceForgotten``)."""
    memories: list[tuple[str, str]] = []
    namespaces: list[str] = []
    for event in events:
        if isinstance(event, MemorySuperseded | MemoryForgotten | MemoryPruned):
            memories.append((event.namespace.key(), str(event.originator_id)))
        elif isinstance(event, NamespaceForgotten):
            namespaces.append(event.namespace.key())
    return memories, namespaces


class OwnPositions:
    """Ledger positions whose events this process already applied to its served vectors
    (the commands' own batches, after :meth:`SemanticChannel.embed_appended` ran): a range
    of positions made only of them needs no re-read of canonical memory. Kept as merged
    ``[first, last]`` intervals, the newest :data:`KEEP` (older ones are forgotten: their
    range is then read again, which is always safe)."""

    KEEP = 4096

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._intervals: list[list[int]] = []

    def add(self, positions: Sequence[int]) -> None:
        """Record the positions of one applied batch."""
        if not positions:
            return
        first, last = min(positions), max(positions)
        if last - first + 1 != len(positions):  # not one run: record each
            for p in sorted(positions):
                self.add((p,))
            return
        with self._lock:
            intervals = self._intervals
            if intervals and intervals[-1][1] + 1 == first:
                intervals[-1][1] = last
            elif not intervals or intervals[-1][1] < first:
                intervals.append([first, last])
                if len(intervals) > self.KEEP:
                    del intervals[0]
            # an older position arriving late (a concurrent writer): not recorded

    def covered(self, after: int, upto: int) -> bool:
        """Whether every position in ``(after, upto]`` was applied here."""
        if upto <= after:
            return True
        with self._lock:
            for first, last in reversed(self._intervals):
                if first <= after + 1 and upto <= last:
                    return True
                if last < upto:
                    return False
        return False


class ForegroundCalls:
    """Runs a command's embedding job with a deadline (one worker thread, started on first
    use; no process-wide state)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None
        self._late: Future[None] | None = None

    def run(self, job: Callable[[], None], timeout: float | None) -> bool:
        """Run ``job`` (which must not raise) and wait for it up to ``timeout`` seconds
        (None: in the caller's thread, no deadline). False when it overran (it goes on in the
        worker) or was not started because an earlier job is still overrunning."""
        if timeout is None:
            job()
            return True
        with self._lock:
            if self._late is not None and not self._late.done():
                return False
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix=WORKER_THREAD)
            future = self._executor.submit(job)
        try:
            future.result(timeout)
        except FutureTimeout:
            with self._lock:
                self._late = future
            return False
        return True

    def close(self) -> None:
        """Stop the worker (a job still running finishes on its own; none is waited for)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)
