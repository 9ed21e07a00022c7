"""Worker for the batch crash property (``tests/crash/test_crash_batch.py``).

Run from the repository root as ``python -m tests.batch_crash_child STORE BATCHES SIZE POINT
NTH``. It opens the store durable (sync on, the default) with an embedding provider that
answers at once (:class:`WordHashProvider`), and writes ``BATCHES`` batches of ``SIZE``
memories each with ``MemoryEngine.remember_many`` (one command, one append per batch); after
each acknowledged batch it recalls one of the batch's facts (so the serving state and the
vectors of the batch are in use), every third batch it catches the DuckDB read models up, and
at the end it closes the engine (which writes the recall file). One JSON line per message on
stdout, each written with one ``os.write``:

- ``{"kind": "begin", "batch"}`` right before a batch's ``remember_many``;
- ``{"kind": "ack", "batch", "position"}`` when it returned (acknowledged);
- ``{"kind": "at_fault", "point"}`` at the ``NTH`` call of fault point ``POINT`` (one of
  ``ledger.put``, ``ledger.commit``, ``projections.commit``, ``recall_index.write``,
  ``recall_index.replace``), after which the worker sleeps until the parent SIGKILLs it
  (``timer``: the parent kills it after a delay of its choosing);
- ``{"kind": "finished"}`` when every batch returned and the engine closed.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from memory_ledger.commands.embeddings import EmbeddingDescriptor
from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger import faults
from memory_ledger.ledger.ids import Namespace

NAMESPACE = Namespace("crash", "batch", "chat")
DIM = 16


def fact(batch: int, number: int) -> str:
    """Fact ``number`` of batch ``batch`` (its words name both, so a recall finds it)."""
    return f"Batch b{batch}x{number} records parcel p{batch}n{number} shipped to depot {number}."


class WordHashProvider:
    """Hashed bag of words, L2-normalized, computed at once (no model)."""

    descriptor = EmbeddingDescriptor(provider="fake", model_id="word-hash", dimension=DIM)

    def embed(self, texts: Sequence[str]) -> Any:
        out = np.zeros((len(texts), DIM))
        for row, text in enumerate(texts):
            for word in re.findall(r"[a-z0-9]+", text.casefold()) or ["empty"]:
                digest = hashlib.sha256(word.encode()).digest()
                out[row, int.from_bytes(digest[:4], "big") % DIM] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed_queries(self, texts: Sequence[str]) -> Any:
        return self.embed(texts)


def emit(**message: object) -> None:
    """One JSON line on stdout in one ``write``."""
    data = memoryview((json.dumps(message) + "\n").encode())
    while data:
        data = data[os.write(1, data) :]


def main(argv: list[str]) -> int:
    store, batches, size, point, nth = argv[0], int(argv[1]), int(argv[2]), argv[3], int(argv[4])
    calls = {"n": 0}

    def at_point() -> None:
        calls["n"] += 1
        if calls["n"] == nth:
            emit(kind="at_fault", point=point)
            time.sleep(120)

    if point != "timer":
        faults.FAULTS[point] = at_point
    engine = MemoryEngine.open(store, embeddings=WordHashProvider())
    for batch in range(batches):
        emit(kind="begin", batch=batch)
        result = engine.remember_many(NAMESPACE, [fact(batch, n) for n in range(size)])
        emit(kind="ack", batch=batch, position=result.position)
        hits = engine.recall(NAMESPACE, f"b{batch}x{size - 1}", k=1)
        assert hits and hits[0].statement == fact(batch, size - 1), hits
        if batch % 3 == 2:
            engine.catch_up()
    engine.close()
    emit(kind="finished")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
