"""Vectors of workspace files kept on disk by content digest, so a reopened workspace
session re-embeds only files whose content changed.

Layout: ``<folder>/<key>/<digest[:2]>/<digest>.npy`` where ``key`` is the first 16 hex
digits of SHA-256 over the embedding model key and the chunking strategy key (a different
model, dimension or chunking never reads another's vectors). Each file is written to a
temporary name and renamed into place (never half-written); a file that cannot be read, or
whose shape, type or values are wrong, is a miss. The cache is derived data: deleting the
folder only costs re-embedding. It never stores text.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memory_ledger.commands.embeddings.base import (
    EmbeddingDescriptor,
    EmbeddingError,
    validate_vectors,
)
from memory_ledger.projections.derived import write_atomic

__all__ = ["VectorCache"]


class VectorCache:
    """Vectors by file digest for one (model, chunking) pair.

    :param folder: the cache folder (created on first write).
    :param descriptor: the embedding model the vectors come from.
    :param strategy_key: :func:`commands.workspace.chunking.strategy_key` of the chunking.
    """

    def __init__(self, folder: Path, descriptor: EmbeddingDescriptor, strategy_key: str) -> None:
        key = hashlib.sha256(f"{descriptor.model_key()}\n{strategy_key}".encode()).hexdigest()
        self.folder = Path(folder) / key[:16]
        self.descriptor = descriptor
        self.hits = 0
        self.misses = 0
        self.write_errors = 0

    def _path(self, digest: str) -> Path:
        return self.folder / digest[:2] / f"{digest}.npy"

    def get(self, digest: str, count: int) -> npt.NDArray[np.float32] | None:
        """The ``count`` vectors stored for ``digest``, validated; None on a miss."""
        try:
            raw = np.load(self._path(digest), allow_pickle=False)
            vectors = validate_vectors(self.descriptor, count, raw)
        except (OSError, ValueError, EmbeddingError):
            self.misses += 1
            return None
        self.hits += 1
        return vectors

    def put(self, digest: str, vectors: npt.NDArray[np.float32]) -> None:
        """Store ``vectors`` for ``digest`` (atomically); a write failure is counted, never
        raised."""
        target = self._path(digest)
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(vectors, dtype=np.float32))
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, [buffer.getvalue()])  # projections/derived.py: every derived file
        except OSError:
            self.write_errors += 1
