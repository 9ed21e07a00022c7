"""The direct path's figures and the peer-defined metrics of every path, for one provider
(``python -m benchmarks locomo``; see :mod:`benchmarks.locomo.direct` and
:mod:`benchmarks.locomo.peers`).

Direct path, per variant (``plain``: ``remember(ns, fact)``; ``dated``: with the fact's
date as ``occurred_at``): each channel alone, the shipped default fusion
(``ours_default_direct``, plain variant; ``ours_default_direct_dated``), each model-free
signal of ``commands.recall.signals`` alone on top of the default fusion without it, and
the weights chosen by leave-one-conversation-out over :data:`DIRECT_GRID` (``direct_alpha``
with the name boost and the neighbour share); beside them, in the same run, plain cosine
and LangGraph's ``InMemoryStore`` with the same embedding function.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from msgspec.structs import replace

from benchmarks.locomo.channels import (
    Channels,
    Scores,
    fused,
    leave_one_out,
    lexical_way,
    score,
    semantic_way,
)
from benchmarks.locomo.data import CATEGORIES, CATEGORY_NAMES, Conversation
from benchmarks.locomo.direct import DEPTH, VARIANTS, hits, langgraph_store, plain_cosine
from benchmarks.locomo.peers import Ranked, fmt_peer, haystack, peer_metrics
from memory_ledger.commands.embeddings.base import EmbeddingProvider
from memory_ledger.commands.recall.fusion import HybridFusion

ALPHAS = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
NAME_BOOSTS = (0.0, 0.1, 0.2)
NEIGHBOUR_SHARES = (0.0, 0.1, 0.2, 0.3)


def direct_grid(shipped: HybridFusion) -> list[HybridFusion]:
    """The weights searched for memories without a source turn, around ``shipped``."""
    return [
        replace(shipped, direct_alpha=a, name_boost=n, neighbour_share=s)
        for a in ALPHAS
        for n in NAME_BOOSTS
        for s in NEIGHBOUR_SHARES
    ]


def fmt(figures: dict[str, float]) -> str:
    """``R@1 / R@5 / R@10 / MRR``."""
    return (
        f"{figures['recall@1']:.3f} / {figures['recall@5']:.3f} / {figures['recall@10']:.3f}"
        f" / {figures['mrr']:.3f}"
    )


def rankings(channels: Sequence[Channels], way: Callable[[Channels], list[str]]) -> list[Ranked]:
    """Each question's ranked memories as the dia_ids they cite (for the peer metrics)."""
    return [Ranked(ch.question, [ch.evidence[d] for d in way(ch)]) for ch in channels]


def _prefer(fusion: HybridFusion) -> float:
    """Among equal weights: fewer signals, then alpha nearest an even split."""
    alpha = fusion.direct_alpha if fusion.direct_alpha is not None else fusion.alpha
    return -fusion.name_boost - fusion.neighbour_share - abs(alpha - 0.5) / 10


def _category_rows(label: str, named: dict[str, Scores], rows: list[tuple[str, str]]) -> None:
    for category in CATEGORIES:
        count = int(next(iter(named.values())).figures(category)["questions"])
        cells = " | ".join(f"{n} {fmt(s.figures(category))}" for n, s in named.items())
        rows.append((f"{label}: cat. {category} {CATEGORY_NAMES[category]} (n={count})", cells))


def direct_section(
    by_variant: dict[str, dict[str, list[Channels]]],
    conversations: Sequence[Conversation],
    provider: EmbeddingProvider | None,
    shipped: HybridFusion | None,
    label: str,
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """The direct path's figures and rows of one provider (None: lexical only)."""
    figures: dict[str, Any] = {}
    rows: list[tuple[str, str]] = []
    hay = haystack(conversations)
    peers: dict[str, list[Ranked]] = {}
    if provider is not None:
        peers["plain_cosine"] = plain_cosine(conversations, provider)
        graph = langgraph_store(conversations, provider)
        if graph is not None:
            peers["langgraph_inmemorystore"] = graph
    for name, ranked in peers.items():
        figures[name] = hits(ranked).per_category()
        figures[f"{name}_peer_metrics"] = peer_metrics(ranked)
        rows.append((f"{label}: peer: {name} (R@1 / R@5 / R@10 / MRR)", fmt(figures[name]["all"])))
    for variant in VARIANTS:
        by_conversation = {
            sample: [ch for ch in channels if ch.question.category in CATEGORIES]
            for sample, channels in by_variant[variant].items()
        }
        every = [ch for channels in by_conversation.values() for ch in channels]
        ways: dict[str, Callable[[Channels], list[str]]] = {
            "lexical": lexical_way(),
        }
        if shipped is not None:
            bare = replace(shipped, direct_alpha=None, name_boost=0.0, neighbour_share=0.0)
            ways |= {
                "semantic": semantic_way(("statement",)),
                "fused_before": fused(bare),
                "fused_alpha_only": fused(replace(bare, direct_alpha=shipped.direct_alpha)),
                "fused_names_only": fused(replace(bare, name_boost=shipped.name_boost)),
                "fused_neighbours_only": fused(
                    replace(bare, neighbour_share=shipped.neighbour_share)
                ),
                "fused_phrases_only": fused(replace(bare, phrase_boost=0.2)),
                "default": fused(shipped),
            }
        tag = f"{label}: direct {variant}"
        scores = {way: score(every, fn) for way, fn in ways.items()}
        part: dict[str, Any] = {f"ours_{w}": s.per_category() for w, s in scores.items()}
        for way, s in scores.items():
            rows.append((f"{tag}: {way}", fmt(s.figures())))
        if shipped is not None:
            loco = leave_one_out(by_conversation, direct_grid(shipped), _prefer)
            scores["loco"] = loco.held_out
            part["ours_loco"] = loco.held_out.per_category()
            part["loco_chosen"] = {
                s: {
                    "direct_alpha": f.direct_alpha,
                    "name_boost": f.name_boost,
                    "neighbour_share": f.neighbour_share,
                }
                for s, f in loco.chosen.items()
            }
            chosen = ", ".join(
                f"{s} {f.direct_alpha:.2f}/{f.name_boost:.1f}/{f.neighbour_share:.1f}"
                for s, f in loco.chosen.items()
            )
            rows.append(
                (
                    f"{tag}: LOCO held-out (alpha/name/neighbour per fold)",
                    fmt(loco.held_out.figures()),
                )
            )
            rows.append((f"{tag}: LOCO choices", chosen))
            deep = rankings(
                [ch for channels in by_variant[variant].values() for ch in channels],
                fused(shipped, depth=DEPTH),
            )
            part["peer_metrics"] = peer_metrics(deep)
            rows.append((f"{tag}: default, peer metrics", fmt_peer(part["peer_metrics"], hay)))
        named = {"default": scores.get("default", scores["lexical"])}
        if "plain_cosine" in figures:
            cos = hits(peers["plain_cosine"])
            named["cosine"] = cos
            worst = min(
                scores["default"].figures(c)["recall@5"] - cos.figures(c)["recall@5"]
                for c in CATEGORIES
            )
            r5 = scores["default"].figures()["recall@5"]
            part["target_r5_ge_070_met"] = r5 >= 0.70
            part["worst_category_vs_cosine_r5"] = worst
            rows.append(
                (
                    f"{tag}: target R@5 >= 0.70 / no category below plain cosine",
                    f"{'met' if r5 >= 0.70 else 'MISSED'} ({r5:.3f}) / "
                    f"{'met' if worst >= 0 else 'MISSED'} (worst {worst:+.3f})",
                )
            )
        _category_rows(tag, named, rows)
        figures[variant] = part
    for name in peers:
        rows.append(
            (f"{label}: peer metrics: {name}", fmt_peer(figures[f"{name}_peer_metrics"], hay))
        )
    return figures, rows
