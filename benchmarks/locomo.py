"""Retrieval quality on LoCoMo: Recall@1/5/10 and MRR of lexical recall vs a plain BM25.

Reads ``../shared/data/locomo/locomo7.json`` (or ``$LOCOMO_PATH``). Every conversation is
converted with ``replay.locomo.convert_sample`` and replayed with ``replay.script.run_script``
into ONE store (sync off), each in its own namespace (tenant ``locomo``, principal the
sample id, scope ``conversation``): its observation facts become canonical memories. Every
QA question of categories 1-4 (category 5 is adversarial: unanswerable by design) is asked
with ``engine.recall(namespace, question, 10)``. A question is a hit at k when one of the
top k memories' evidence cites a dia_id of the question's evidence (split on ``,``, ``;``
and spaces); MRR counts the first hit within the top 10.

Baseline in the same run: ``bm25s`` (its defaults: lowercase, English stop words, Lucene
BM25 with k1 = 1.5, b = 0.75) over the same facts' statements, one index per conversation.
The ceiling is the share of questions whose evidence any fact of the conversation cites.
Target (issue 7, item 6): our Recall@5 >= the bm25s baseline (about 0.52).
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
from commands import MemoryEngine, Namespace
from replay.locomo import convert_sample, load_samples, split_dia_ids
from replay.script import parse_script, run_script

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


def run_engine(conversations: list[Conversation]) -> tuple[Scores, dict[str, float]]:
    scores = Scores()
    timing: dict[str, float] = {"replay_s": 0.0, "recall_s": 0.0, "active_memories": 0}
    with scratch("bench_locomo_") as folder, MemoryEngine.open(folder, sync=False) as engine:
        for conversation in conversations:
            lines = [msgspec.json.encode(step) for step in conversation.steps]
            started = time.perf_counter()
            run_script(engine, parse_script(lines))
            timing["replay_s"] += time.perf_counter() - started
        engine.catch_up()
        timing["active_memories"] = engine.canonical.count_active()
        started = time.perf_counter()
        for conversation in conversations:
            ns = Namespace("locomo", conversation.sample_id, "conversation")
            for q in conversation.questions:
                hits = engine.recall(ns, q.text, max(KS)).results
                scores.add(q.category, first_hit([h.evidence for h in hits], q.evidence))
        timing["recall_s"] = time.perf_counter() - started
    return scores, timing


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
    args = parser.parse_args(argv)
    if args.quick:
        args.samples, args.max_questions = args.samples or "conv-26", 40
    wanted = [s.strip() for s in args.samples.split(",") if s.strip()]
    conversations = load(default_data(), wanted, args.max_questions)
    ours, timing = run_engine(conversations)
    baseline = run_bm25s(conversations)
    top = ceiling(conversations)
    questions = sum(len(c.questions) for c in conversations)
    facts = sum(len(c.facts) for c in conversations)
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
        ("columns", "R@1 / R@5 / R@10 / MRR"),
        ("ours (engine.recall, lexical)", fmt(ours.figures())),
        ("baseline bm25s", fmt(baseline.figures()) if baseline else "skipped: no bm25s"),
        ("ceiling (evidence cited by a fact)", fmt(top.figures())),
    ]
    for category in CATEGORIES:
        count = int(ours.figures(category)["questions"])
        label = f"cat. {category} {CATEGORY_NAMES[category]} (n={count})"
        rows.append((f"{label}: ours", fmt(ours.figures(category))))
        if baseline:
            rows.append((f"{label}: bm25s", fmt(baseline.figures(category))))
        rows.append((f"{label}: ceiling", fmt(top.figures(category))))
    figures: dict[str, Any] = {
        "conversations": [c.sample_id for c in conversations],
        "facts": facts,
        "questions": questions,
        **timing,
        "ours": {"all": ours.figures(), **{str(c): ours.figures(c) for c in CATEGORIES}},
        "ceiling": {"all": top.figures(), **{str(c): top.figures(c) for c in CATEGORIES}},
    }
    if baseline:
        figures["bm25s"] = {
            "all": baseline.figures(),
            **{str(c): baseline.figures(c) for c in CATEGORIES},
        }
        met = ours.figures()["recall@5"] >= baseline.figures()["recall@5"]
        figures["target_recall5_ge_bm25s_met"] = met
        rows.append(("target: ours R@5 >= bm25s R@5", "met" if met else "MISSED"))
    print_table("LoCoMo retrieval quality (hit: a result cites a question's evidence)", rows)
    print(f"figures written to {save('locomo', figures)}")
    return 0
