"""The lexical channel's analyzer: what BM25 indexes for a memory and searches for a query.

On top of :func:`projections.text_index.tokenize` (NFKC, lowercase, ``\\w+`` runs, CJK
bigrams), recall applies:

- Snowball English stemming (Porter 2, through PyStemmer) to document and query tokens:
  "painted", "painting" and "paints" meet at "paint". Tokens without ASCII letters (CJK
  bigrams, digits) pass unchanged.
- Query stop words (:data:`QUERY_STOP_WORDS`: the bm25s English list plus question words
  such as "what", "when", "did"): dropped from queries only, never from documents, so a
  memory is indexed whole.
- Document fields: ``subject``, ``statement`` and, when the memory has provenance, the
  first :data:`CONTEXT_CHARS` characters of the transcript it was extracted from (its
  TranscriptObserved event; document expansion with the source turn), and the turns around
  it: up to :data:`WINDOW_TURNS` turns before and after the source turn in the same
  session, recorded before the memory was created (:class:`ConversationWindows`; a
  question is often worded like the turn that asked for the fact, or the one that followed
  it: "What are your plans for the summer?" / "Researching adoption agencies").

Figures behind these choices (LoCoMo, 1,035 questions, Recall@5, ``python -m benchmarks
locomo``): plain tokens over subject + statement 0.529; stemmed 0.589; plus query stop
words 0.610; plus the source transcript 0.644; plus the turns around it (two before, two
after) 0.674 (one before 0.664, one each side 0.672, four before and two after 0.657);
with the statement counted twice beside transcript text and each window word once 0.673
(fused with MiniLM, the same within 0.003; kept because a memory's own words then rank
it above a neighbour's: see :func:`analyze_document`).

The analyzed text is the stems joined by spaces; ``tokenize`` of that text gives the stems
back, so :class:`~projections.text_index.BM25Index` indexes it unchanged.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Collection, Sequence
from functools import lru_cache
from typing import Any

import Stemmer

from memory_ledger.ledger.events import TranscriptObserved
from memory_ledger.projections.text_index import tokenize

__all__ = [
    "CONTEXT_CHARS",
    "QUERY_STOP_WORDS",
    "WINDOW_TURNS",
    "ConversationWindows",
    "SourceTranscripts",
    "analyze_document",
    "analyze_query",
    "stem",
]

CONTEXT_CHARS = 1000
"""How much of a memory's source transcript is indexed (characters, from the start); each
turn of its conversation window is cut to this length too."""

WINDOW_TURNS = 2
"""How many turns before and after a memory's source turn (same session) its lexical
document also holds (:class:`ConversationWindows`). Chosen on LoCoMo with the fusion
weight by leave-one-conversation-out (``python -m benchmarks locomo``; see the README)."""

QUERY_STOP_WORDS = frozenset(
    # bm25s STOPWORDS_EN (the Lucene English list)
    "a an and are as at be but by for if in into is it no not of on or such that the their "
    "then there these they this to was will with "
    # question words and auxiliaries of recall queries
    "what when who how which why where did does do were has have had would could likely "
    "kind type s".split()
)
"""Tokens dropped from queries (never from documents)."""

_local = threading.local()


def _stemmer() -> Stemmer.Stemmer:
    stemmer: Stemmer.Stemmer | None = getattr(_local, "stemmer", None)
    if stemmer is None:  # PyStemmer objects are not thread-safe: one per thread
        stemmer = Stemmer.Stemmer("english")
        _local.stemmer = stemmer
    return stemmer


_LATIN_LETTER = re.compile("[a-z]")


@lru_cache(maxsize=200_000)
def stem(token: str) -> str:
    """The Snowball English stem of one lowercase token (cached)."""
    if _LATIN_LETTER.search(token) is None:  # no letter a-z: nothing to stem
        return token
    result: str = _stemmer().stemWord(token)
    return result


def analyze_document(
    subject: str | None, statement: str, context: str | None = None, window: str | None = None
) -> str:
    """The text BM25 indexes for a memory: stems of subject, statement, context (its source
    turn, first :data:`CONTEXT_CHARS` characters) and window (the turns around it, as
    :class:`ConversationWindows` gives them), space-joined.

    When there is transcript text (context or window), the statement is counted twice and
    each word of the window once (however often the neighbouring turns say it), so a word of
    the memory itself outweighs the same word around it: "espresso" finds "Alice likes
    espresso" before the deploy note told right after it, "LGBTQ support group" the support
    group before the activist group whose neighbouring turns talk of support."""
    text = f"{subject or ''} {statement}"
    if context or window:
        text = f"{text} {statement}"
    if context:
        text = f"{text} {context[:CONTEXT_CHARS]}"
    stems = [stem(t) for t in tokenize(text)]
    if window:
        stems.extend(dict.fromkeys(stem(t) for t in tokenize(window)))
    return " ".join(stems)


def analyze_query(query: str) -> str:
    """The text BM25 searches for ``query``: stems of its tokens minus stop words (all of
    them when the query holds nothing else, so "what is it" still searches)."""
    tokens = tokenize(query)
    kept = [t for t in tokens if t not in QUERY_STOP_WORDS] or tokens
    return " ".join(stem(t) for t in kept)


class SourceTranscripts:
    """Looks up a memory's source transcript in the ledger, for document expansion.

    Called with a ``canonical_memory.transcript_positions`` list; returns the first
    :data:`CONTEXT_CHARS` characters of the TranscriptObserved event at the first position
    (None when there is none). Results are cached per position (bounded).

    :param recorder: the ledger's application recorder (``select_notifications``).
    :param mapper: decodes a stored event (``to_domain_event``).
    """

    def __init__(self, recorder: Any, mapper: Any, max_cached: int = 100_000) -> None:
        self._recorder = recorder
        self._mapper = mapper
        self._cache: dict[int, str | None] = {}
        self._max_cached = max_cached
        self._lock = threading.Lock()

    def clear(self) -> None:
        """Forget every cached transcript (after an erasure)."""
        with self._lock:
            self._cache.clear()

    def __call__(self, positions: Sequence[int]) -> str | None:
        """The source transcript of a memory with these ``transcript_positions`` (the
        first one), or None."""
        if not positions:
            return None
        return self.text_at(int(positions[0]))

    def text_at(self, position: int) -> str | None:
        """The first :data:`CONTEXT_CHARS` characters of the TranscriptObserved event at
        ledger ``position``, or None when the event there is of another kind (cached)."""
        with self._lock:
            if position in self._cache:
                return self._cache[position]
        text: str | None = None
        found = self._recorder.select_notifications(position, 1)
        if found and found[0].id == position:
            event = self._mapper.to_domain_event(found[0])
            if isinstance(event, TranscriptObserved):
                text = event.transcript[:CONTEXT_CHARS]
        with self._lock:
            if len(self._cache) >= self._max_cached:
                self._cache.clear()
            self._cache[position] = text
        return text


WindowOf = Callable[[Sequence[int], int], str | None]
"""``(transcript_positions, created_position) -> window text or None`` of one namespace."""


class ConversationWindows:
    """The turns around a memory's source turn, for lexical document expansion.

    For a memory whose first transcript position is the turn ``t`` of session ``s``: the
    transcripts of turns ``t - WINDOW_TURNS .. t + WINDOW_TURNS`` of ``s`` other than ``t``
    itself, in turn order, each cut to :data:`CONTEXT_CHARS` characters, newline-joined,
    counting only turns recorded before the memory was created (``created_position``), so a
    memory's document never depends on when its index was built. None when the memory has
    no provenance or no such turn exists. A turn that is the source of a forgotten memory
    lends nothing to any window (``silenced`` of :meth:`for_namespace`): a memory's own
    source turn still counts for itself (its context), a forgotten memory is not retrieved.

    :param transcripts: reads a transcript by ledger position (cached there).
    :param turns_of: ``(tenant, principal, scope_id) -> [(session_id, turn_id, position)]``,
        every observed turn of a namespace (``CanonicalMemory.session_turns``).
    :param turns: :data:`WINDOW_TURNS` unless given (0: no window).
    """

    def __init__(
        self,
        transcripts: SourceTranscripts,
        turns_of: Callable[[str, str, str], Sequence[tuple[str, int, int]]],
        turns: int = WINDOW_TURNS,
    ) -> None:
        self._transcripts = transcripts
        self._turns_of = turns_of
        self.turns = turns

    def for_namespace(
        self, tenant: str, principal: str, scope_id: str, silenced: Collection[int] = ()
    ) -> WindowOf:
        """A reader of windows for one namespace (reads its turns once: call it per index
        build or refresh, then once per memory).

        ``silenced``: ledger positions of turns that lend no words to any window (the
        source turns of forgotten memories, ``CanonicalMemory.forgotten_turns``): once a
        memory is forgotten, its words must not find its neighbours."""
        if self.turns <= 0:
            return lambda positions, created: None
        by_position: dict[int, tuple[str, int]] = {}
        by_turn: dict[tuple[str, int], int] = {}
        for session, turn, position in self._turns_of(tenant, principal, scope_id):
            by_position[position] = (session, turn)
            by_turn.setdefault((session, turn), position)
        span = self.turns
        text_at = self._transcripts.text_at
        muted = {by_position[p] for p in silenced if p in by_position}

        def window(positions: Sequence[int], created: int) -> str | None:
            if not positions:
                return None
            source = by_position.get(int(positions[0]))
            if source is None:
                return None
            session, turn = source
            parts = []
            for other in range(turn - span, turn + span + 1):
                position = by_turn.get((session, other))
                if other == turn or position is None or position >= created:
                    continue
                if (session, other) in muted:
                    continue  # the source turn of a forgotten memory
                text = text_at(position)
                if text:
                    parts.append(text)
            return "\n".join(parts) or None

        return window
