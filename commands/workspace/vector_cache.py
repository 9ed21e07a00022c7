"""Vectors of workspace files kept on disk by content digest, so a reopened workspace
session re-embeds only files whose content changed.

Layout: ``<folder>/<key>/<digest[:2]>/<digest>.npy`` where ``key`` is the first 16 hex
digits of SHA-256 over the embedding model key and the chunking strategy key (a different
model, dimension or chunking never reads another's vectors). A session's cache folder is
``<store>/workspace-vectors/<namespace id hex>`` (:data:`VECTOR_CACHE_FOLDER`): vectors are
derived from the files a namespace's sessions read, so an erasure of the namespace deletes
its folder (``projections.derived.remove_erased_folders``, when ``erase`` runs and when a
store with erasures opens), and a write checks the namespace is not erased before and after
it (``erased``), so a session of another process still open during the erasure leaves no
vector behind. Each file is written to a
temporary name and renamed into place (never half-written); a file that cannot be read, or
whose shape, type or values are wrong, is a miss. The cache is derived data: deleting the
folder only costs re-embedding. It never stores text.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt

from memory_ledger.commands.embeddings.base import (
    EmbeddingDescriptor,
    EmbeddingError,
    validate_vectors,
)
from memory_ledger.projections.derived import VECTOR_CACHE_FOLDER, write_atomic

__all__ = ["VECTOR_CACHE_FOLDER", "VectorCache"]


class VectorCache:
    """Vectors by file digest for one (model, chunking) pair.

    :param folder: the cache folder (created on first write).
    :param descriptor: the embedding model the vectors come from.
    :param strategy_key: :func:`commands.workspace.chunking.strategy_key` of the chunking.
    :param erased: whether the cache's owner (a session's namespace) is erased now: then
        nothing is written, and a file written while the erasure ran is deleted.
    """

    def __init__(
        self,
        folder: Path,
        descriptor: EmbeddingDescriptor,
        strategy_key: str,
        *,
        erased: Callable[[], bool] | None = None,
    ) -> None:
        key = hashlib.sha256(f"{descriptor.model_key()}\n{strategy_key}".encode()).hexdigest()
        self.folder = Path(folder) / key[:16]
        self.descriptor = descriptor
        self.erased = erased or _never
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
        raised. Nothing is written for an erased owner; a file written while its owner was
        being erased is deleted (the erasure marks the namespace erased, then deletes its
        folder: either that deletion or this check finds the file)."""
        if self.erased():
            return
        target = self._path(digest)
        buffer = io.BytesIO()
        np.save(buffer, np.ascontiguousarray(vectors, dtype=np.float32))
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(target, [buffer.getvalue()])  # projections/derived.py: every derived file
        except OSError:
            self.write_errors += 1
            return
        if self.erased():
            target.unlink(missing_ok=True)


def _never() -> bool:
    return False
