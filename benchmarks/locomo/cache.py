"""An embedding provider wrapper for the LoCoMo benchmarks: a text embedded once is not
embedded again, within the run or (with ``folder``) across runs.

The disk cache is one ``.npz`` file per model (its descriptor's ``model_key``) under
``.cache/locomo/`` at the repository root (gitignored; ``$LOCOMO_EMBED_CACHE`` moves it,
``--no-cache`` turns it off): rows keyed by the SHA-256 of ``passage|query`` and the text.
Vectors are what the inner provider returned for that text (float32), so a cached run
ranks exactly as an uncached one; only the passages embedded in this run are timed
(throughput).
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memory_ledger.commands.embeddings.base import EmbeddingDescriptor, EmbeddingProvider

CACHE_DIR = Path(__file__).resolve().parents[2] / ".cache" / "locomo"
"""Where vectors are kept between runs (``$LOCOMO_EMBED_CACHE`` overrides it)."""


def cache_dir() -> Path:
    """The embedding cache folder: ``$LOCOMO_EMBED_CACHE`` or :data:`CACHE_DIR`."""
    return Path(os.environ.get("LOCOMO_EMBED_CACHE") or CACHE_DIR)


def _key(query: bool, text: str) -> str:
    return hashlib.sha256(f"{'query' if query else 'passage'}|{text}".encode()).hexdigest()


class CachingProvider:
    """Wraps a provider so a text embedded once is not embedded again (passages and
    queries cached apart); times the passages it embeds. With ``folder``, vectors are
    loaded from and saved to ``folder/<model>.npz`` (:meth:`save`)."""

    def __init__(self, inner: EmbeddingProvider, folder: Path | None = None) -> None:
        self.inner = inner
        self.cache: dict[str, Any] = {}
        self.passages = 0
        self.seconds = 0.0
        self.loaded = 0
        self._dirty = False
        self.path: Path | None = None
        if folder is not None:
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", inner.descriptor.model_key())
            self.path = folder / f"{name}.npz"
            if self.path.is_file():
                with np.load(self.path) as stored:
                    keys, vectors = stored["keys"], stored["vectors"]
                self.cache = {str(k): v for k, v in zip(keys, vectors, strict=True)}
                self.loaded = len(self.cache)

    @property
    def descriptor(self) -> EmbeddingDescriptor:
        return self.inner.descriptor

    def _get(self, texts: Sequence[str], query: bool) -> Any:
        keys = [_key(query, t) for t in texts]
        missing = [t for t, k in dict(zip(texts, keys, strict=True)).items() if k not in self.cache]
        if missing:
            started = time.perf_counter()
            embed = getattr(self.inner, "embed_queries", None) if query else None
            raw = embed(missing) if callable(embed) else self.inner.embed(missing)
            vectors = np.asarray(raw, dtype=np.float32)
            if not query:
                self.seconds += time.perf_counter() - started
                self.passages += len(missing)
            self.cache.update((_key(query, t), v) for t, v in zip(missing, vectors, strict=True))
            self._dirty = True
        return np.stack([self.cache[k] for k in keys])

    def embed(self, texts: Sequence[str]) -> Any:
        """Passages (cached)."""
        return self._get(texts, False)

    def embed_queries(self, texts: Sequence[str]) -> Any:
        """Queries (cached; the inner provider's ``embed_queries`` when it has one)."""
        return self._get(texts, True)

    def save(self) -> None:
        """Write the cache to disk (with a folder, and only when something was added)."""
        if self.path is None or not self._dirty or not self.cache:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        keys = np.array(list(self.cache))
        vectors = np.stack(list(self.cache.values())).astype(np.float32)
        partial = self.path.with_suffix(".tmp.npz")
        np.savez(partial, keys=keys, vectors=vectors)
        partial.replace(self.path)
        self._dirty = False
