"""Each LoCoMo question's channel scores, read once from the engine, then fused any way.

For every question the engine's own pieces are read once: the lexical ranking (BM25 with
the source-turn and conversation-window expansion, ``commands.recall.lexical``), lexical rankings
without the window (subject, statement and source turn) and without any expansion (subject
and statement: "what each expansion adds"), the memories whose time falls near a date the
question names (``commands.recall.temporal``), and the verified cosines of the semantic channel
per vector field (``statement``, ``source``: top ``depth`` of each plus
the lexical candidates, as ``MemoryEngine.canonical_candidates`` reads them). Any
:class:`HybridFusion` is then applied to these with its own ``fuse_scores``, so a grid of
weights costs no further query embedding or engine call; ``agreement`` checks the
simulation against the engine's real recall for the default fusion.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field

from benchmarks.locomo.data import CATEGORIES, Conversation, Question
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.recall.fusion import HybridFusion
from memory_ledger.commands.recall.index import MemoryDoc, build_index, lexical_search
from memory_ledger.commands.recall.lexical import analyze_document, analyze_query
from memory_ledger.commands.recall.ranking import fuse_channels
from memory_ledger.commands.recall.temporal import occurred_in, query_dates
from memory_ledger.projections.text_index import BM25Index, IndexedDoc

KS = (1, 5, 10)
DEPTH = 100


@dataclass
class Channels:
    """One question's channel scores (memory ids as keys)."""

    question: Question
    lexical: list[tuple[str, float]]
    lexical_plain: list[tuple[str, float]]
    lexical_source: list[tuple[str, float]]
    statement: dict[str, float]
    source: dict[str, float]
    evidence: dict[str, tuple[str, ...]]
    position: dict[str, int]
    dated: frozenset[str] = frozenset()
    """Memories whose time falls near a date the question names (``commands.recall.temporal``)."""
    subjects: dict[str, str] = dataclass_field(default_factory=dict)
    """Each memory's subject (LoCoMo: the speaker the observation is about)."""
    docs: Mapping[str, MemoryDoc] = dataclass_field(default_factory=dict)
    """The namespace's retrievable memories (shared by the conversation's questions)."""


def first_hit(ranked: Sequence[tuple[str, ...]], wanted: frozenset[str]) -> int | None:
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
        """Record one question: its category and the 1-based rank of its first hit."""
        self.ranks.append((category, rank))

    def figures(self, category: int | None = None) -> dict[str, float]:
        """Recall@1/5/10, MRR and the question count (of one category, or all)."""
        ranks = [r for c, r in self.ranks if category is None or c == category]
        n = len(ranks) or 1
        out = {f"recall@{k}": sum(1 for r in ranks if r is not None and r <= k) / n for k in KS}
        out["mrr"] = sum(1 / r for r in ranks if r is not None) / n
        out["questions"] = len(ranks)
        return out

    def per_category(self) -> dict[str, dict[str, float]]:
        """:meth:`figures` overall (``all``) and for each category."""
        return {"all": self.figures(), **{str(c): self.figures(c) for c in CATEGORIES}}


def collect(
    engine: MemoryEngine,
    conversation: Conversation,
    semantic: bool,
    *,
    namespace: Namespace | None = None,
    evidence: Mapping[str, tuple[str, ...]] | None = None,
    questions: Sequence[Question] | None = None,
) -> list[Channels]:
    """Read every question's channels of ``conversation`` from ``engine`` (its namespace
    ``locomo/<sample>/conversation`` unless ``namespace`` is given); ``evidence``: each
    memory's evidence dia_ids when the memories do not carry them (the direct path);
    ``questions``: which (default: categories 1-4)."""
    ns = namespace or Namespace("locomo", conversation.sample_id, "conversation")
    docs = {doc.memory_id: doc for doc in engine.retrievable_memories(ns)}
    index = build_index(docs.values())  # what the engine's recall index holds
    plain = BM25Index.build(
        IndexedDoc(
            doc_id=d.memory_id, position=d.position, text=analyze_document(d.subject, d.statement)
        )
        for d in docs.values()
    )
    no_window = BM25Index.build(
        IndexedDoc(
            doc_id=d.memory_id,
            position=d.position,
            text=analyze_document(d.subject, d.statement, d.context),
        )
        for d in docs.values()
    )
    cited = {memory_id: d.evidence for memory_id, d in docs.items()}
    if evidence is not None:
        cited = {memory_id: evidence.get(memory_id, ()) for memory_id in docs}
    positions = {memory_id: d.position for memory_id, d in docs.items()}
    subjects = {memory_id: d.subject or "" for memory_id, d in docs.items()}
    out = []
    for q in conversation.questions if questions is None else questions:
        analyzed = analyze_query(q.text)
        lexical = [(s.doc_id, s.score) for s in lexical_search(index, docs, q.text, DEPTH)]
        lexical_plain = [(s.doc_id, s.score) for s in plain.search(analyzed, DEPTH)]
        lexical_source = [(s.doc_id, s.score) for s in no_window.search(analyzed, DEPTH)]
        statement: dict[str, float] = {}
        source: dict[str, float] = {}
        channel = engine.semantic
        if semantic and channel is not None:
            vector, _ = channel.embed_query(q.text)
            if vector is not None:
                ids = [d for d, _ in lexical]
                # The channel takes its locks (serving state, then DuckDB for a first read).
                for field, into in (("statement", statement), ("source", source)):
                    into.update(channel.cosines(ns, vector, docs, ids, (field,)))
                    into.update(channel.search(ns, vector, docs, DEPTH, (field,)))
        dates = query_dates(q.text)
        dated = frozenset(m for m, d in docs.items() if occurred_in(d.occurred_at, dates))
        out.append(
            Channels(
                q,
                lexical,
                lexical_plain,
                lexical_source,
                statement,
                source,
                cited,
                positions,
                dated,
                subjects,
                docs,
            )
        )
    return out


def semantic_scores(ch: Channels, fields: Sequence[str]) -> dict[str, float]:
    """A memory's semantic score: the best cosine among its vectors of ``fields``."""
    out: dict[str, float] = {}
    for field in fields:
        for memory_id, score in (ch.statement if field == "statement" else ch.source).items():
            if memory_id not in out or score > out[memory_id]:
                out[memory_id] = score
    return out


def rank_semantic(scores: dict[str, float], depth: int) -> list[str]:
    """Ids by semantic score, best first, ties by memory id (as the channel's search)."""
    return [d for d, _ in sorted(scores.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]]


Way = Callable[[Channels], list[str]]


def fused(fusion: HybridFusion, lexical: str = "window", depth: int = max(KS)) -> Way:
    """The top ``depth`` ids ``fusion`` gives, computed by the engine's own fusion step
    (``commands.recall.ranking.fuse_channels``: fusion, signals, temporal boost);
    ``lexical``: which lexical ranking (``window``: the engine's, ``source``: without the
    window, ``plain``: without any expansion)."""

    def way(ch: Channels) -> list[str]:
        ranking = {"window": ch.lexical, "source": ch.lexical_source}.get(lexical, ch.lexical_plain)
        if not ch.statement and not ch.source:
            return [d for d, _ in ranking[:depth]]
        scores = semantic_scores(ch, fusion.fields)
        ranked = rank_semantic(scores, fusion.depth)
        out = fuse_channels(ch.question.text, ranking, ranked, scores, ch.docs, fusion)
        return [d for d, _ in out[:depth]]

    return way


def lexical_way(lexical: str = "window", depth: int = max(KS)) -> Way:
    """The lexical channel alone (``window``: the engine's; ``source``: without the
    conversation window; ``plain``: without any expansion)."""

    def way(ch: Channels) -> list[str]:
        ranking = {"window": ch.lexical, "source": ch.lexical_source}.get(lexical, ch.lexical_plain)
        return [d for d, _ in ranking[:depth]]

    return way


def semantic_way(fields: Sequence[str], depth: int = max(KS)) -> Way:
    """The semantic channel alone, over the vectors of ``fields``."""

    def way(ch: Channels) -> list[str]:
        return rank_semantic(semantic_scores(ch, fields), depth)

    return way


def score(channels: Sequence[Channels], way: Way) -> Scores:
    """Recall@k / MRR of ``way`` over ``channels`` (hit: a result cites the evidence)."""
    out = Scores()
    for ch in channels:
        ranked = [ch.evidence[d] for d in way(ch)]
        out.add(ch.question.category, first_hit(ranked, ch.question.evidence))
    return out


@dataclass
class LocoResult:
    """Leave-one-conversation-out: per held-out conversation, the configuration chosen on
    the others and its figures on the held-out one."""

    chosen: dict[str, HybridFusion]
    held_out: Scores
    train_r5: dict[str, float]


def leave_one_out(
    by_conversation: dict[str, list[Channels]],
    grid: Sequence[HybridFusion],
    prefer: Callable[[HybridFusion], float],
) -> LocoResult:
    """For each conversation, pick from ``grid`` the fusion with the best Recall@5 on the
    other conversations (ties: higher MRR, then higher ``prefer``, then grid order) and
    score it on the held-out conversation."""
    ranks: dict[int, dict[str, list[tuple[int, int | None]]]] = {}
    for index, fusion in enumerate(grid):
        way = fused(fusion)
        ranks[index] = {
            sample: score(channels, way).ranks for sample, channels in by_conversation.items()
        }
    held = Scores()
    chosen: dict[str, HybridFusion] = {}
    train_r5: dict[str, float] = {}
    for sample in by_conversation:

        def key(index: int, sample: str = sample) -> tuple[float, float, float, int]:
            train = Scores()
            for other, rows in ranks[index].items():
                if other != sample:
                    train.ranks.extend(rows)
            figures = train.figures()
            return (figures["recall@5"], figures["mrr"], prefer(grid[index]), -index)

        best = max(range(len(grid)), key=key)
        chosen[sample] = grid[best]
        train_r5[sample] = key(best)[0]
        held.ranks.extend(ranks[best][sample])
    return LocoResult(chosen=chosen, held_out=held, train_r5=train_r5)


def choose_all(
    by_conversation: dict[str, list[Channels]],
    grid: Sequence[HybridFusion],
    prefer: Callable[[HybridFusion], float],
) -> HybridFusion:
    """The grid's best fusion on every conversation together (the shipped default)."""
    every = [ch for channels in by_conversation.values() for ch in channels]

    def key(index: int) -> tuple[float, float, float, int]:
        figures = score(every, fused(grid[index])).figures()
        return (figures["recall@5"], figures["mrr"], prefer(grid[index]), -index)

    return grid[max(range(len(grid)), key=key)]
