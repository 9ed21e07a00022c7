"""Turn-level evidence recall on LoCoMo: rank the observed transcripts, count the
question's evidence dialogue ids found in the top k.

The definition matched is MemPalace's no-LLM LoCoMo retrieval recall
(``benchmarks/locomo_bench.py``, ``compute_retrieval_recall`` with ``--granularity
dialog``): one document per dialogue turn, a question's recall@k is the FRACTION of its
evidence dia_ids among the top k retrieved turns (1.0 for a question without evidence),
averaged over every question of every category (1-5, adversarial included). Beside it, the
stricter and looser forms of agentmemory's evaluation notes ("strict recall-all@k": every
evidence id in the top k; "any-hit": at least one), and the same fractional recall at
session granularity (MemPalace's default; its published hybrid R@10 0.889 is that figure,
on ten conversations): the first k distinct sessions of the turn ranking against the
question's evidence sessions.

Turns are ranked by the engine's machinery: BM25 of ``commands.recall.lexical`` over each
transcript, exact cosine of the provider's vectors of the transcripts (the same text a
memory's ``source`` vector embeds, so the cache of a run answers most of them), fused by
the given :class:`HybridFusion`. With ``window`` (the engine's recall as it now is), each
turn's BM25 document also holds the words of the two turns before and after it in its
session (``commands.recall.lexical.analyze_document``'s window) and, when the question names a
date, turns of sessions held near it gain the fusion's ``temporal_boost``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from benchmarks.locomo.data import Conversation, Question, Turn
from memory_ledger.commands.embeddings.base import EmbeddingProvider, embed_checked
from memory_ledger.commands.recall.fusion import HybridFusion
from memory_ledger.commands.recall.lexical import (
    CONTEXT_CHARS,
    WINDOW_TURNS,
    analyze_document,
    analyze_query,
)
from memory_ledger.commands.recall.temporal import occurred_in, query_dates
from memory_ledger.projections.text_index import BM25Index, IndexedDoc

TURN_KS = (5, 10)


@dataclass
class TurnRanking:
    """One question's turns, best first, and each turn's session."""

    question: Question
    ranked: list[str]
    """dia_ids, best first (at least 200, or every turn)."""
    sessions: dict[str, int]


def _session_of(dia_id: str) -> str:
    return dia_id.split(":", 1)[0]


def _window(turns: Sequence[Turn], i: int) -> str:
    """The transcripts of the turns around turn ``i`` in its session (the engine's span)."""
    return "\n".join(
        turns[j].transcript[:CONTEXT_CHARS]
        for j in range(max(0, i - WINDOW_TURNS), min(len(turns), i + WINDOW_TURNS + 1))
        if j != i and turns[j].session == turns[i].session
    )


def rank_turns(
    conversations: Sequence[Conversation],
    provider: EmbeddingProvider | None,
    fusion: HybridFusion | None,
    mode: str,
    window: bool = False,
) -> list[TurnRanking]:
    """Rank each conversation's turns for each of its questions (every category):
    ``mode`` ``lexical``, ``semantic`` or ``fused`` (by ``fusion``); ``window``: with the
    conversation window and the temporal boost (see the module docstring)."""
    out = []
    for conversation in conversations:
        turns = conversation.turns
        index = BM25Index.build(
            IndexedDoc(
                doc_id=t.dia_id,
                position=i,
                text=analyze_document(
                    None, t.transcript, None, _window(turns, i) if window else None
                ),
            )
            for i, t in enumerate(turns)
        )
        when = [
            datetime.fromisoformat(str(step["occurred_at"]))
            for step in conversation.steps
            if step["op"] == "turn"
        ]
        order = {t.dia_id: i for i, t in enumerate(turns)}
        matrix = None
        if provider is not None and mode != "lexical":
            texts = [t.transcript[:CONTEXT_CHARS] for t in turns]
            matrix = embed_checked(provider, provider.descriptor, texts)
        questions = conversation.all_questions
        queries = None
        if provider is not None and matrix is not None and questions:
            texts = [q.text for q in questions]
            queries = embed_checked(provider, provider.descriptor, texts, query=True)
        depth = max(200, len(turns)) if mode == "lexical" else len(turns)
        for row, q in enumerate(questions):
            lexical = [(s.doc_id, s.score) for s in index.search(analyze_query(q.text), depth)]
            if mode == "lexical" or matrix is None or queries is None:
                ranked = [d for d, _ in lexical]
            else:
                cos = matrix @ queries[row]
                scores = {t.dia_id: float(c) for t, c in zip(turns, cos.tolist(), strict=True)}
                semantic = sorted(scores, key=lambda d: (-scores[d], order[d]))
                if mode == "semantic" or fusion is None:
                    ranked = semantic
                else:
                    fused = fusion.fuse_scores(lexical, semantic, scores, order.__getitem__)
                    dates = query_dates(q.text) if window else ()
                    if dates:
                        dated = {
                            t.dia_id
                            for t, at in zip(turns, when, strict=True)
                            if occurred_in(at, dates)
                        }
                        fused = fusion.boost_dated(fused, dated.__contains__, order.__getitem__)
                    ranked = [d for d, _ in fused]
            out.append(TurnRanking(q, ranked, {t.dia_id: t.session for t in turns}))
    return out


def turn_metrics(rankings: Sequence[TurnRanking], categories: Sequence[int]) -> dict[str, float]:
    """Fractional recall@k (MemPalace), all-hit@k and any-hit@k (agentmemory), turn and
    session granularity, over questions of ``categories``."""
    chosen = [r for r in rankings if r.question.category in categories]
    n = len(chosen) or 1
    out: dict[str, float] = {"questions": len(chosen)}
    for k in TURN_KS:
        frac = hit_all = hit_any = session_frac = 0.0
        for r in chosen:
            wanted = r.question.evidence
            top = set(r.ranked[:k])
            found = len(wanted & top)
            frac += found / len(wanted) if wanted else 1.0
            hit_all += 1.0 if wanted and found == len(wanted) else (0.0 if wanted else 1.0)
            hit_any += 1.0 if found or not wanted else 0.0
            sessions = list(dict.fromkeys(_session_of(d) for d in r.ranked))[:k]
            wanted_sessions = {_session_of(d) for d in wanted}
            found_sessions = len(wanted_sessions & set(sessions))
            session_frac += found_sessions / len(wanted_sessions) if wanted_sessions else 1.0
        out[f"recall@{k}"] = frac / n
        out[f"all@{k}"] = hit_all / n
        out[f"any@{k}"] = hit_any / n
        out[f"session_recall@{k}"] = session_frac / n
    return out
