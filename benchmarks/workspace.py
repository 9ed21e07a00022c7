"""Workspace retrieval: construction, time to ready, query p50/p99 per mode, release rate.

Two trees are indexed by ``memory_ledger.commands.workspace.retrieval.WorkspaceRetrieval``
(default ``LineWindows`` chunking): this repository's own checkout, and a synthetic tree of
2,000 small Python modules (``--files``; 40 folders, deterministic for ``--seed``). For each:

- construction: the constructor's wall time (it returns before indexing; the median of
  ``--repeat`` constructions, each closed again);
- time to ready: construction to ``wait_ready`` lexical-only, then with the embedding
  provider (every chunk embedded), then reopened with the vector cache of the previous run
  (unchanged files reuse their vectors by digest, no provider call);
- queries: every query of the tree (words drawn from its own text) in each mode,
  ``lexical``, ``semantic``, ``hybrid`` (RRF k = 60), each including the re-read and digest
  check of every served file; p50 and p99;
- the baseline in the same run, beside the lexical mode: a plain ``grep -rliF`` scan of the
  tree for the query's words (a subprocess; a Python walk-and-search scan where no ``grep``
  is found), p50 and p99;
- the release rate after close: the share of vector arrays held before ``close`` that are
  freed after it (1.0 = all), and the vector memory held before close.

``--embeddings`` picks the provider as the hybrid benchmark does (``auto``: the bundled
MiniLM when the ``embeddings`` extra is installed, else a hashing provider; ``fake``: the
hashing provider, what ``--quick`` uses).
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.hybrid import make_provider
from benchmarks.results import median, percentile, print_table, save
from memory_ledger.commands.embeddings.base import EmbeddingProvider
from memory_ledger.commands.workspace.admission import GENERATED_DIRS
from memory_ledger.commands.workspace.retrieval import WorkspaceRetrieval
from memory_ledger.commands.workspace.search import SearchMode

REPO = Path(__file__).resolve().parents[1]
WORDS = (
    "ledger projection snapshot recall memory session turn budget vector index chunk digest "
    "catalog partition verify replay export backup restore namespace tenant principal scope "
    "token secret redact extract candidate reconcile activate supersede conflict forget pin "
    "prune admit revoke fusion rank lexical semantic hybrid embed cosine window summary goal "
    "compact binding package generation citation provider request response limit failure"
).split()


def synthetic_tree(root: Path, files: int, seed: int) -> Path:
    """``files`` Python modules of 20-60 lines under 40 folders (deterministic)."""
    rng = random.Random(seed)
    for n in range(files):
        folder = root / f"pkg{n % 40:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        lines = [f'"""Module {n}: {" ".join(rng.sample(WORDS, 8))}."""', ""]
        for f in range(rng.randint(3, 8)):
            name = "_".join(rng.sample(WORDS, 2))
            lines.append(f"def {name}_{f}(value):")
            lines.append(f'    """{" ".join(rng.sample(WORDS, 10)).capitalize()}."""')
            lines.extend(
                f"    value = value + {rng.randint(1, 99)}  # {rng.choice(WORDS)}" for _ in range(3)
            )
            lines.extend(["    return value", ""])
        (folder / f"mod{n:04d}.py").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def tree_queries(root: Path, count: int, seed: int) -> list[str]:
    """``count`` two-word queries drawn from words of the tree's own files."""
    rng = random.Random(seed)
    vocabulary: set[str] = set()
    for path in sorted(root.rglob("*.py"))[:400]:
        if not any(part in GENERATED_DIRS for part in path.parts):
            vocabulary.update(re.findall(r"[a-z]{5,12}", path.read_text(errors="ignore")))
    words = sorted(vocabulary)
    return [" ".join(rng.sample(words, 2)) for _ in range(count)]


def grep_scan(root: Path, query: str) -> int:
    """Files holding any word of ``query`` (case-insensitive): ``grep -rliF``, or a Python
    walk when no grep is installed. Returns the number of files listed."""
    words = query.split()
    grep = shutil.which("grep")
    if grep:
        args = [grep, "-rliF", *(a for w in words for a in ("-e", w)), str(root)]
        out = subprocess.run(args, capture_output=True, check=False).stdout
        return out.count(b"\n")
    found = 0
    lowered = [w.lower().encode() for w in words]
    for folder, _, names in os.walk(root):
        for name in names:
            try:
                data = Path(folder, name).read_bytes().lower()
            except OSError:
                continue
            found += any(w in data for w in lowered)
    return found


def timed_ms(fn: Any, *args: Any) -> float:
    """Wall time of ``fn(*args)`` in milliseconds."""
    start = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - start) * 1000


def ready_seconds(root: Path, **kwargs: Any) -> tuple[float, WorkspaceRetrieval]:
    """Seconds from construction to ``wait_ready``, and the (open) retrieval."""
    start = time.perf_counter()
    ws = WorkspaceRetrieval(root, **kwargs)
    ws.wait_ready(3600)
    return time.perf_counter() - start, ws


def bench_tree(
    label: str, root: Path, provider: EmbeddingProvider, queries: list[str], repeat: int
) -> dict[str, Any]:
    """Every figure of one tree (see the module docstring); prints its table."""
    construct = []
    for _ in range(repeat):
        start = time.perf_counter()
        ws = WorkspaceRetrieval(root)
        construct.append((time.perf_counter() - start) * 1000)
        ws.close()
    lexical_ready, ws = ready_seconds(root)
    ws.close()
    with tempfile.TemporaryDirectory(prefix="ws-vectors-") as cache:
        ready, ws = ready_seconds(root, embeddings=provider, vector_cache=cache)
        status = ws.status()
        figures: dict[str, Any] = {
            "files": status.files_indexed,
            "chunks": status.chunks,
            "excluded": status.excluded,
            "provider_calls": status.provider_calls,
            "construct_ms_p50": median(construct),
            "ready_lexical_s": lexical_ready,
            "ready_semantic_s": ready,
        }
        modes: tuple[SearchMode, ...] = ("lexical", "semantic", "hybrid")
        for mode in modes:
            ws.search(queries[0], mode, 8)  # warm-up
            times = [timed_ms(ws.search, q, mode, 8) for q in queries]
            figures[f"{mode}_p50_ms"] = median(times)
            figures[f"{mode}_p99_ms"] = percentile(times, 99)
        grep = [timed_ms(grep_scan, root, q) for q in queries]
        figures["grep_p50_ms"] = median(grep)
        figures["grep_p99_ms"] = percentile(grep, 99)
        figures["vector_bytes_before_close"] = ws.status().vector_bytes
        final = ws.close()
        figures["release_rate"] = final.release_rate
        figures["released"] = final.released
        reopen, ws = ready_seconds(root, embeddings=provider, vector_cache=cache)
        figures["ready_reopen_cached_s"] = reopen
        figures["reopen_cache_hits"] = ws.status().cache_hits
        ws.close()
    print_table(
        f"workspace retrieval: {label} ({figures['files']} files, {figures['chunks']} chunks)",
        [
            ("construction (p50)", f"{figures['construct_ms_p50']:.2f} ms"),
            ("time to ready, lexical only", f"{lexical_ready:.2f} s"),
            ("time to ready, with vectors", f"{ready:.2f} s"),
            ("time to ready, reopened (vector cache)", f"{reopen:.2f} s"),
            *(
                (f"{mode} query p50 / p99", f"{figures[f'{mode}_p50_ms']:.2f} / "
                 f"{figures[f'{mode}_p99_ms']:.2f} ms")
                for mode in modes
            ),
            ("grep -rliF scan p50 / p99 (baseline)", f"{figures['grep_p50_ms']:.2f} / "
             f"{figures['grep_p99_ms']:.2f} ms"),
            ("lexical p50 / grep p50", f"{figures['lexical_p50_ms'] / figures['grep_p50_ms']:.3f}"),
            ("vector memory before close", f"{figures['vector_bytes_before_close'] / 1e6:.1f} MB"),
            ("release rate after close", f"{figures['release_rate']:.3f}"),
        ],
    )  # fmt: skip
    return figures


def main(argv: list[str]) -> int:
    """Run the benchmark; figures go to ``results/workspace.json``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks workspace", description=__doc__)
    parser.add_argument("--files", type=int, default=2000, help="files of the synthetic tree")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=5, help="constructions timed")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument("--embeddings", choices=("auto", "local", "fake"), default="auto")
    parser.add_argument("--quick", action="store_true", help="60 files, 10 queries, no repo")
    args = parser.parse_args(argv)
    if args.quick:
        args.files, args.queries, args.repeat, args.embeddings = 60, 10, 2, "fake"
    provider = make_provider(args.embeddings)
    figures: dict[str, Any] = {"model": provider.descriptor.model_key()}
    with tempfile.TemporaryDirectory(prefix="ws-synthetic-") as scratch:
        root = synthetic_tree(Path(scratch), args.files, args.seed)
        queries = tree_queries(root, args.queries, args.seed)
        figures["synthetic"] = bench_tree(
            f"synthetic tree of {args.files} files", root, provider, queries, args.repeat
        )
    if not args.quick:
        queries = tree_queries(REPO, args.queries, args.seed)
        figures["repository"] = bench_tree("this repository", REPO, provider, queries, args.repeat)
    print(f"figures written to {save('workspace', figures)}")
    return 0
