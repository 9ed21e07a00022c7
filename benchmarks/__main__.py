"""Benchmark runner: ``python -m benchmarks <name> [--quick]``; ``list`` shows the names."""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "catchup": "benchmarks.catchup",
    "secrets": "benchmarks.secrets_scan",
    "run": "benchmarks.locomo.run",
    "append": "benchmarks.append",
    "engine": "benchmarks.engine",
    "recall": "benchmarks.recall",
    "memory_map": "benchmarks.memory_map",
    "locomo": "benchmarks.locomo.retrieval",
    "locomo-limits": "benchmarks.locomo.limits",
    "hybrid": "benchmarks.hybrid",
    "memory": "benchmarks.memory",
    "mcp": "benchmarks.mcp",
    "cli": "benchmarks.cli",
    "growth": "benchmarks.growth",
    "million": "benchmarks.million",
    "peers": "benchmarks.peers",
    "workspace": "benchmarks.workspace",
    "encryption": "benchmarks.encryption",
    "erasure_files": "benchmarks.erasure_files",
    "races": "benchmarks.races",
    "langgraph": "benchmarks.langgraph_bench",
    "langgraph_async": "benchmarks.langgraph_async",
    "conformance": "benchmarks.conformance",
    "ui": "benchmarks.ui",
    "ui-forms": "benchmarks.ui_forms",
    "asof": "benchmarks.asof",
    "ann": "benchmarks.ann",
    "bm25": "benchmarks.bm25",
    "vectors_ack": "benchmarks.vectors_ack",
    "verify_flips": "benchmarks.verify_flips",
    "word_targets": "benchmarks.word_targets",
    "mem0_import": "benchmarks.mem0_import",
    "serving": "benchmarks.serving",
    "batch_cpu": "benchmarks.batch_cpu",
    "batch_floor": "benchmarks.batch_floor",
    "verify_file_flips": "benchmarks.verify_file_flips",
    "otel": "benchmarks.otel",
    "all": "benchmarks.run_all",
}


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "list"):
        print("usage: python -m benchmarks <name> [options]\n\nbenchmarks:")
        for name, module_name in BENCHMARKS.items():
            doc = (importlib.import_module(module_name).__doc__ or "").strip().splitlines()[0]
            print(f"  {name:12} {doc}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in BENCHMARKS:
        print(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    module = importlib.import_module(BENCHMARKS[name])
    result: int = module.main(rest)
    return result


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
