"""Retrieval quality on LoCoMo: Recall@1/5/10 and MRR of lexical, semantic and fused recall
side by side with plain baselines.

Reads ``../shared/data/locomo/locomo7.json`` (or ``$LOCOMO_PATH``). Every conversation is
converted with ``replay.locomo.convert_sample`` and replayed with ``replay.script.run_script``
into ONE store (sync off), each in its own namespace (tenant ``locomo``, principal the
sample id, scope ``conversation``): its observation facts become canonical memories. Every
QA question of categories 1-4 (category 5 is adversarial: unanswerable by design) is asked
with ``engine.recall(namespace, question, 10)``. A question is a hit at k when one of the
top k memories' evidence cites a dia_id of the question's evidence (split on ``,``, ``;``
and spaces); MRR counts the first hit within the top 10.

With ``--embeddings local`` (the default when the ``embeddings`` extra is installed) the
engine is opened with the bundled MiniLM provider (``memory_ledger.commands.local_embeddings``), the
vectors are awaited (``engine.wait_for_vectors``), and every question is answered four
ways from the same store: lexical only (``canonical_candidates(semantic=False)``), semantic
only (the channel's verified exact cosine ranking), fused by the default
(``DEFAULT_FUSION``: score fusion, alpha 0.7) and by plain RRF (k = 60). The query vector
is computed once per question (a caching wrapper around the provider).

Baselines in the same run: ``bm25s`` (its defaults: lowercase, English stop words, Lucene
BM25 with k1 = 1.5, b = 0.75) over the same facts' statements, one index per conversation,
and plain MiniLM cosine over the same facts' statements (numpy, no engine). The ceiling is
the share of questions whose evidence any fact of the conversation cites.
Targets: our lexical Recall@5 >= bm25s (issue 7); fused Recall@5 >= 0.68 and above both
channels alone (issue 8).
"""

from __future__ import annotations

import argparse
import importlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import msgspec

from benchmarks.corpus import scratch
from benchmarks.locomo_run import default_data
from benchmarks.results import print_table, save
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.embeddings import EmbeddingDescriptor, EmbeddingProvider
from memory_ledger.commands.recall import DEFAULT_FUSION, PLAIN_RRF, HybridFusion
from memory_ledger.replay.locomo import convert_sample, load_samples, split_dia_ids
from memory_ledger.replay.script import parse_script, run_script

KS = (1, 5, 10)
CATEGORIES = (1, 2, 3, 4)
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}


@dataclass
class Question:
    sample_id: str
    text: str
    category: int
    evidence: frozenset[str]


@dataclass
class Conversation:
    sample_id: str
    steps: list[dict[str, Any]]
    facts: list[tuple[str, tuple[str, ...]]]
    questions: list[Question] = field(default_factory=list)


def load(path: Any, samples: Sequence[str], max_questions: int) -> list[Conversation]:
    out = []
    for sample in load_samples(path):
        if samples and sample["sample_id"] not in samples:
            continue
        converted = convert_sample(sample)
        facts = [
            (str(item["statement"]), tuple(item["evidence"]))
            for step in converted.steps
            if step["op"] == "turn"
            for item in step["extracted"]
        ]
        conversation = Conversation(converted.sample_id, converted.steps, facts)
        for qa in sample.get("qa", []):
            category = qa.get("category")
            evidence = frozenset(split_dia_ids(qa.get("evidence") or []))
            if category in CATEGORIES:
                conversation.questions.append(
                    Question(converted.sample_id, str(qa["question"]), int(category), evidence)
                )
        if max_questions:
            conversation.questions = conversation.questions[:max_questions]
        out.append(conversation)
    return out


def first_hit(ranked: Sequence[Sequence[str]], wanted: frozenset[str]) -> int | None:
    """1-based rank of the first result citing a wanted dia_id, or None."""
    for rank, evidence in enumerate(ranked, start=1):
        if wanted.intersection(evidence):
            return rank
    return None


class Scores:
    """Recall@k and MRR, overall and per category."""

    def __init__(self) -> None:
        self.ranks: list[tuple[int, int | None]] = []

    def add(self, category: int, rank: int | None) -> None:
        self.ranks.append((category, rank))

    def figures(self, category: int | None = None) -> dict[str, float]:
        ranks = [r for c, r in self.ranks if category is None or c == category]
        n = len(ranks) or 1
        out = {f"recall@{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in KS}
        out["mrr"] = sum(1 / r for r in ranks if r is not None) / n
        out["questions"] = len(ranks)
        return out


class CachingProvider:
    """Wraps a provider so that a text embedded once is not embedded again (the benchmark
    asks each question several ways)."""

    def __init__(self, inner: EmbeddingProvider) -> None:
        self.inner = inner
        self.cache: dict[str, Any] = {}
        self.calls = 0
        self.seconds = 0.0

    @property
    def descriptor(self) -> EmbeddingDescriptor:
        return self.inner.descriptor

    def embed(self, texts: Sequence[str]) -> Any:
        import numpy as np

        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            started = time.perf_counter()
            vectors = np.asarray(self.inner.embed(missing))
            self.seconds += time.perf_counter() - started
            self.calls += 1
            self.cache.update(zip(missing, vectors, strict=True))
        return np.stack([self.cache[t] for t in texts])


def run_engine(
    conversations: list[Conversation], provider: EmbeddingProvider | None
) -> tuple[dict[str, Scores], dict[str, float]]:
    """Replay every conversation into one store; answer each question every way the
    engine can (lexical; with a provider also semantic, fused default, plain RRF)."""
    ways = ["lexical"] + (["semantic", "fused", "rrf"] if provider else [])
    scores = {way: Scores() for way in ways}
    timing: dict[str, float] = {"replay_s": 0.0, "recall_s": 0.0, "active_memories": 0}
    with (
        scratch("bench_locomo_") as folder,
        MemoryEngine.open(folder, sync=False, embeddings=provider) as engine,
    ):
        for conversation in conversations:
            lines = [msgspec.json.encode(step) for step in conversation.steps]
            started = time.perf_counter()
            run_script(engine, parse_script(lines))
            timing["replay_s"] += time.perf_counter() - started
        timing["active_memories"] = engine.count_active_memories()
        if provider is not None:
            started = time.perf_counter()
            ready = engine.wait_for_vectors(1800)
            timing["vectors_wait_s"] = time.perf_counter() - started
            if not ready:
                raise SystemExit("vectors not ready after 30 minutes")
        started = time.perf_counter()
        for conversation in conversations:
            ns = Namespace("locomo", conversation.sample_id, "conversation")
            for q in conversation.questions:
                for way in ways:
                    ranked = answer(engine, ns, q.text, way)
                    scores[way].add(q.category, first_hit(ranked, q.evidence))
        timing["recall_s"] = time.perf_counter() - started
    return scores, timing


def answer(engine: MemoryEngine, ns: Namespace, query: str, way: str) -> list[tuple[str, ...]]:
    """The evidence lists of the top 10 memories for ``query`` answered ``way``."""
    depth = max(KS)
    if way == "lexical":
        ranked, _, _ = engine.canonical_candidates(ns, query, depth, semantic=False)
        return [doc.evidence for doc, _ in ranked]
    if way == "semantic":
        assert engine.semantic is not None
        vector, _ = engine.semantic.embed_query(query)
        if vector is None:
            return []
        by_id = {doc.memory_id: doc for doc in engine.retrievable_memories(ns)}
        with engine.read_models(catch_up=False):  # the channel reads the projection file
            found = engine.semantic.search(ns, vector, by_id, depth)
        return [by_id[memory_id].evidence for memory_id, _ in found]
    fusion: HybridFusion = DEFAULT_FUSION if way == "fused" else PLAIN_RRF
    saved, engine.fusion = engine.fusion, fusion
    try:
        ranked, _, _ = engine.canonical_candidates(ns, query, depth)
    finally:
        engine.fusion = saved
    return [doc.evidence for doc, _ in ranked]


def run_plain_cosine(conversations: list[Conversation], provider: EmbeddingProvider) -> Scores:
    """Plain MiniLM cosine over each conversation's fact statements (numpy, no engine)."""
    import numpy as np

    scores = Scores()
    for conversation in conversations:
        if not conversation.questions:
            continue
        facts = np.asarray(provider.embed([statement for statement, _ in conversation.facts]))
        asked = np.asarray(provider.embed([q.text for q in conversation.questions]))
        similarity = asked @ facts.T
        for row, q in enumerate(conversation.questions):
            order = sorted(range(len(conversation.facts)), key=lambda i: (-similarity[row, i], i))
            ranked = [conversation.facts[i][1] for i in order[: max(KS)]]
            scores.add(q.category, first_hit(ranked, q.evidence))
    return scores


def local_provider(choice: str) -> EmbeddingProvider | None:
    """The bundled MiniLM provider for ``--embeddings local`` (None for ``none``, or when
    ``auto`` and the extra is not installed)."""
    if choice == "none":
        return None
    try:
        from memory_ledger.commands.local_embeddings import SentenceTransformerProvider

        return SentenceTransformerProvider()
    except ImportError:
        if choice == "local":
            raise
        return None


def run_bm25s(conversations: list[Conversation]) -> Scores | None:
    try:
        bm25s = importlib.import_module("bm25s")  # optional: the ``bench`` extra
    except ImportError:
        return None
    scores = Scores()
    for conversation in conversations:
        if not conversation.questions:
            continue
        texts = [statement for statement, _ in conversation.facts]
        retriever = bm25s.BM25()
        retriever.index(bm25s.tokenize(texts, show_progress=False), show_progress=False)
        k = min(max(KS), len(texts))
        query_tokens = bm25s.tokenize([q.text for q in conversation.questions], show_progress=False)
        docs, doc_scores = retriever.retrieve(query_tokens, k=k, show_progress=False)
        for row, q in enumerate(conversation.questions):
            ranked = [
                conversation.facts[int(docs[row, col])][1]
                for col in range(k)
                if float(doc_scores[row, col]) > 0.0
            ]
            scores.add(q.category, first_hit(ranked, q.evidence))
    return scores


def ceiling(conversations: list[Conversation]) -> Scores:
    """A perfect retriever over the same facts: rank 1 when any fact cites the evidence."""
    scores = Scores()
    for conversation in conversations:
        cited = {dia_id for _, evidence in conversation.facts for dia_id in evidence}
        for q in conversation.questions:
            scores.add(q.category, 1 if q.evidence & cited else None)
    return scores


def fmt(figures: dict[str, float]) -> str:
    return (
        f"{figures['recall@1']:.3f} / {figures['recall@5']:.3f} / {figures['recall@10']:.3f}"
        f" / {figures['mrr']:.3f}"
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks locomo", description=__doc__)
    parser.add_argument("--samples", default="", help="comma-separated sample ids (all)")
    parser.add_argument("--max-questions", type=int, default=0, help="per conversation (all)")
    parser.add_argument("--quick", action="store_true", help="conv-26, 40 questions")
    parser.add_argument(
        "--embeddings",
        choices=("auto", "local", "none"),
        default="auto",
        help="semantic channel: the bundled MiniLM (local), none, or local when installed",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.samples, args.max_questions = args.samples or "conv-26", 40
    wanted = [s.strip() for s in args.samples.split(",") if s.strip()]
    conversations = load(default_data(), wanted, args.max_questions)
    inner = local_provider(args.embeddings)
    provider = CachingProvider(inner) if inner is not None else None
    ours, timing = run_engine(conversations, provider)
    baseline = run_bm25s(conversations)
    cosine = run_plain_cosine(conversations, provider) if provider is not None else None
    top = ceiling(conversations)
    questions = sum(len(c.questions) for c in conversations)
    facts = sum(len(c.facts) for c in conversations)
    labels = {
        "lexical": "ours lexical (stemmed BM25 + source turn)",
        "semantic": "ours semantic (MiniLM exact cosine)",
        "fused": "ours fused, default (score fusion, alpha 0.7)",
        "rrf": "ours fused, plain RRF k = 60",
    }
    rows: list[tuple[str, str]] = [
        (
            "conversations / facts / questions (cat. 1-4)",
            f"{len(conversations)} / {facts:,} / {questions:,}",
        ),
        ("active memories after replay", f"{timing['active_memories']:,}"),
        (
            "replay (sync off) / all recalls",
            f"{timing['replay_s']:.1f} s / {timing['recall_s']:.2f} s",
        ),
        ("embedding model", inner.descriptor.model_key() if inner else "none (lexical only)"),
        ("columns", "R@1 / R@5 / R@10 / MRR"),
    ]
    rows += [(labels[way], fmt(score.figures())) for way, score in ours.items()]
    rows.append(("baseline bm25s", fmt(baseline.figures()) if baseline else "skipped: no bm25s"))
    if cosine is not None:
        rows.append(("baseline plain MiniLM cosine", fmt(cosine.figures())))
    rows.append(("ceiling (evidence cited by a fact)", fmt(top.figures())))
    for category in CATEGORIES:
        count = int(ours["lexical"].figures(category)["questions"])
        label = f"cat. {category} {CATEGORY_NAMES[category]} (n={count})"
        for way, score in ours.items():
            rows.append((f"{label}: {way}", fmt(score.figures(category))))
        if baseline:
            rows.append((f"{label}: bm25s", fmt(baseline.figures(category))))
        if cosine is not None:
            rows.append((f"{label}: plain cosine", fmt(cosine.figures(category))))
        rows.append((f"{label}: ceiling", fmt(top.figures(category))))

    def per_category(score: Scores) -> dict[str, Any]:
        return {"all": score.figures(), **{str(c): score.figures(c) for c in CATEGORIES}}

    figures: dict[str, Any] = {
        "conversations": [c.sample_id for c in conversations],
        "facts": facts,
        "questions": questions,
        **timing,
        "model": inner.descriptor.model_key() if inner else None,
        "ours": per_category(ours["lexical"]),
        **{f"ours_{way}": per_category(score) for way, score in ours.items()},
        "ceiling": per_category(top),
    }
    lexical_r5 = ours["lexical"].figures()["recall@5"]
    if baseline:
        figures["bm25s"] = per_category(baseline)
        met = lexical_r5 >= baseline.figures()["recall@5"]
        figures["target_recall5_ge_bm25s_met"] = met
        rows.append(("target: ours lexical R@5 >= bm25s R@5", "met" if met else "MISSED"))
    if cosine is not None:
        figures["plain_cosine"] = per_category(cosine)
    if provider is not None:
        fused_r5 = ours["fused"].figures()["recall@5"]
        semantic_r5 = ours["semantic"].figures()["recall@5"]
        met = fused_r5 >= 0.68 and fused_r5 > max(lexical_r5, semantic_r5)
        figures["target_fused_recall5_ge_068_above_both_met"] = met
        rows.append(("target: fused R@5 >= 0.68, above both channels", "met" if met else "MISSED"))
    print_table("LoCoMo retrieval quality (hit: a result cites a question's evidence)", rows)
    print(f"figures written to {save('locomo', figures)}")
    return 0
