"""Model-free signals recall adds after fusion (issue 27): names the query shares with a
memory, quoted phrases, and the memories remembered next to a strong match.

Each is a pure function of the query and the memories as the recall index holds them
(retrievable, of the one namespace, as of the read: a forgotten memory is not there, so it
lends nothing), and each is off unless its weight in
:class:`~memory_ledger.commands.recall.fusion.HybridFusion` is above 0. Weights were chosen on
LoCoMo by leave-one-conversation-out (``python -m benchmarks locomo``), each signal measured alone
first and kept only where it helped.

- Names (:func:`query_names`): capitalised words of the query that are not its first word
  and not stop words ("What did *Caroline* research?"); a memory whose subject or statement
  holds one of them gains ``name_boost`` times the share it holds.
- Quoted phrases (:func:`quoted_phrases`): text between double quotes in the query
  ("the book "Charlotte's Web""); a memory whose statement holds one (case-folded) gains
  ``phrase_boost``.
- Neighbours (:func:`neighbour_lift`): memories remembered one after another (adjacent in
  the namespace's ledger order among the query's candidates) tend to be about the same
  moment; each candidate WITHOUT a source turn gains ``neighbour_share`` times the best
  fused score of the candidates right before and after it (a memory with a source turn
  has its conversation window instead; on the session path such boosts did not help).
  LoCoMo direct path, MiniLM, alpha 0.8: R@5 0.658 without, 0.661 with 0.2 (alpha 0.45:
  0.635 to 0.657).
- Names: measured alone on the LoCoMo direct path (MiniLM) R@5 0.635 to 0.636 at 0.05-0.2
  and below at 0.3: off by default (LoCoMo's two speakers are named in most facts).
- Quoted phrases: no LoCoMo question quotes one (no change); off by default.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence

from memory_ledger.commands.recall.lexical import QUERY_STOP_WORDS

__all__ = ["memory_names", "neighbour_lift", "quoted_phrases", "query_names"]

_WORD = re.compile(r"[^\W\d_][\w'’-]*", re.UNICODE)
_QUOTED = re.compile(r"[\"“”]([^\"“”]{2,200})[\"“”]")


def _strip(word: str) -> str:
    return re.sub(r"['’]s$", "", word).casefold()


def query_names(query: str) -> frozenset[str]:
    """Case-folded capitalised words of ``query`` other than its first word and stop words
    (possessive ``'s`` removed): the names and entities it asks about."""
    words = _WORD.findall(query)
    return frozenset(
        _strip(w) for w in words[1:] if w[:1].isupper() and _strip(w) not in QUERY_STOP_WORDS
    )


def memory_names(subject: str | None, statement: str) -> frozenset[str]:
    """Case-folded words of a memory's subject and statement (possessive ``'s`` removed)."""
    return frozenset(_strip(w) for w in _WORD.findall(f"{subject or ''} {statement}"))


def quoted_phrases(query: str) -> tuple[str, ...]:
    """The case-folded phrases between double quotes in ``query``."""
    return tuple(m.group(1).strip().casefold() for m in _QUOTED.finditer(query))


def neighbour_lift(
    fused: Mapping[str, float],
    ordered: Sequence[str],
    share: float,
    eligible: Callable[[str], bool] | None = None,
) -> dict[str, float]:
    """``fused`` with ``share`` times the best fused score of each candidate's neighbours
    in ``ordered`` (the candidates in ledger order) added to it; only candidates for which
    ``eligible`` holds (all when None) are lifted. Only candidates (the keys of ``fused``)
    are returned."""
    if share <= 0.0:
        return dict(fused)
    last = len(ordered) - 1
    out = dict(fused)
    for i, memory_id in enumerate(ordered):
        if memory_id not in fused or (eligible is not None and not eligible(memory_id)):
            continue
        before = fused.get(ordered[i - 1], 0.0) if i > 0 else 0.0
        after = fused.get(ordered[i + 1], 0.0) if i < last else 0.0
        out[memory_id] = fused[memory_id] + share * (before if before > after else after)
    return out
