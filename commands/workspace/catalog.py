"""The session-owned workspace catalog: immutable per-file partitions, BM25 and exact vectors.

One :class:`FilePartition` holds everything retrieval knows about one file version: its
path, full-file SHA-256 digest, chunks (path, byte range, line range, digest) and, once
embedded, one unit vector per chunk. :class:`WorkspaceCatalog` publishes partitions
atomically: a search takes the catalog lock, so it sees every chunk of a file's old version
or every chunk of its new one, never a mix. Lexical search is BM25
(:class:`projections.text_index.BM25Index`) over :func:`analyze_code` terms; semantic search
is exact cosine (a dot product of unit vectors) over every embedded chunk.

``release()`` drops every partition, the BM25 postings and the vector matrix; the catalog
keeps weak references to the vector arrays it held, so :meth:`WorkspaceCatalog.release_rate`
reports the share of them actually freed (seed 002: the post-close release rate).
"""

from __future__ import annotations

import itertools
import re
import threading
import weakref
from collections.abc import Sequence

import msgspec
import numpy as np
import numpy.typing as npt

from memory_ledger.commands.recall.lexical import QUERY_STOP_WORDS, stem
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.projections.text_index import BM25Index, IndexedDoc, tokenize

__all__ = [
    "FilePartition",
    "ScoredChunk",
    "WorkspaceCatalog",
    "WorkspaceChunk",
    "analyze_code",
    "analyze_code_query",
]

_IDENTIFIER_RE = re.compile(r"[A-Za-z0-9]*[_A-Z][A-Za-z0-9_]*")
_PART_RE = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def _terms(text: str) -> list[str]:
    terms = tokenize(text)
    for word in _IDENTIFIER_RE.findall(text):
        parts = [p.lower() for p in _PART_RE.findall(word)]
        if len(parts) > 1:
            terms.extend(parts)
    return terms


def analyze_code(text: str) -> str:
    """The terms BM25 indexes for a chunk: :func:`tokenize` tokens (whole identifiers kept
    exact) plus the parts of ``snake_case`` and ``camelCase`` identifiers, each stemmed
    (Snowball English), joined by spaces."""
    return " ".join(stem(t) for t in _terms(text))


def analyze_code_query(query: str) -> str:
    """The terms BM25 searches for ``query``: as :func:`analyze_code`, minus the query stop
    words of recall (all of them when nothing else is left)."""
    terms = _terms(query)
    kept = [t for t in terms if t not in QUERY_STOP_WORDS] or terms
    return " ".join(stem(t) for t in kept)


class WorkspaceChunk(msgspec.Struct, frozen=True, gc=False):
    """One chunk of a file version: ``path`` (relative, ``/``-separated), the byte range
    ``[byte_start, byte_end)``, the one-based inclusive lines it spans and the full file's
    SHA-256 ``digest``."""

    path: str
    byte_start: int
    byte_end: int
    line_start: int
    line_end: int
    digest: str


class FilePartition(msgspec.Struct, frozen=True):
    """Every chunk of one file version and, once embedded, their vectors (float32, shape
    ``(len(chunks), dimension)``, unit rows)."""

    path: str
    digest: str
    size: int
    chunks: tuple[WorkspaceChunk, ...]
    vectors: npt.NDArray[np.float32] | None = None


class ScoredChunk(msgspec.Struct, frozen=True, gc=False):
    """A chunk a channel ranked, with that channel's score."""

    chunk: WorkspaceChunk
    score: float


def _doc_id(path: str, index: int) -> str:
    return f"{path}\x00{index}"


class WorkspaceCatalog:
    """Per-file partitions with lexical and exact semantic search (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._parts: dict[str, FilePartition] = {}
        self._bm25 = BM25Index()
        self._chunks: dict[str, WorkspaceChunk] = {}
        self._positions = itertools.count()
        self._matrix: tuple[npt.NDArray[np.float32], list[WorkspaceChunk]] | None = None
        self._tracked: list[weakref.ref[npt.NDArray[np.float32]]] = []
        self._released: list[weakref.ref[npt.NDArray[np.float32]]] | None = None
        self._closed = False

    def partition(self, path: str) -> FilePartition | None:
        """The published partition of ``path`` (None when there is none)."""
        with self._lock:
            return self._parts.get(path)

    def paths(self) -> list[str]:
        """Paths of every published partition, sorted."""
        with self._lock:
            return sorted(self._parts)

    def publish(self, partition: FilePartition, analyzed: Sequence[str]) -> None:
        """Replace ``partition.path``'s partition (and its BM25 documents) in one step
        (nothing after :meth:`release`).

        :param analyzed: the :func:`analyze_code` text of each chunk, in chunk order.
        :raises InvalidArgumentError: ``analyzed`` does not have one entry per chunk.
        """
        if len(analyzed) != len(partition.chunks):
            msg = f"{len(analyzed)} analyzed texts for {len(partition.chunks)} chunks"
            raise InvalidArgumentError(msg, parameter="analyzed")
        with self._lock:
            if self._closed:
                return
            self._drop_locked(partition.path)
            for index, (chunk, text) in enumerate(zip(partition.chunks, analyzed, strict=True)):
                doc_id = _doc_id(partition.path, index)
                self._bm25.add(IndexedDoc(doc_id, next(self._positions), text))
                self._chunks[doc_id] = chunk
            self._parts[partition.path] = partition
            if partition.vectors is not None:
                self._track(partition.vectors)
                self._matrix = None

    def attach_vectors(self, path: str, digest: str, vectors: npt.NDArray[np.float32]) -> bool:
        """Publish ``vectors`` for the partition of ``path`` if it still has ``digest``.

        :returns: False when the file's partition changed or went away meanwhile.
        :raises InvalidArgumentError: not one vector per chunk.
        """
        with self._lock:
            current = None if self._closed else self._parts.get(path)
            if current is None or current.digest != digest:
                return False
            if vectors.shape[0] != len(current.chunks):
                msg = f"{vectors.shape[0]} vectors for {len(current.chunks)} chunks of {path}"
                raise InvalidArgumentError(msg, parameter="vectors")
            self._parts[path] = msgspec.structs.replace(current, vectors=vectors)
            self._track(vectors)
            self._matrix = None
            return True

    def drop(self, path: str) -> None:
        """Remove ``path``'s partition (a deleted file); nothing when absent."""
        with self._lock:
            self._drop_locked(path)

    def _drop_locked(self, path: str) -> None:
        old = self._parts.pop(path, None)
        if old is None:
            return
        for index in range(len(old.chunks)):
            doc_id = _doc_id(path, index)
            self._bm25.remove(doc_id)
            del self._chunks[doc_id]
        if old.vectors is not None:
            self._matrix = None

    def _track(self, array: npt.NDArray[np.float32]) -> None:
        self._tracked.append(weakref.ref(array))
        if len(self._tracked) > 64 and len(self._tracked) > 2 * len(self._parts):
            self._tracked = [ref for ref in self._tracked if ref() is not None]

    def lexical(self, analyzed_query: str, n: int) -> list[ScoredChunk]:
        """The top ``n`` chunks by BM25 for an :func:`analyze_code_query` text, best first
        (ties: earlier indexed first)."""
        with self._lock:
            hits = self._bm25.search(analyzed_query, n)
            return [ScoredChunk(self._chunks[h.doc_id], h.score) for h in hits]

    def semantic(self, query_vector: npt.NDArray[np.float32], n: int) -> list[ScoredChunk]:
        """The top ``n`` embedded chunks by cosine with a unit ``query_vector``, best first
        (ties: path, then byte offset)."""
        with self._lock:
            matrix, chunks = self._matrix_locked()
            if not chunks or n <= 0:
                return []
            scores = matrix @ query_vector.astype(np.float32, copy=False)
        count = min(n, len(chunks))
        top = np.argpartition(-scores, count - 1)[:count] if count < len(chunks) else None
        order = range(len(chunks)) if top is None else (int(i) for i in top)
        ranked = sorted(order, key=lambda i: (-float(scores[i]), i))
        return [ScoredChunk(chunks[i], float(scores[i])) for i in ranked[:count]]

    def _matrix_locked(self) -> tuple[npt.NDArray[np.float32], list[WorkspaceChunk]]:
        if self._matrix is None:
            blocks: list[npt.NDArray[np.float32]] = []
            chunks: list[WorkspaceChunk] = []
            for path in sorted(self._parts):
                part = self._parts[path]
                if part.vectors is not None and len(part.chunks):
                    blocks.append(part.vectors)
                    chunks.extend(part.chunks)
            if blocks:
                matrix = np.ascontiguousarray(np.concatenate(blocks), dtype=np.float32)
                self._track(matrix)
            else:
                matrix = np.zeros((0, 0), dtype=np.float32)
            self._matrix = (matrix, chunks)
        return self._matrix

    def counts(self) -> tuple[int, int, int, int]:
        """``(files, chunks, embedded files, vector bytes held)``; the bytes include the
        search matrix when it is built."""
        with self._lock:
            embedded = [p for p in self._parts.values() if p.vectors is not None]
            held = sum(p.vectors.nbytes for p in embedded if p.vectors is not None)
            if self._matrix is not None:
                held += self._matrix[0].nbytes
            return len(self._parts), len(self._chunks), len(embedded), held

    def release(self) -> None:
        """Drop every partition, the BM25 postings and the vector matrix; the catalog stays
        empty (later publications are ignored)."""
        with self._lock:
            self._closed = True
            self._released = [ref for ref in self._tracked if ref() is not None]
            self._tracked = []
            self._parts = {}
            self._chunks = {}
            self._bm25 = BM25Index()
            self._matrix = None

    def release_rate(self) -> float | None:
        """Share of the vector arrays alive at :meth:`release` that are freed now (1.0 when
        none was alive); None before ``release``."""
        with self._lock:
            released = self._released
        if released is None:
            return None
        if not released:
            return 1.0
        return sum(1 for ref in released if ref() is None) / len(released)
