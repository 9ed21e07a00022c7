"""The retrieval metrics peers publish for LoCoMo-style data, each named by its source.

A ranking here is any list of retrieved units best first (memories, facts, turns), each
unit given by the dia_ids it cites; from it follow a turn ranking (distinct dia_ids in the
order first cited: a turn ranks as its best unit) and a session ranking (distinct sessions
``D<n>`` in the order first cited: a session ranks as its best memory or turn).

- **MemPalace, LoCoMo session recall@10** (``benchmarks/locomo_bench.py`` of its
  repository, the ``--granularity session`` default and ``compute_retrieval_recall``): per
  question the FRACTION of its evidence sessions among the top 10 sessions, an empty
  evidence list counting 1.0, averaged over every question of categories 1-5. MemPalace
  ranks whole session documents (all of a session's turns as one text); its published
  no-LLM hybrid figure is 0.889 on the ten LoCoMo conversations (about 19-32 sessions each,
  so the top 10 is a third to a half of the haystack).
- **LongMemEval recall_any@k / recall_all@k** (``src/retrieval/eval_utils.py``,
  ``evaluate_retrieval``, and ``run_retrieval.py`` of its repository): 1 when any / every
  evidence unit is among the top k, at session level (sessions holding an evidence turn)
  and turn level (turns with ``has_answer``: here the evidence dia_ids); abstention
  questions excluded (here: category 5, adversarial, and questions without evidence).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from statistics import mean

from benchmarks.locomo.data import ALL_CATEGORIES, CATEGORIES, Conversation, Question

LME_KS = (1, 5, 10)
"""The k of LongMemEval's recall_any / recall_all printed here."""
MEMPALACE_K = 10
PUBLISHED_MEMPALACE_SESSION_R10 = 0.889
"""MemPalace hybrid v5, LoCoMo, no LLM: session-level recall@10 (fraction of evidence
sessions in the top 10 sessions, categories 1-5, ten conversations)."""


@dataclass
class Ranked:
    """One question and its retrieved units, best first (each unit: the dia_ids it cites)."""

    question: Question
    units: Sequence[tuple[str, ...]]


def session_of(dia_id: str) -> str:
    """``D3:5`` -> ``D3``."""
    return dia_id.split(":", 1)[0]


def turn_ranking(units: Sequence[Sequence[str]]) -> list[str]:
    """Distinct dia_ids in the order the ranking first cites them."""
    return list(dict.fromkeys(d for unit in units for d in unit))


def session_ranking(units: Sequence[Sequence[str]]) -> list[str]:
    """Distinct sessions in the order the ranking first cites them."""
    return list(dict.fromkeys(session_of(d) for unit in units for d in unit))


def mempalace_session_recall(rankings: Sequence[Ranked], k: int = MEMPALACE_K) -> float:
    """MemPalace's LoCoMo figure: mean fraction of evidence sessions in the top ``k``
    sessions, empty evidence 1.0, over the rankings of categories 1-5."""
    values = []
    for r in rankings:
        if r.question.category not in ALL_CATEGORIES:
            continue
        wanted = {session_of(d) for d in r.question.evidence}
        if not wanted:
            values.append(1.0)
            continue
        top = set(session_ranking(r.units)[:k])
        values.append(len(wanted & top) / len(wanted))
    return mean(values) if values else 0.0


def longmemeval(rankings: Sequence[Ranked]) -> dict[str, float]:
    """LongMemEval's ``recall_any@k`` / ``recall_all@k`` (k in :data:`LME_KS`) at session
    and turn level, over questions of categories 1-4 with evidence."""
    chosen = [r for r in rankings if r.question.category in CATEGORIES and r.question.evidence]
    out: dict[str, float] = {"questions": len(chosen)}
    for level in ("session", "turn"):
        for k in LME_KS:
            hits_any = hits_all = 0
            for r in chosen:
                if level == "session":
                    wanted = {session_of(d) for d in r.question.evidence}
                    top = set(session_ranking(r.units)[:k])
                else:
                    wanted = set(r.question.evidence)
                    top = set(turn_ranking(r.units)[:k])
                hits_any += bool(wanted & top)
                hits_all += wanted <= top
            n = len(chosen) or 1
            out[f"{level}_recall_any@{k}"] = hits_any / n
            out[f"{level}_recall_all@{k}"] = hits_all / n
    return out


def peer_metrics(rankings: Sequence[Ranked]) -> dict[str, float]:
    """MemPalace's session recall@10 and LongMemEval's recall_any / recall_all."""
    return {
        "mempalace_session_recall@10": mempalace_session_recall(rankings),
        "mempalace_questions": sum(1 for r in rankings if r.question.category in ALL_CATEGORIES),
        **longmemeval(rankings),
    }


def haystack(conversations: Sequence[Conversation]) -> dict[str, float]:
    """Sessions and turns per conversation (min, mean, max): what fraction k covers."""
    sessions = [len({t.session for t in c.turns}) for c in conversations] or [0]
    turns = [len(c.turns) for c in conversations] or [0]
    return {
        "sessions_min": min(sessions),
        "sessions_mean": mean(sessions),
        "sessions_max": max(sessions),
        "turns_min": min(turns),
        "turns_mean": mean(turns),
        "turns_max": max(turns),
    }


def fmt_peer(figures: dict[str, float], hay: dict[str, float] | None = None) -> str:
    """``MemPalace s@10 | LME session any/all @1/5/10 | turn any/all @1/5/10``, with the
    haystack (sessions and turns per conversation) beside k when given."""
    parts = [f"MemPalace session R@10 {figures['mempalace_session_recall@10']:.3f}"]
    for level in ("session", "turn"):
        cells = " ".join(
            f"@{k} {figures[f'{level}_recall_any@{k}']:.3f}"
            f"/{figures[f'{level}_recall_all@{k}']:.3f}"
            for k in LME_KS
        )
        parts.append(f"LME {level} any/all {cells}")
    text = " | ".join(parts)
    if hay:
        text += (
            f" [k of {hay['sessions_min']:.0f}-{hay['sessions_max']:.0f} sessions,"
            f" {hay['turns_min']:.0f}-{hay['turns_max']:.0f} turns per conversation]"
        )
    return text


def fmt_haystack(hay: dict[str, float]) -> str:
    """The sessions and turns a conversation holds, printed beside every k."""
    return (
        f"sessions per conversation {hay['sessions_min']:.0f}-{hay['sessions_max']:.0f}"
        f" (mean {hay['sessions_mean']:.1f}): k = 1 / 5 / 10 sessions cover"
        f" {1 / hay['sessions_mean']:.0%} / {5 / hay['sessions_mean']:.0%} /"
        f" {10 / hay['sessions_mean']:.0%}; turns {hay['turns_min']:.0f}-{hay['turns_max']:.0f}"
    )
