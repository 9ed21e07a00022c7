"""Memory map size: estimated tokens of ``engine.memory_map`` at 250, 1,000, 16,000 records.

The records are the synthetic facts of ``benchmarks.corpus`` (subjects drawn from thousands
of names, 30 predicates), one namespace. Baselines in the same run: the same vocabulary
rendered without the term limit and token budget (every subject and predicate with its
count), and every statement of the namespace listed in full (what a map replaces). Also
reports the render time (first call, then cached). Target (issue 7, item 5): <= 300 tokens.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks.corpus import BENCH_NAMESPACE, fill, memories, scratch
from benchmarks.results import print_table, save
from memory_ledger.commands import MemoryEngine
from memory_ledger.projections import estimate_tokens, render_memory_map

TARGET_TOKENS = 300


def measure(size: int, parent: str | None) -> dict[str, Any]:
    corpus = memories(size)
    ns = BENCH_NAMESPACE
    with scratch(f"bench_map_{size}_", parent) as folder:
        with MemoryEngine.open(folder, sync=False) as engine:
            fill(engine, corpus)
            engine.catch_up()
            started = time.perf_counter()
            text = engine.memory_map(ns)
            first_ms = (time.perf_counter() - started) * 1000
            started = time.perf_counter()
            engine.memory_map(ns)
            cached_ms = (time.perf_counter() - started) * 1000
            unbounded = render_memory_map(  # the renderer itself, without its bounds
                engine.canonical,
                ns.tenant,
                ns.principal,
                ns.scope_id,
                limit=10**9,
                max_tokens=10**9,
            )
            records = engine.count_active_memories(ns)
    subjects = len({m.subject for m in corpus})
    return {
        "records": records,
        "subjects": subjects,
        "predicates": len({m.predicate for m in corpus}),
        "map_tokens": estimate_tokens(text),
        "map_characters": len(text),
        "unbounded_vocabulary_tokens": estimate_tokens(unbounded),
        "all_statements_tokens": estimate_tokens("\n".join(m.statement for m in corpus)),
        "render_first_ms": first_ms,
        "render_cached_ms": cached_ms,
        "target_met": estimate_tokens(text) <= TARGET_TOKENS,
        "map": text,
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks memory_map", description=__doc__)
    parser.add_argument("--sizes", default="250,1000,16000")
    parser.add_argument("--dir", default=None, help="scratch folder parent (default: $TMPDIR)")
    parser.add_argument("--quick", action="store_true", help="50 and 250 records")
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes = "50,250"
    per_size = [measure(int(s), args.dir) for s in args.sizes.split(",") if s.strip()]
    rows: list[tuple[str, str]] = []
    for f in per_size:
        n = f"{f['records']:,}"
        rows += [
            (f"{n} records: subjects / predicates", f"{f['subjects']:,} / {f['predicates']}"),
            (
                f"{n} records: memory map (target <= {TARGET_TOKENS})",
                f"{f['map_tokens']} tokens ({'met' if f['target_met'] else 'MISSED'})",
            ),
            (
                f"{n} records: baseline unbounded vocabulary",
                f"{f['unbounded_vocabulary_tokens']:,}",
            ),
            (f"{n} records: baseline all statements", f"{f['all_statements_tokens']:,}"),
            (
                f"{n} records: render first / cached",
                f"{f['render_first_ms']:.1f} / {f['render_cached_ms']:.3f} ms",
            ),
        ]
    print_table("memory map size (estimated tokens: ~4 characters, 1 per CJK character)", rows)
    print(f"map at {per_size[-1]['records']:,} records:\n{per_size[-1]['map']}")
    print(f"figures written to {save('memory_map', {'sizes': per_size})}")
    return 0
