"""BM25 search at 100,000 and 1,000,000 documents: the previous scorer beside the current one.

Builds the lexical index recall uses (``projections.text_index.BM25Index`` over
``commands.recall.lexical.analyze_document`` of each statement: the synthetic facts of
``benchmarks.corpus``, the texts ``python -m benchmarks million`` writes) and asks it the
million benchmark's questions (``benchmarks.corpus.queries``, analysed by
``analyze_query``), at ``k`` = 5 (a recall's depth) and 100 (hybrid fusion's lexical depth).
Per size and ``k`` it prints p50/p99 (wall ms, and CPU ms: ``time.process_time``) of:

- previous: the scorer of commit 01a31e8, kept here as :func:`previous_search` (posting
  lists as ``{slot: tf}`` dicts, term-at-a-time in Python with MaxScore pruning), over the
  same documents;
- current, built: ``BM25Index.search`` of the index built in memory (as the writing
  process holds it);
- current, restored: ``BM25Index.search`` of ``BM25Index.from_state(index.state())`` (as a
  fresh reader holds it, from the recall file);

and how many queries' hits (ids, order and scores) differ between the previous and the
current scorer (0 expected: both compute the same IEEE sums in the same order). The load
average is printed with each size.

``python -m benchmarks bm25 [--sizes 100000,1000000] [--queries 200] [--quick]``
"""

from __future__ import annotations

import argparse
import heapq
import math
import os
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from benchmarks.corpus import memories, queries
from benchmarks.results import median, percentile, print_table, save
from memory_ledger.commands.recall.lexical import analyze_document, analyze_query
from memory_ledger.projections.text_index import BM25Index, IndexedDoc, ScoredDoc, tokenize

KS = (5, 100)
_SLACK = 1.0 + 1e-9


class PreviousIndex:
    """The posting lists as the previous scorer held them: ``term -> {slot: tf}``."""

    def __init__(self, texts: list[str], ids: list[str], positions: list[int]) -> None:
        self.postings: dict[str, dict[int, int]] = {}
        self.lengths: list[int] = []
        for slot, text in enumerate(texts):
            tokens = tokenize(text)
            self.lengths.append(len(tokens))
            for term, tf in Counter(tokens).items():
                self.postings.setdefault(term, {})[slot] = tf
        self.ids, self.positions = ids, positions
        self.frontier: dict[str, dict[int, int]] = {}
        total, n = sum(self.lengths), len(texts)
        avgdl = total / n if n and total else 1.0
        k1, b = 1.2, 0.75
        self.norms = [k1 * (1.0 - b + b * dl / avgdl) for dl in range(max(self.lengths) + 1)]

    def max_saturation(self, term: str, plist: dict[int, int]) -> float:
        frontier = self.frontier.get(term)
        if frontier is None:
            frontier = {}
            for slot, tf in plist.items():
                dl = self.lengths[slot]
                if dl < frontier.get(tf, dl + 1):
                    frontier[tf] = dl
            self.frontier[term] = frontier
        return max(tf / (tf + self.norms[dl]) for tf, dl in frontier.items())


def previous_search(index: PreviousIndex, query: str, k: int) -> list[ScoredDoc]:
    """``BM25Index.search`` as of commit 01a31e8 (dicts, MaxScore), for comparison."""
    qtf = Counter(tokenize(query))
    postings, n, k1p1 = index.postings, len(index.ids), 2.2
    terms: list[tuple[float, str, dict[int, int]]] = []
    for term, count in qtf.items():
        plist = postings.get(term)
        if plist is not None:
            df = len(plist)
            terms.append((count * math.log(1.0 + (n - df + 0.5) / (df + 0.5)) * k1p1, term, plist))
    if not terms:
        return []
    terms.sort(key=lambda entry: (-entry[0], entry[1]))
    norms, lengths = index.norms, index.lengths
    bound_after = [0.0] * len(terms)
    running = 0.0
    for j in range(len(terms) - 1, 0, -1):
        bound_after[j] = running
        weight, term, plist = terms[j]
        running += weight * index.max_saturation(term, plist)
    bound_after[0] = running
    running += terms[0][0]
    acc: dict[int, float] = {}
    pool: set[int] | None = None
    for j, (weight, _term, plist) in enumerate(terms):
        rest = bound_after[j]
        if pool is None:
            if not acc:
                acc = {s: weight * tf / (tf + norms[lengths[s]]) for s, tf in plist.items()}
            else:
                get = acc.get
                for s, tf in plist.items():
                    acc[s] = get(s, 0.0) + weight * tf / (tf + norms[lengths[s]])
            bound_seen = running - rest
            if rest <= 0.0 or len(acc) < k or rest * _SLACK >= bound_seen:
                continue
            candidates = acc
        else:
            if len(plist) < len(pool):
                for s, tf in plist.items():
                    if s in pool:
                        acc[s] += weight * tf / (tf + norms[lengths[s]])
            else:
                for s in pool:
                    tf_or_none = plist.get(s)
                    if tf_or_none is not None:
                        acc[s] += weight * tf_or_none / (tf_or_none + norms[lengths[s]])
            if rest <= 0.0 or len(pool) <= k:
                continue
            candidates = {s: acc[s] for s in pool}
        theta = heapq.nlargest(k, candidates.values())[-1]
        if pool is None and rest * _SLACK >= theta:
            continue
        pool = {s for s, v in candidates.items() if (v + rest) * _SLACK >= theta}
    scores = acc if pool is None else {s: acc[s] for s in pool}
    if len(scores) > k:
        threshold = heapq.nlargest(k, scores.values())[-1]
        selected = [s for s, v in scores.items() if v >= threshold and v > 0.0]
    else:
        selected = [s for s, v in scores.items() if v > 0.0]
    ids, positions = index.ids, index.positions
    top = heapq.nsmallest(k, selected, key=lambda s: (-scores[s], positions[s], ids[s]))
    return [ScoredDoc(ids[s], positions[s], scores[s]) for s in top]


def timed(search: Callable[[str], Any], asked: list[str]) -> tuple[dict[str, float], list[Any]]:
    """p50/p99 wall and CPU milliseconds of ``search`` over ``asked``, after one pass over
    them all (warm: every term's search cache built, as a reader's after its first uses)."""
    for question in asked:
        search(question)
    wall: list[float] = []
    cpu: list[float] = []
    answers = []
    for question in asked:
        began, began_cpu = time.perf_counter(), time.process_time()
        answers.append(search(question))
        cpu.append((time.process_time() - began_cpu) * 1000)
        wall.append((time.perf_counter() - began) * 1000)
    figures = {
        "p50_ms": median(wall),
        "p99_ms": percentile(wall, 99),
        "cpu_p50_ms": median(cpu),
        "cpu_p99_ms": percentile(cpu, 99),
    }
    return figures, answers


def measure(size: int, count: int) -> dict[str, Any]:
    """Figures at one size (see the module doc)."""
    corpus = memories(size)
    asked = [analyze_query(q) for q in queries(corpus, count, seed=size)]
    texts = [analyze_document(None, m.statement) for m in corpus]
    del corpus
    ids = [f"m{i:07d}" for i in range(size)]
    started = time.perf_counter()
    built = BM25Index.build(IndexedDoc(ids[i], i, text) for i, text in enumerate(texts))
    build_s = time.perf_counter() - started
    started = time.perf_counter()
    state = built.state()
    restored = BM25Index.from_state(state)
    restore_s = time.perf_counter() - started
    del state
    previous = PreviousIndex(texts, ids, list(range(size)))
    del texts
    figures: dict[str, Any] = {"documents": size, "queries": count, "build_s": build_s}
    figures["state_and_restore_s"] = restore_s
    for k in KS:
        old, old_hits = timed(lambda q, k=k: previous_search(previous, q, k), asked)
        new, new_hits = timed(lambda q, k=k: built.search(q, k), asked)
        back, back_hits = timed(lambda q, k=k: restored.search(q, k), asked)
        figures[f"k{k}"] = {
            "previous": old,
            "current_built": new,
            "current_restored": back,
            "differing_queries": sum(
                a != b or a != c for a, b, c in zip(old_hits, new_hits, back_hits, strict=True)
            ),
        }
    figures["load_average"] = os.getloadavg()
    return figures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks bm25", description=__doc__)
    parser.add_argument("--sizes", default="100000,1000000", help="comma-separated doc counts")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="2,000 documents, 20 queries")
    args = parser.parse_args(argv)
    sizes = [2_000] if args.quick else [int(s) for s in args.sizes.split(",")]
    count = 20 if args.quick else args.queries
    print(f"load average before: {os.getloadavg()[0]:.2f} (2 cores)")
    figures: dict[str, Any] = {}
    rows: list[tuple[str, str]] = []
    for size in sizes:
        f = measure(size, count)
        figures[str(size)] = f
        for k in KS:
            at = f[f"k{k}"]
            for label, key in (
                ("previous (dicts, MaxScore)", "previous"),
                ("current, built", "current_built"),
                ("current, restored", "current_restored"),
            ):
                g = at[key]
                rows.append(
                    (
                        f"{size:,} docs, k={k}: {label} p50 / p99 (CPU p50)",
                        f"{g['p50_ms']:.2f} / {g['p99_ms']:.2f} ms ({g['cpu_p50_ms']:.2f})",
                    )
                )
            rows.append(
                (
                    f"{size:,} docs, k={k}: p50 previous / current restored",
                    f"{at['previous']['p50_ms'] / at['current_restored']['p50_ms']:.1f}x",
                )
            )
            rows.append(
                (f"{size:,} docs, k={k}: queries whose hits differ", str(at["differing_queries"]))
            )
        rows.append(
            (
                f"{size:,} docs: build; state + restore",
                f"{f['build_s']:.1f} s; {f['state_and_restore_s']:.1f} s",
            )
        )
        rows.append(
            (
                f"{size:,} docs: load average (1, 5, 15 min)",
                " ".join(f"{x:.2f}" for x in f["load_average"]),
            )
        )
    print_table("BM25 search: previous scorer vs current (wall ms; CPU ms)", rows)
    path = save("bm25", figures)
    print(f"figures written to {path}")
    return 0
