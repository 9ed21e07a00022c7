"""Vectors before the acknowledgement: remember_many rate, acknowledged and searchable with vectors.

Issue 35, item 2. ``python -m benchmarks vectors_ack [--quick]``: 16,000 synthetic memories
(``--quick``: 1,000) remembered through ``MemoryEngine.remember_many`` in batches of 1,000,
of 100 and one at a time (1,000 memories one at a time; ``--quick``: 100), with an embedding
provider that answers instantly (vectors precomputed by ``benchmarks.hybrid.HashingProvider``
before the clock starts, looked up per call). After each batch one search asks for the
batch's last memory by a query that shares no word with it (its vector is the memory's:
only the semantic channel can find it), so "found" counts a batch only when that search
ranks the memory first (or tied first: two hash vectors can coincide) with every vector in
(``SemanticStatus`` ready).

Figures: memories/s acknowledged (the ``remember_many`` calls alone) and searchable with
vectors (the calls plus that first search), the time inside the engine's vector hook
(``SemanticChannel.embed_appended``) per memory, the same runs without a provider (lexical
only: what the DuckDB catch-up of a search costs, the serving state's part of issue 35), the
background indexer's rate re-embedding every memory for a new model (the caller's thread,
and the background thread) against the foreground path, and LangGraph's ``InMemoryStore``
with the same embedding function in the same run as a peer (its ``batch`` of ``PutOp``\\s
embeds inside the put; one search after each batch). Last, where a lexical batch of 1,000
goes: the median per batch of the time inside each stage of the write path (timers wrapped
around the engine's own functions, the cyclic collector's pauses from ``gc.callbacks``) and
the process CPU time per batch (steadier than wall time on a shared machine). Medians are
not needed elsewhere: each figure is one pass over thousands of memories. The load average
is printed with the figures.
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.hybrid import HashingProvider
from benchmarks.results import print_table, save
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.embeddings import EmbeddingDescriptor

NS = Namespace("bench", "vectors", "ack")
DIM = 256
WORDS = (
    "alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november "
    "oscar papa quebec romeo sierra tango uniform victor whiskey xray yankee zulu"
).split()


def statement(i: int) -> str:
    """A distinct synthetic memory (three code words and its number)."""
    a, b, c = WORDS[i % 26], WORDS[(i // 26) % 26], WORDS[(i // 676) % 26]
    return f"The {a} {b} project keeps {c} notes under record {i}."


def probe(i: int) -> str:
    """A query sharing no word with any memory; its vector is memory ``i``'s."""
    letters = "".join(chr(ord("a") + int(d)) for d in str(i))
    return f"qq{letters}zz"


class PrecomputedProvider:
    """Answers instantly: vectors computed before the clock starts, looked up per call.
    ``model_id`` lets the same vectors stand for a new model (the re-embed figure)."""

    def __init__(self, texts: dict[str, npt.NDArray[np.float32]], model_id: str = "hash") -> None:
        self._vectors = texts
        self._descriptor = EmbeddingDescriptor(
            provider="precomputed", model_id=model_id, dimension=DIM
        )
        self.calls = 0

    @property
    def descriptor(self) -> EmbeddingDescriptor:
        return self._descriptor

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        return np.stack([self._vectors[t] for t in texts])

    def as_function(self) -> Callable[[Sequence[str]], list[list[float]]]:
        """The same vectors as LangGraph's ``embed`` function."""
        return lambda texts: np.stack([self._vectors[t] for t in texts]).tolist()


def precompute(count: int) -> dict[str, npt.NDArray[np.float32]]:
    """Hash vectors of every memory and of every probe (a probe gets its memory's)."""
    hashing = HashingProvider(DIM)
    texts = [statement(i) for i in range(count)]
    out: dict[str, npt.NDArray[np.float32]] = {}
    for first in range(0, count, 2000):
        part = texts[first : first + 2000]
        rows = np.asarray(hashing.embed(part), dtype=np.float32)
        for offset, text in enumerate(part):
            out[text] = rows[offset]
            out[probe(first + offset)] = rows[offset]
    return out


def run_engine(
    count: int, batch: int, vectors: dict[str, npt.NDArray[np.float32]] | None
) -> dict[str, Any]:
    """Remember ``count`` memories in batches of ``batch``, one probing search after each."""
    folder = tempfile.mkdtemp(prefix="vectors-ack-")
    provider = PrecomputedProvider(vectors) if vectors is not None else None
    ack = search = hook = 0.0
    found = batches = 0
    try:
        with MemoryEngine.open(folder, embeddings=provider, sync=True) as engine:
            channel = engine.semantic
            if channel is not None:
                inner = channel.embed_appended

                def timed(events: Sequence[object], positions: Sequence[int] = ()) -> None:
                    nonlocal hook
                    started = time.perf_counter()
                    inner(events, positions)
                    hook += time.perf_counter() - started

                channel.embed_appended = timed  # type: ignore[method-assign]
            for first in range(0, count, batch):
                texts = [statement(i) for i in range(first, min(first + batch, count))]
                started = time.perf_counter()
                engine.remember_many(NS, texts)
                middle = time.perf_counter()
                last = first + len(texts) - 1
                query = probe(last) if vectors is not None else statement(last)
                result = engine.recall(NS, query, 5)
                ack += middle - started
                search += time.perf_counter() - middle
                batches += 1
                # Found: ranked first, or tied with the first (hash vectors of two memories
                # can coincide; ties go by memory id).
                best = result.results[0].score if result.results else None
                tied = {h.statement for h in result.results if h.score == best}
                ready = result.semantic is None or result.semantic.state in ("ready", "off")
                found += int(texts[-1] in tied and ready)
            calls = provider.calls if provider is not None else 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "memories": count,
        "batch": batch,
        "acknowledged_per_s": count / ack,
        "searchable_per_s": count / (ack + search),
        "first_search_ms_median_batch": search / batches * 1000,
        "found_first_after_its_batch": f"{found}/{batches}",
        "vector_hook_us_per_memory": hook / count * 1e6,
        "provider_calls": calls,
    }


def run_reembed(count: int, vectors: dict[str, npt.NDArray[np.float32]]) -> dict[str, Any]:
    """Fill a store in batches of 1,000, then time the indexer re-embedding every memory for
    a new model: in the caller's thread (``index_vectors``) and in the background thread
    (``wait_for_vectors``), against the foreground path's time for the same vectors."""
    folder = tempfile.mkdtemp(prefix="vectors-reembed-")
    try:
        first = PrecomputedProvider(vectors)
        with MemoryEngine.open(folder, embeddings=first, index_in_background=False) as engine:
            channel = engine.semantic
            assert channel is not None
            inner = channel.embed_appended
            hook = 0.0

            def timed(events: Sequence[object], positions: Sequence[int] = ()) -> None:
                nonlocal hook
                started = time.perf_counter()
                inner(events, positions)
                hook += time.perf_counter() - started

            channel.embed_appended = timed  # type: ignore[method-assign]
            for start in range(0, count, 1000):
                engine.remember_many(
                    NS, [statement(i) for i in range(start, min(start + 1000, count))]
                )
            started = time.perf_counter()
            engine.index_vectors()  # nothing to embed: writes the buffered rows, one statement
            flush = time.perf_counter() - started
        figures: dict[str, Any] = {
            "foreground_vectors_per_s": count / hook,
            "foreground_flush_ms": flush * 1000,
        }
        second = PrecomputedProvider(vectors, model_id="hash-v2")
        with MemoryEngine.open(folder, embeddings=second, index_in_background=False) as engine:
            engine.catch_up()
            started = time.perf_counter()
            written = engine.index_vectors()
            took = time.perf_counter() - started
        figures |= {
            "indexer_caller_vectors_per_s": written / took,
            "indexer_caller_calls": second.calls,
        }
        third = PrecomputedProvider(vectors, model_id="hash-v3")
        started = time.perf_counter()
        with MemoryEngine.open(folder, embeddings=third) as engine:
            ready = engine.wait_for_vectors(600)
            took = time.perf_counter() - started
        figures |= {
            "indexer_background_vectors_per_s": count / took if ready else 0.0,
            "indexer_background_includes_open": True,
        }
        return figures
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def run_peer(count: int, batch: int, vectors: dict[str, npt.NDArray[np.float32]]) -> dict[str, Any]:
    """LangGraph InMemoryStore with the same embedding function: batches of ``PutOp``."""
    from langgraph.store.base import PutOp
    from langgraph.store.memory import InMemoryStore

    embed = PrecomputedProvider(vectors).as_function()
    store = InMemoryStore(index={"dims": DIM, "embed": embed, "fields": ["text"]})  # type: ignore[typeddict-item]
    ns = ("bench", "vectors")
    ack = search = 0.0
    found = batches = 0
    for first in range(0, count, batch):
        ops = [
            PutOp(ns, f"m{i}", {"text": statement(i)})
            for i in range(first, min(first + batch, count))
        ]
        started = time.perf_counter()
        store.batch(ops)
        middle = time.perf_counter()
        last = first + len(ops) - 1
        hits = store.search(ns, query=probe(last), limit=5)
        ack += middle - started
        search += time.perf_counter() - middle
        batches += 1
        tied = {h.key for h in hits if hits and h.score == hits[0].score}
        found += int(f"m{last}" in tied)
    return {
        "memories": count,
        "batch": batch,
        "acknowledged_per_s": count / ack,
        "searchable_per_s": count / (ack + search),
        "found_first_after_its_batch": f"{found}/{batches}",
    }


_PARTS: tuple[tuple[str, str, str], ...] = (
    ("memory_ledger.commands.engine.batch", "_specs", "statements checked (_specs)"),
    ("memory_ledger.commands.engine.direct", "decide_command", "items validated, decided"),
    ("memory_ledger.commands.engine.direct", "plan_finish", "reconciliation planned"),
    ("memory_ledger.commands.secret_door", "check_events", "secret door (check_events)"),
    ("memory_ledger.ledger.mapper.MsgspecMapper", "to_stored_event", "events encoded"),
    ("memory_ledger.ledger.lmdb.LMDBApplicationRecorder", "insert_events", "ledger write + fsync"),
    (
        "memory_ledger.commands.engine.memory_engine.MemoryEngine",
        "_apply_inline",
        "serving state + BM25 (inline apply)",
    ),
)
"""The write path's functions timed by :func:`run_parts`: (module or module.Class, name, label)."""


def run_parts(count: int) -> dict[str, float]:
    """Remember ``count`` memories (lexical) in batches of 1,000, each followed by a recall
    finding it; the median per batch (ms) of the whole, of the process CPU time, and of the
    time inside each stage of the write path."""
    import importlib

    spent: dict[str, float] = {}

    def timed(label: str, inner: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(inner)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                spent[label] = spent.get(label, 0.0) + time.perf_counter() - started

        return wrapper

    patched: list[tuple[Any, str, Any]] = []

    def patch(where: str, name: str, label: str) -> None:
        try:
            owner: Any = importlib.import_module(where)
        except ImportError:
            module, _, cls = where.rpartition(".")
            owner = getattr(importlib.import_module(module), cls)
        patched.append((owner, name, vars(owner).get(name)))
        setattr(owner, name, timed(label, getattr(owner, name)))

    paused = [0.0]

    def collector(phase: str, _info: dict[str, Any]) -> None:
        if phase == "start":
            paused[0] = time.perf_counter()
        else:
            spent["cyclic GC (inside the parts)"] = (
                spent.get("cyclic GC (inside the parts)", 0.0) + time.perf_counter() - paused[0]
            )

    folder = tempfile.mkdtemp(prefix="vectors-parts-")
    batches: list[dict[str, float]] = []
    try:
        for where, name, label in _PARTS:
            patch(where, name, label)
        with MemoryEngine.open(folder, sync=True) as engine:
            engine.remember_many(NS, [statement(i) for i in range(count, count + 1000)])
            gc.callbacks.append(collector)
            try:
                for first in range(0, count, 1000):
                    texts = [statement(i) for i in range(first, min(first + 1000, count))]
                    spent.clear()
                    started, cpu = time.perf_counter(), time.process_time()
                    engine.remember_many(NS, texts)
                    middle = time.perf_counter()
                    engine.recall(NS, texts[-1], 5)
                    spent["a recall finding the batch"] = time.perf_counter() - middle
                    spent["process CPU"] = time.process_time() - cpu
                    spent["total"] = time.perf_counter() - started
                    batches.append(dict(spent))
            finally:
                gc.callbacks.remove(collector)
    finally:
        for owner, name, original in reversed(patched):
            if original is None:
                delattr(owner, name)  # it was inherited: the class's own entry goes
            else:
                setattr(owner, name, original)
        shutil.rmtree(folder, ignore_errors=True)
    labels = sorted({label for batch in batches for label in batch})
    return {
        label: statistics.median(batch.get(label, 0.0) for batch in batches) * 1000
        for label in labels
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks vectors_ack", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="1,000 memories (smoke test)")
    parser.add_argument("--memories", type=int, default=None)
    args = parser.parse_args(argv)
    count = args.memories or (1000 if args.quick else 16_000)
    single = 100 if args.quick else 1000
    vectors = precompute(count)
    load_before = os.getloadavg()
    figures: dict[str, Any] = {}
    rows: list[tuple[str, str]] = []
    for batch in (1000, 100, 1):
        n = count if batch > 1 else min(single, count)
        ours = run_engine(n, batch, vectors)
        lexical = run_engine(n, batch, None)
        peer = run_peer(n, batch, vectors)
        print(
            f"batch {batch}: ledger {ours}, lexical only {lexical}, InMemoryStore {peer}",
            flush=True,
        )
        figures[f"batch_{batch}"] = {
            "ledger": ours,
            "ledger_lexical_only": lexical,
            "in_memory_store": peer,
        }
        rows += [
            (
                f"batch {batch}: {n} memories, ledger acknowledged/s",
                f"{ours['acknowledged_per_s']:,.0f}",
            ),
            (
                f"batch {batch}: ledger searchable with vectors/s",
                f"{ours['searchable_per_s']:,.0f}",
            ),
            (
                f"batch {batch}: found first by vector after its batch",
                ours["found_first_after_its_batch"],
            ),
            (f"batch {batch}: vector hook µs/memory", f"{ours['vector_hook_us_per_memory']:.1f}"),
            (
                f"batch {batch}: first search after the batch, ms",
                f"{ours['first_search_ms_median_batch']:.1f}",
            ),
            (f"batch {batch}: provider calls", str(ours["provider_calls"])),
            (
                f"batch {batch}: ledger lexical only, acknowledged/s",
                f"{lexical['acknowledged_per_s']:,.0f}",
            ),
            (
                f"batch {batch}: ledger lexical only, searchable/s",
                f"{lexical['searchable_per_s']:,.0f}",
            ),
            (f"batch {batch}: InMemoryStore acknowledged/s", f"{peer['acknowledged_per_s']:,.0f}"),
            (f"batch {batch}: InMemoryStore searchable/s", f"{peer['searchable_per_s']:,.0f}"),
        ]
    reembed = run_reembed(count, vectors)
    figures["reembed"] = reembed
    rows += [
        ("foreground path: vectors/s (hook time)", f"{reembed['foreground_vectors_per_s']:,.0f}"),
        ("foreground rows written behind: one flush, ms", f"{reembed['foreground_flush_ms']:.0f}"),
        (
            "indexer re-embed, caller's thread: vectors/s",
            f"{reembed['indexer_caller_vectors_per_s']:,.0f}",
        ),
        ("indexer re-embed, provider calls", str(reembed["indexer_caller_calls"])),
        (
            "indexer re-embed, background (open included): vectors/s",
            f"{reembed['indexer_background_vectors_per_s']:,.0f}",
        ),
    ]
    parts = run_parts(count)
    figures["parts_ms_per_batch_of_1000"] = parts
    total = parts.pop("total")
    rows.append(("where a lexical batch of 1,000 goes: total ms (median)", f"{total:.1f}"))
    rows += [(f"  {label}, ms", f"{ms:.1f} ({ms / total:.0%})") for label, ms in parts.items()]
    load_after = os.getloadavg()
    figures["load_average"] = {"before": load_before, "after": load_after}
    rows.append(("load average before / after", f"{load_before[0]:.1f} / {load_after[0]:.1f}"))
    print_table("vectors before the acknowledgement (issue 35, item 2)", rows)
    path = save("vectors_ack", figures)
    print(f"figures written to {path}")
    return 0
