"""Approximate vs exact semantic search at 100,000 and 1,000,000 vectors (issue 30 item 3).

Synthesises clustered unit vectors of 384 dimensions (MiniLM's size; a random centre per
100 rows, 1,000 at most, plus noise, so related rows cluster as embeddings of related texts
do), nothing embedded,
and loads them into the semantic channel's in-process matrix
(``commands.recall.semantic._NamespaceVectors``). For each query (a stored row plus noise)
it asks the channel's candidate step at hybrid recall's depth (the fusion's ``depth`` 100
memories, so 200 rows as ``SemanticChannel.search`` fetches them) once exactly (one product
over the matrix) and once through the approximate index (``commands.recall.ann``:
candidates re-ranked exactly), and prints p50/p99 of each, the index's build time, its
restore time (serialized as the recall file holds it, then restored; and whether the
restored index proposes the same candidates), and the agreement: recall@10 (and @100) of
the approximate top against the exact one. The query
embedding is excluded; so are the lexical channel and the fusion, which are the same on both
paths. The machine's load average is printed before and after.

``python -m benchmarks ann [--sizes 100000,1000000] [--queries 200] [--quick]``
"""

from __future__ import annotations

import argparse
import os
import time
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.results import median, percentile, print_table, save
from memory_ledger.commands.recall import ann
from memory_ledger.commands.recall.semantic import _NamespaceVectors
from memory_ledger.projections.vectors import StoredVectors

DIMENSION = 384
ROWS_FETCHED = 200  # SemanticChannel.search: max(depth * 2 * fields, 16), depth 100


def synthesise(rows: int, seed: int = 0) -> npt.NDArray[np.float32]:
    """``rows`` clustered unit vectors (generated in blocks: float32 all the way)."""
    rng = np.random.default_rng(seed)
    count = max(10, min(1000, rows // 100))
    centres = rng.standard_normal((count, DIMENSION), dtype=np.float32)
    matrix = np.empty((rows, DIMENSION), dtype=np.float32)
    for start in range(0, rows, 100_000):
        stop = min(rows, start + 100_000)
        block = centres[rng.integers(0, count, stop - start)]
        block += 0.7 * rng.standard_normal((stop - start, DIMENSION), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        matrix[start:stop] = block
    return matrix


def load(matrix: npt.NDArray[np.float32], threshold: int) -> _NamespaceVectors:
    """The matrix as one namespace's vector rows."""
    count = len(matrix)
    vectors = _NamespaceVectors(DIMENSION, 0)
    vectors.extend(
        StoredVectors(
            memory_ids=tuple(f"m{i}" for i in range(count)),
            revisions=(1,) * count,
            digests=("d",) * count,
            last_seq=count,
            matrix=matrix,
        )
    )
    vectors.ann_threshold = threshold
    return vectors


def measure(rows: int, queries: int, threshold: int) -> dict[str, Any]:
    """Figures at one size (see the module doc)."""
    matrix = synthesise(rows)
    vectors = load(matrix, threshold)
    del matrix  # the channel holds its own copy
    rng = np.random.default_rng(1)
    asked = vectors.matrix[rng.integers(0, rows, queries)]
    asked = asked + 0.3 * rng.standard_normal(asked.shape, dtype=np.float32)
    asked /= np.linalg.norm(asked, axis=1, keepdims=True)
    started = time.perf_counter()
    vectors.top(asked[0], ROWS_FETCHED)  # trains the cells and adds every row
    build_s = time.perf_counter() - started
    exact_ms: list[float] = []
    approximate_ms: list[float] = []
    at_10: list[float] = []
    at_100: list[float] = []
    for query in asked:
        started = time.perf_counter()
        exact = vectors._top_exact(query, ROWS_FETCHED, ("statement",))
        exact_ms.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        approximate = vectors.top(query, ROWS_FETCHED)
        approximate_ms.append((time.perf_counter() - started) * 1000)
        exact_rows = [row for row, _ in exact]
        approximate_rows = [row for row, _ in approximate]
        at_10.append(ann.agreement(approximate_rows[:10], exact_rows[:10]))
        at_100.append(ann.agreement(approximate_rows[:100], exact_rows[:100]))
    index = vectors._ann
    assert index is not None
    # As a fresh process gets it from the recall file: serialized, then restored.
    serialized, _ = index.serialize()
    started = time.perf_counter()
    restored = ann.ApproximateIndex.restore(serialized, DIMENSION, index.size)
    restore_s = time.perf_counter() - started
    assert restored is not None
    same = [
        set(restored.candidates(q, ROWS_FETCHED).tolist())
        == set(index.candidates(q, ROWS_FETCHED).tolist())
        for q in asked
    ]
    return {
        "rows": rows,
        "queries": queries,
        "cells": index.cells,
        "cells_scanned": index.nprobe,
        "build_s": build_s,
        "restore_s": restore_s,
        "index_mib": len(serialized) / 2**20,
        "restored_same_candidates": sum(same) / len(same),
        "exact_p50_ms": median(exact_ms),
        "exact_p99_ms": percentile(exact_ms, 99),
        "approximate_p50_ms": median(approximate_ms),
        "approximate_p99_ms": percentile(approximate_ms, 99),
        "recall_at_10": float(np.mean(at_10)),
        "recall_at_10_min": float(np.min(at_10)),
        "recall_at_100": float(np.mean(at_100)),
        "load_average": os.getloadavg(),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks ann", description=__doc__)
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated row counts")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="3,000 rows, 20 queries")
    args = parser.parse_args(argv)
    if not ann.available():
        print("the ann extra (faiss-cpu) is not installed: nothing to compare")
        path = save("ann", {"skipped": "faiss-cpu not installed"})
        print(f"figures written to {path}")
        return 0
    sizes = [3_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    queries = 20 if args.quick else args.queries
    threshold = 1_000 if args.quick else ann.DEFAULT_THRESHOLD
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores)")
    figures: dict[str, Any] = {"dimension": DIMENSION, "rows_fetched": ROWS_FETCHED}
    rows: list[tuple[str, str]] = []
    for size in sizes:
        f = measure(size, queries, threshold)
        figures[str(size)] = f
        rows += [
            (
                f"{size:,} rows: exact p50 / p99",
                f"{f['exact_p50_ms']:.1f} / {f['exact_p99_ms']:.1f} ms",
            ),
            (
                f"{size:,} rows: approximate + exact re-rank p50 / p99",
                f"{f['approximate_p50_ms']:.1f} / {f['approximate_p99_ms']:.1f} ms",
            ),
            (
                f"{size:,} rows: ratio exact / approximate (p50)",
                f"{f['exact_p50_ms'] / f['approximate_p50_ms']:.1f}x",
            ),
            (
                f"{size:,} rows: recall@10 mean (min), recall@100",
                f"{f['recall_at_10']:.3f} ({f['recall_at_10_min']:.2f}), {f['recall_at_100']:.3f}",
            ),
            (
                f"{size:,} rows: index build (cells, scanned)",
                f"{f['build_s']:.1f} s ({f['cells']}, {f['cells_scanned']})",
            ),
            (
                f"{size:,} rows: persisted index restored (MiB; same candidates as built)",
                f"{f['restore_s']:.2f} s ({f['index_mib']:,.0f};"
                f" {f['restored_same_candidates']:.0%})",
            ),
            (f"{size:,} rows: load average", f"{f['load_average'][0]:.2f}"),
        ]
    print_table("semantic candidates: exact vs approximate (query embedding excluded)", rows)
    path = save("ann", figures)
    print(f"figures written to {path}")
    return 0
