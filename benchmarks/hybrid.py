"""Hybrid recall latency at 16,000 memories: semantic channel on, query embedding apart.

The synthetic corpus of the recall benchmark (``benchmarks.corpus``: facts about thousands
of people, 30 predicates, one namespace) is appended with sync off, then the store is
reopened durable with the bundled MiniLM provider (``memory_ledger.commands.embeddings.local``, the
``embeddings`` extra) and every memory is embedded (``engine.index_vectors()``, timed:
vectors/s). Then, for each query ("Where does Maya Chen work?", half by first name only):

- hybrid recall: ``engine.recall(namespace, query, k)`` timed whole; the query embedding
  time is ``RecallResult.semantic.query_embedding_ms``; "excluding the query embedding" is
  the difference (lexical search + exact cosine over every vector + verification + fusion);
- baselines in the same run: the same recall with the previous default fusion
  (``commands.recall.fusion.LEGACY_FUSION``: raw scores, statement vectors only; timed alternately
  with the new default, query by query), lexical-only recall of the same store
  (``canonical_candidates(semantic=False)``), a bare numpy product of the namespace's
  (n x 384) float32 matrix with a query vector (the floor of exact cosine), and the query
  embedding alone (``provider.embed([query])``).

Targets: p50 under 10 ms at 16,000 memories, excluding the query embedding (issue 8);
the new default within 20% of the previous one (issue 18).
``--embeddings fake`` uses a deterministic hashing provider instead of the model (for the
smoke test where the extra is not installed; ``auto``, the default, picks the model when
the extra is installed). ``--sources`` gives every memory a source turn (a
TranscriptObserved of its own, appended before the memories), so each memory also has a
``source`` vector and the matrix has twice the rows: the cost of the second vector.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.corpus import BENCH_NAMESPACE, EPOCH, Memory, fill, memories, queries, scratch
from benchmarks.results import median, percentile, print_table, save
from memory_ledger.commands import MemoryEngine
from memory_ledger.commands.embeddings.base import EmbeddingDescriptor, EmbeddingProvider
from memory_ledger.commands.recall.fusion import LEGACY_FUSION
from memory_ledger.ledger.events import LedgerEvent, TranscriptObserved
from memory_ledger.ledger.ids import session_stream_id
from memory_ledger.projections.text_index import tokenize


class HashingProvider:
    """Deterministic bag-of-words vectors (sha256 buckets, L2-normalized): no model."""

    def __init__(self, dimension: int = 384) -> None:
        self._descriptor = EmbeddingDescriptor(
            provider="hashing", model_id="sha256-buckets", dimension=dimension
        )

    @property
    def descriptor(self) -> EmbeddingDescriptor:
        return self._descriptor

    def embed(self, texts: Sequence[str]) -> Any:
        dim = self._descriptor.dimension
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in tokenize(text) or ["empty"]:
                bucket = int.from_bytes(hashlib.sha256(token.encode()).digest()[:4], "big")
                out[row, bucket % dim] += 1.0
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def make_provider(choice: str) -> EmbeddingProvider:
    """The bundled MiniLM (``local``), the hashing provider (``fake``), or MiniLM when the
    ``embeddings`` extra is installed and the hashing provider otherwise (``auto``)."""
    if choice == "fake":
        return HashingProvider()
    try:
        from memory_ledger.commands.embeddings.local import SentenceTransformerProvider

        return SentenceTransformerProvider()
    except ImportError:
        if choice == "local":
            raise
        return HashingProvider()


def observe_sources(engine: MemoryEngine, corpus: list[Memory], batch: int = 5000) -> None:
    """One TranscriptObserved per memory, at the (session, turn) ``corpus.activation`` gives
    it, so that each memory has a source transcript."""
    events: list[LedgerEvent] = []
    for index, m in enumerate(corpus):
        session = f"seed-{index // 100}"
        text = f"user: tell me about {m.subject}. assistant: noted, {m.statement}"
        events.append(
            TranscriptObserved(
                originator_id=session_stream_id(BENCH_NAMESPACE, session),
                originator_version=index % 100 + 1,
                recorded_at=EPOCH,
                namespace=BENCH_NAMESPACE,
                session_id=session,
                turn_id=index % 100 + 1,
                transcript=text,
                digest=hashlib.sha256(text.encode()).hexdigest(),
                occurred_at=EPOCH,
            )
        )
        if len(events) >= batch:
            engine.append(events)
            events = []
    if events:
        engine.append(events)


def stats(prefix: str, values: list[float]) -> dict[str, float]:
    return {
        f"{prefix}_p50_ms": median(values),
        f"{prefix}_p99_ms": percentile(values, 99),
        f"{prefix}_samples": len(values),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks hybrid", description=__doc__)
    parser.add_argument("--size", type=int, default=16_000, help="memories (16,000)")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument("--embeddings", choices=("auto", "local", "fake"), default="auto")
    parser.add_argument("--quick", action="store_true", help="500 memories, 50 queries")
    parser.add_argument(
        "--sources", action="store_true", help="every memory with a source turn (2 vectors)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.size, args.queries = 500, 50
    provider = make_provider(args.embeddings)
    corpus = memories(args.size)
    figures: dict[str, Any] = {
        "memories": args.size,
        "model": provider.descriptor.model_key(),
        "sources": args.sources,
    }
    with scratch("bench_hybrid_") as folder:
        with MemoryEngine.open(folder, sync=False) as engine:
            if args.sources:
                observe_sources(engine, corpus)
            fill(engine, corpus)
        with MemoryEngine.open(folder, embeddings=provider, index_in_background=False) as engine:
            started = time.perf_counter()
            written = engine.index_vectors()
            seconds = time.perf_counter() - started
            figures["vectors_written"] = written
            figures["indexing_s"] = seconds
            figures["indexing_vectors_per_s"] = written / seconds if seconds else 0.0
            status = engine.semantic_status(BENCH_NAMESPACE)
            figures["coverage"] = status.coverage
            asked = queries(corpus, args.queries)
            for q in asked[:20]:  # warm: index build, caches, the model's first calls
                engine.recall(BENCH_NAMESPACE, q, args.k)
            total, embed, rest, lexical, states, legacy = [], [], [], [], [], []
            default = engine.fusion
            for q in asked:
                started = time.perf_counter()
                result = engine.recall(BENCH_NAMESPACE, q, args.k)
                ms = (time.perf_counter() - started) * 1000
                semantic = result.semantic
                assert semantic is not None and semantic.query_embedding_ms is not None
                total.append(ms)
                embed.append(semantic.query_embedding_ms)
                rest.append(ms - semantic.query_embedding_ms)
                states.append(semantic.state)
                engine.fusion = LEGACY_FUSION
                started = time.perf_counter()
                old = engine.recall(BENCH_NAMESPACE, q, args.k)
                ms = (time.perf_counter() - started) * 1000
                engine.fusion = default
                assert old.semantic is not None and old.semantic.query_embedding_ms is not None
                legacy.append(ms - old.semantic.query_embedding_ms)
                started = time.perf_counter()
                engine.canonical_candidates(BENCH_NAMESPACE, q, args.k, semantic=False)
                lexical.append((time.perf_counter() - started) * 1000)
            figures.update(stats("hybrid_total", total))
            figures.update(stats("query_embedding", embed))
            figures.update(stats("hybrid_excluding_embedding", rest))
            figures.update(stats("legacy_fusion_excluding_embedding", legacy))
            figures.update(stats("lexical_only", lexical))
            figures["ready_share"] = states.count("ready") / len(states)
            assert engine.semantic is not None
            vectors = engine.semantic._namespace_vectors(BENCH_NAMESPACE)  # takes its locks
            matrix = np.ascontiguousarray(vectors.matrix[: len(vectors)])
            query = matrix[0].copy()
            bare = []
            for _ in range(len(asked)):
                started = time.perf_counter()
                scores = matrix @ query
                np.argpartition(-scores, args.k)
                bare.append((time.perf_counter() - started) * 1000)
            figures.update(stats("bare_matmul", bare))
    p50 = figures["hybrid_excluding_embedding_p50_ms"]
    figures["target_p50_lt_10ms_met"] = p50 < 10.0
    figures["new_over_legacy_p50"] = p50 / figures["legacy_fusion_excluding_embedding_p50_ms"]
    figures["target_within_20pct_of_legacy_met"] = figures["new_over_legacy_p50"] <= 1.2
    figures["hybrid_over_lexical_p50"] = p50 / figures["lexical_only_p50_ms"]
    print_table(
        f"Hybrid recall at {args.size:,} memories (k = {args.k}, {len(asked)} queries"
        f"{', each with a source turn' if args.sources else ''})",
        [
            ("embedding model", figures["model"]),
            (
                "indexing (all memories)",
                f"{written:,} vectors in {figures['indexing_s']:.1f} s "
                f"({figures['indexing_vectors_per_s']:,.0f}/s)",
            ),
            (
                "coverage / queries answered ready",
                f"{status.coverage:.2f} / {figures['ready_share']:.2f}",
            ),
            ("columns", "p50 / p99 ms"),
            ("hybrid recall, whole call", f"{median(total):.2f} / {percentile(total, 99):.2f}"),
            ("  of which query embedding", f"{median(embed):.2f} / {percentile(embed, 99):.2f}"),
            ("  excluding the query embedding", f"{p50:.2f} / {percentile(rest, 99):.2f}"),
            (
                "baseline: previous default fusion (excl. embedding)",
                f"{median(legacy):.2f} / {percentile(legacy, 99):.2f}",
            ),
            ("baseline: lexical only", f"{median(lexical):.2f} / {percentile(lexical, 99):.2f}"),
            ("baseline: bare matmul + top-k", f"{median(bare):.2f} / {percentile(bare, 99):.2f}"),
            (
                "hybrid (excl. embedding) / lexical, p50",
                f"{figures['hybrid_over_lexical_p50']:.2f}",
            ),
            ("target: p50 < 10 ms excluding embedding", "met" if p50 < 10.0 else "MISSED"),
            (
                "new default / previous default, p50 (target <= 1.20)",
                f"{figures['new_over_legacy_p50']:.2f}",
            ),
        ],
    )
    print(f"figures written to {save('hybrid', figures)}")
    return 0
