"""The background indexer of workspace retrieval: scan, admit, chunk, publish, embed.

Seed 002 ("Asynchronous vector projection lifecycle"): construction returns at once; one
thread reads admitted text and publishes immutable per-file partitions atomically, and later
source revisions are reconciled without re-embedding unchanged files. A pass runs in two
phases so lexical search covers the tree early:

1. scan the root (:func:`commands.workspace.admission.scan_tree`), drop partitions of files
   that are gone, then per listed file (path order): skip it when its size and mtime are
   unchanged, else read it under the root, skip it when its digest is unchanged, else admit
   its content, chunk it and publish its partition with its BM25 terms (and its vectors
   straight away when the vector cache holds them for this digest);
2. embed the chunks of the files still without vectors, in provider calls of at most
   ``batch_size`` texts (several small files share a call), and attach each file's vectors
   if its partition still has the digest they were computed for.

States: ``building`` while a pass runs, then ``ready``, or ``degraded`` when a file failed
(unreadable, or its embedding was rejected: lexical search still covers it, and the next
pass retries its embedding); ``closed`` after :meth:`WorkspaceIndexer.close`. Three
provider failures in a row end the semantic phase of the pass (every file left is reported
as failed) rather than hammering a broken provider. Cancellation is checked before every
file and every provider call; a call in flight cannot be interrupted, so ``close`` waits
for it up to its timeout.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Literal

import msgspec
import numpy as np
import numpy.typing as npt

from memory_ledger.commands.embeddings.base import (
    EmbeddingDescriptor,
    EmbeddingError,
    EmbeddingProvider,
    embed_checked,
)
from memory_ledger.commands.workspace.admission import AdmissionRules, admit_content, scan_tree
from memory_ledger.commands.workspace.catalog import (
    FilePartition,
    WorkspaceCatalog,
    WorkspaceChunk,
    analyze_code,
)
from memory_ledger.commands.workspace.chunking import ChunkingStrategy, split_ranges
from memory_ledger.commands.workspace.files import WorkspaceRoot, file_digest
from memory_ledger.commands.workspace.vector_cache import VectorCache
from memory_ledger.ledger.arguments import check_count

__all__ = ["IndexerCounts", "IndexerState", "WorkspaceFailure", "WorkspaceIndexer"]

IndexerState = Literal["building", "ready", "degraded", "closed"]

FAILURES_IN_A_ROW = 3
"""Provider failures in a row that end a pass's semantic phase."""


class WorkspaceFailure(msgspec.Struct, frozen=True):
    """A file that could not be indexed: its path and a reason code (``unreadable``,
    ``embedding:<EmbeddingError reason>``, ``lexical_failed``); never its content."""

    path: str
    reason: str


class IndexerCounts(msgspec.Struct, frozen=True, kw_only=True):
    """The indexer's progress: files listed by the last scan, files still to read, files
    still to embed, chunks still to embed, exclusions by reason, failures, provider calls
    and vectors taken from the cache."""

    state: IndexerState
    listed: int
    pending_read: int
    pending_embed: int
    pending_chunks: int
    excluded: dict[str, int]
    failures: tuple[WorkspaceFailure, ...]
    provider_calls: int
    cache_hits: int


def _chunks(
    path: str, data: bytes, digest: str, strategy: ChunkingStrategy
) -> list[WorkspaceChunk]:
    chunks = []
    line = 1
    at = 0
    for start, end in split_ranges(strategy, data):
        line += data.count(b"\n", at, start)
        at = start
        last = line + data.count(b"\n", start, max(start, end - 1))
        chunks.append(WorkspaceChunk(path, start, end, line, last, digest))
    return chunks


class WorkspaceIndexer:
    """One background thread filling a :class:`WorkspaceCatalog` from a workspace root.

    :param provider: embeds chunks (None: lexical only); ``descriptor`` is its locked
        descriptor.
    :param cache: vectors by digest kept across sessions (None: no reuse across reopen).
    :param batch_size: at most this many texts per provider call (> 0).
    """

    def __init__(
        self,
        root: WorkspaceRoot,
        catalog: WorkspaceCatalog,
        *,
        strategy: ChunkingStrategy,
        rules: AdmissionRules,
        provider: EmbeddingProvider | None,
        descriptor: EmbeddingDescriptor | None,
        cache: VectorCache | None,
        batch_size: int = 64,
    ) -> None:
        check_count("batch_size", batch_size)
        self.root = root
        self.catalog = catalog
        self.strategy = strategy
        self.rules = rules
        self.provider = provider
        self.descriptor = descriptor
        self.cache = cache
        self.batch_size = batch_size
        self._cond = threading.Condition()
        self._cancel = threading.Event()
        self._state: IndexerState = "building"
        self._rescan = True
        self._recheck: set[str] = set()
        self._listed = 0
        self._pending_read = 0
        self._pending_embed: dict[str, tuple[str, list[str]]] = {}
        self._scan_excluded: dict[str, int] = {}
        self._content_excluded: dict[str, str] = {}
        self._failures: dict[str, str] = {}
        self._seen: dict[str, tuple[int, int]] = {}
        self._provider_calls = 0
        self._thread = threading.Thread(target=self._run, name="workspace-indexer", daemon=True)

    def start(self) -> None:
        """Start the thread (the first pass scans the whole root)."""
        self._thread.start()

    # Requests ------------------------------------------------------------------------------

    def request_rescan(self) -> None:
        """Queue a full pass (new, changed and deleted files are reconciled)."""
        with self._cond:
            if self._state != "closed":
                self._rescan = True
                self._state = "building"
                self._cond.notify_all()

    def request_check(self, paths: set[str]) -> None:
        """Queue a re-read of ``paths`` (e.g. files a search found changed)."""
        with self._cond:
            if self._state != "closed" and paths:
                self._recheck |= paths
                self._state = "building"
                self._cond.notify_all()

    # Reporting -----------------------------------------------------------------------------

    def counts(self) -> IndexerCounts:
        """A consistent snapshot of the indexer's progress."""
        with self._cond:
            excluded = Counter(self._scan_excluded)
            excluded.update(self._content_excluded.values())
            return IndexerCounts(
                state=self._state,
                listed=self._listed,
                pending_read=self._pending_read,
                pending_embed=len(self._pending_embed),
                pending_chunks=sum(len(t) for _, t in self._pending_embed.values()),
                excluded=dict(sorted(excluded.items())),
                failures=tuple(WorkspaceFailure(p, r) for p, r in sorted(self._failures.items())),
                provider_calls=self._provider_calls,
                cache_hits=self.cache.hits if self.cache is not None else 0,
            )

    def wait_idle(self, timeout: float) -> bool:
        """Wait until no pass is running or queued (``ready``/``degraded``) or the indexer
        is closed, at most ``timeout`` seconds; True when it got there."""
        with self._cond:
            return self._cond.wait_for(
                lambda: self._state in ("ready", "degraded", "closed"), timeout=timeout
            )

    def close(self, timeout: float) -> bool:
        """Cancel outstanding work, join the thread (at most ``timeout`` seconds) and mark
        the indexer closed (waiters wake up). True when the thread has ended."""
        self._cancel.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout)
        with self._cond:
            self._state = "closed"
            self._pending_embed.clear()
            self._cond.notify_all()
        return not self._thread.is_alive()

    # The thread ----------------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(
                    lambda: self._cancel.is_set() or self._rescan or bool(self._recheck)
                )
                if self._cancel.is_set():
                    return
                full, self._rescan = self._rescan, False
                recheck, self._recheck = self._recheck, set()
            try:
                if full:
                    self._full_pass()
                else:
                    for path in sorted(recheck):
                        if self._cancel.is_set():
                            break
                        self._index_file(path, None)
                self._embed_pending()
            except Exception as error:  # an indexer bug must not hang waiters
                with self._cond:
                    self._failures["."] = f"indexer_failed:{type(error).__name__}"
            with self._cond:
                if self._state == "closed" or self._cancel.is_set():
                    return
                if not self._rescan and not self._recheck:
                    self._state = "degraded" if self._failures else "ready"
                    self._cond.notify_all()

    def _full_pass(self) -> None:
        scan = scan_tree(self.root.path, self.rules)
        listed = {entry.path for entry in scan.files}
        with self._cond:
            self._scan_excluded = scan.excluded
            self._listed = len(scan.files)
            self._pending_read = len(scan.files)
            for gone in [p for p in self._content_excluded if p not in listed]:
                del self._content_excluded[gone]
            for gone in [p for p in self._failures if p not in listed]:
                del self._failures[gone]
        for path in self.catalog.paths():
            if path not in listed:
                self._forget(path)
        for entry in scan.files:
            if self._cancel.is_set():
                return
            self._index_file(entry.path, (entry.size, entry.mtime_ns))
            with self._cond:
                self._pending_read -= 1

    def _forget(self, path: str) -> None:
        self.catalog.drop(path)
        with self._cond:
            self._seen.pop(path, None)
            self._pending_embed.pop(path, None)

    def _needs_vectors(self, partition: FilePartition | None) -> bool:
        return (
            self.provider is not None
            and partition is not None
            and partition.vectors is None
            and bool(partition.chunks)
            and partition.path not in self._pending_embed
        )

    def _index_file(self, path: str, stat_key: tuple[int, int] | None) -> None:
        with self._cond:
            partition = self.catalog.partition(path)
            known = partition is not None or path in self._content_excluded
            unchanged = stat_key is not None and self._seen.get(path) == stat_key
            if known and unchanged and not self._needs_vectors(partition):
                return
        try:
            data = self.root.read(path, self.rules.max_file_bytes)
        except FileNotFoundError:
            self._forget(path)
            with self._cond:
                self._content_excluded.pop(path, None)
                self._failures.pop(path, None)
            return
        except OSError:
            self._forget(path)
            with self._cond:
                self._failures[path] = "unreadable"
            return
        digest = file_digest(data)
        current = self.catalog.partition(path)
        if current is not None and current.digest == digest:
            with self._cond:
                self._seen[path] = stat_key or self._seen.get(path, (0, 0))
                if self._needs_vectors(current):  # a file whose embedding failed: retry
                    texts = [
                        data[c.byte_start : c.byte_end].decode("utf-8") for c in current.chunks
                    ]
                    self._pending_embed[path] = (digest, texts)
            return
        text, reason = admit_content(data)
        if text is None:
            self._forget(path)
            with self._cond:
                self._content_excluded[path] = reason or "binary"
                self._failures.pop(path, None)
                if stat_key is not None:
                    self._seen[path] = stat_key
            return
        chunks = _chunks(path, data, digest, self.strategy)
        texts = [data[c.byte_start : c.byte_end].decode("utf-8") for c in chunks]
        vectors = None
        if self.cache is not None and chunks:
            vectors = self.cache.get(digest, len(chunks))
        partition = FilePartition(path, digest, len(data), tuple(chunks), vectors)
        try:
            self.catalog.publish(partition, [analyze_code(t) for t in texts])
        except Exception:  # a lexical failure degrades this file, never the pass
            self._forget(path)
            with self._cond:
                self._failures[path] = "lexical_failed"
            return
        with self._cond:
            self._content_excluded.pop(path, None)
            self._failures.pop(path, None)
            if stat_key is not None:
                self._seen[path] = stat_key
            if self.provider is not None and vectors is None and chunks:
                self._pending_embed[path] = (digest, texts)
            else:
                self._pending_embed.pop(path, None)

    def _next_batch(self) -> list[tuple[str, str, list[str]]]:
        with self._cond:
            batch: list[tuple[str, str, list[str]]] = []
            size = 0
            for path in sorted(self._pending_embed):
                digest, texts = self._pending_embed[path]
                if batch and size + len(texts) > self.batch_size:
                    break
                batch.append((path, digest, texts))
                size += len(texts)
            return batch

    def _embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        assert self.provider is not None and self.descriptor is not None
        parts = []
        for start in range(0, len(texts), self.batch_size):
            if self._cancel.is_set():
                raise EmbeddingError("provider_failed", "cancelled by close()")
            with self._cond:
                self._provider_calls += 1
            parts.append(
                embed_checked(
                    self.provider, self.descriptor, texts[start : start + self.batch_size]
                )
            )
        return np.concatenate(parts) if len(parts) > 1 else parts[0]

    def _embed_pending(self) -> None:
        in_a_row = 0
        while not self._cancel.is_set():
            batch = self._next_batch()
            if not batch:
                return
            try:
                vectors = self._embed([t for _, _, texts in batch for t in texts])
            except EmbeddingError as error:
                if self._cancel.is_set():
                    return
                in_a_row += 1
                with self._cond:
                    failed = (
                        list(self._pending_embed)
                        if in_a_row >= FAILURES_IN_A_ROW
                        else [path for path, _, _ in batch]
                    )
                    for path in failed:
                        self._failures[path] = f"embedding:{error.reason_code}"
                        self._pending_embed.pop(path, None)
                continue
            in_a_row = 0
            at = 0
            for path, digest, texts in batch:
                rows = np.ascontiguousarray(vectors[at : at + len(texts)])
                at += len(texts)
                if self.catalog.attach_vectors(path, digest, rows) and self.cache is not None:
                    self.cache.put(digest, rows)
                with self._cond:
                    if self._pending_embed.get(path, ("", []))[0] == digest:
                        del self._pending_embed[path]
                        self._failures.pop(path, None)
