"""Helpers of the workspace retrieval tests: a small deterministic embedding provider and a
tree builder."""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from memory_ledger.commands.embeddings import EmbeddingDescriptor

SYNONYMS = {"automobile": "car", "vehicle": "car", "cars": "car", "feline": "cat", "kitten": "cat"}


class WordBagProvider:
    """Hashes each word (synonyms folded) to one of ``dimension`` slots; unit rows.

    Counts calls and texts; ``mode`` ``"raise"`` makes every call fail, ``"nan"`` returns
    NaNs. With ``gate`` set, each call waits for it (``entered`` is set first).
    """

    def __init__(self, dimension: int = 64, gate: threading.Event | None = None) -> None:
        self.descriptor = EmbeddingDescriptor(
            provider="fake", model_id="word-bag", dimension=dimension, normalized=True
        )
        self.mode: Literal["ok", "raise", "nan"] = "ok"
        self.gate = gate
        self.entered = threading.Event()
        self.calls = 0
        self.texts: list[str] = []
        self._lock = threading.Lock()

    def vector(self, text: str) -> np.ndarray[Any, Any]:
        row = np.zeros(self.descriptor.dimension)
        for word in re.findall(r"[a-z]+", text.lower()) or ["<empty>"]:
            word = SYNONYMS.get(word, word)
            digest = hashlib.sha256(word.encode()).digest()
            row[int.from_bytes(digest[:4], "big") % self.descriptor.dimension] += 1.0
        return row / np.linalg.norm(row)

    def embed(self, texts: Sequence[str]) -> Any:
        with self._lock:
            self.calls += 1
            self.texts.extend(texts)
        if self.gate is not None:
            self.entered.set()
            self.gate.wait()
        if self.mode == "raise":
            raise RuntimeError("model unavailable")
        rows = np.stack([self.vector(t) for t in texts]).astype(np.float32)
        if self.mode == "nan":
            rows[:] = np.nan
        return rows


def write_tree(root: Path, files: dict[str, str | bytes]) -> Path:
    """Create ``files`` (relative path -> text or bytes) under ``root``; return ``root``."""
    for relative, content in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root
