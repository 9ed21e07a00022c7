"""The direct path of the LoCoMo benchmark: one ``remember(ns, fact)`` per observation fact,
and the peers given the same facts and the same embedding function.

What a host that calls ``remember`` directly (the MCP ``remember`` tool, a key-value store
adapter) gives the engine: the fact's statement alone, no source turn, no conversation
window, no subject; with ``dated`` the fact's conversation time as ``occurred_at`` too
(the date of the session it was told in). One namespace per conversation and per variant
(``locomo-direct/<sample>/plain``, ``.../dated``), all in one store; vectors awaited; then
every question's channels are read exactly as for the session path
(:func:`benchmarks.locomo.channels.collect`), with each memory's evidence the dia_ids of the
fact(s) it was remembered for (a fact remembered twice reinforces one memory: the union).

Peers, each over the same facts of each conversation:

- plain cosine: the provider's vectors, numpy, best cosine first (what LangGraph's
  ``PostgresStore`` with pgvector, mem0 OSS over Qdrant and any flat vector store return);
- LangGraph ``InMemoryStore`` (the ``langgraph`` extra) with an index over the ``text``
  field, embedding through the same provider (documents as passages, the query as a
  query): ``store.put`` per fact, ``store.search(ns, query=..., limit=10)``.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np

from benchmarks.corpus import scratch
from benchmarks.locomo.channels import Channels, Scores, collect, first_hit
from benchmarks.locomo.data import CATEGORIES, Conversation
from benchmarks.locomo.peers import Ranked
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.embeddings.base import EmbeddingProvider

DEPTH = 200
"""How deep rankings are kept for the session- and turn-level metrics."""
VARIANTS = ("plain", "dated")
"""Without and with the fact's conversation time as ``occurred_at``."""


@dataclass
class Fact:
    """One observation fact as the direct path remembers it."""

    statement: str
    evidence: tuple[str, ...]
    occurred_at: datetime


def facts_of(conversation: Conversation) -> list[Fact]:
    """The conversation's observation facts in script order, each with the time of the
    turn it was extracted at (its session's date)."""
    out: list[Fact] = []
    for step in conversation.steps:
        if step["op"] != "turn":
            continue
        when = datetime.fromisoformat(str(step["occurred_at"]))
        out.extend(
            Fact(str(item["statement"]), tuple(item["evidence"]), when)
            for item in step["extracted"]
        )
    return out


def namespace(sample_id: str, variant: str) -> Namespace:
    """The namespace of one conversation's direct-path memories."""
    return Namespace("locomo-direct", sample_id, variant)


def replay_direct(
    conversations: Sequence[Conversation], provider: EmbeddingProvider | None
) -> dict[str, dict[str, list[Channels]]]:
    """``{variant: {sample_id: channels per question}}`` of the direct path (see the module
    docstring)."""
    out: dict[str, dict[str, list[Channels]]] = {v: {} for v in VARIANTS}
    with (
        scratch("bench_locomo_direct_") as folder,
        MemoryEngine.open(folder, sync=False, embeddings=provider) as engine,
    ):
        evidence: dict[tuple[str, str], dict[str, tuple[str, ...]]] = {}
        for conversation in conversations:
            for variant in VARIANTS:
                ns = namespace(conversation.sample_id, variant)
                cited: dict[str, tuple[str, ...]] = {}
                for fact in facts_of(conversation):
                    when = fact.occurred_at if variant == "dated" else None
                    result = engine.remember(ns, fact.statement, occurred_at=when)
                    memory = str(result.memory_id)
                    cited[memory] = tuple(dict.fromkeys((*cited.get(memory, ()), *fact.evidence)))
                evidence[(conversation.sample_id, variant)] = cited
        if provider is not None and not engine.wait_for_vectors(3600):
            raise SystemExit("vectors not ready after an hour")
        for conversation in conversations:
            for variant in VARIANTS:
                key = (conversation.sample_id, variant)
                out[variant][conversation.sample_id] = collect(
                    engine,
                    conversation,
                    provider is not None,
                    namespace=namespace(*key),
                    evidence=evidence[key],
                    questions=conversation.all_questions,
                )
    return out


def hits(rankings: Sequence[Ranked]) -> Scores:
    """R@k / MRR of rankings (categories 1-4: a hit when a top-k unit cites the evidence)."""
    scores = Scores()
    for r in rankings:
        if r.question.category in CATEGORIES:
            scores.add(r.question.category, first_hit(r.units[:10], r.question.evidence))
    return scores


def plain_cosine(
    conversations: Sequence[Conversation], provider: EmbeddingProvider, depth: int = DEPTH
) -> list[Ranked]:
    """The provider's plain cosine over each conversation's fact statements (numpy): the
    facts' evidence best first, for every question of every category."""
    out = []
    embed = getattr(provider, "embed_queries", provider.embed)
    for conversation in conversations:
        if not conversation.all_questions:
            continue
        facts = np.asarray(provider.embed([statement for statement, _ in conversation.facts]))
        asked = np.asarray(embed([q.text for q in conversation.all_questions]))
        similarity = asked @ facts.T
        for row, q in enumerate(conversation.all_questions):
            order = sorted(range(len(conversation.facts)), key=lambda i: (-similarity[row, i], i))
            out.append(Ranked(q, [conversation.facts[i][1] for i in order[:depth]]))
    return out


def _embeddings(provider: EmbeddingProvider) -> Any:
    """A LangChain ``Embeddings`` over ``provider`` (documents as passages, queries as
    queries), the object LangGraph's store index takes."""
    base = importlib.import_module("langchain_core.embeddings").Embeddings
    query = getattr(provider, "embed_queries", provider.embed)

    class ProviderEmbeddings(base):  # type: ignore[misc,valid-type]
        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            return [list(map(float, v)) for v in np.asarray(provider.embed(texts))]

        def embed_query(self, text: str) -> list[float]:
            return list(map(float, np.asarray(query([text]))[0]))

    return ProviderEmbeddings()


def langgraph_store(
    conversations: Sequence[Conversation], provider: EmbeddingProvider, depth: int = 50
) -> list[Ranked] | None:
    """LangGraph's ``InMemoryStore`` with the provider as its index's embedding, the top
    ``depth`` of ``store.search`` per question of every category (None without the
    ``langgraph`` extra)."""
    try:
        memory = importlib.import_module("langgraph.store.memory")
    except ImportError:
        return None
    out = []
    dims = provider.descriptor.dimension
    for conversation in conversations:
        store = memory.InMemoryStore(
            index={"dims": dims, "embed": _embeddings(provider), "fields": ["text"]}
        )
        ns = ("locomo", conversation.sample_id)
        store.batch(
            [
                memory.PutOp(ns, str(i), {"text": statement}, None)
                for i, (statement, _) in enumerate(conversation.facts)
            ]
        )
        for q in conversation.all_questions:
            found = store.search(ns, query=q.text, limit=depth)
            out.append(Ranked(q, [conversation.facts[int(item.key)][1] for item in found]))
    return out
