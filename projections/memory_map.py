"""The memory map: the vocabulary a model needs to fill a recall tool's ``about`` and
``attribute`` fields (seed 004: with it a model names the right predicate 69% of the time,
without it 2%).

Rendered from the ``vocabulary`` view: a short header, then subjects and attributes with
their record counts, most frequent first, at most 40 terms per field followed by
"and N more". Only retrievable records count. Bounded by the user's vocabulary, not by how
much they have stored; the seed crate reports 282 tokens at 16,000 records, and this
rendering stays within 300 estimated tokens there (``benchmarks`` prints the figure).
"""

from __future__ import annotations

from typing import Protocol

from memory_ledger.projections.tokens import TokenCounter, estimate_tokens

__all__ = ["MAX_TERMS", "MAX_TOKENS", "Vocabulary", "estimate_tokens", "render_memory_map"]

MAX_TERMS = 40
"""Terms shown per field, at most."""

MAX_TOKENS = 300
"""Budget of the whole map in estimated tokens; fewer terms are shown to stay within it."""


class Vocabulary(Protocol):
    """What the map reads: :class:`~memory_ledger.projections.canonical.CanonicalMemory`
    (the ``vocabulary`` view) or the serving state
    (:class:`~memory_ledger.projections.serving.state.ServingState`), which count alike."""

    def vocabulary(
        self, tenant: str, principal: str, scope_id: str, field: str
    ) -> list[tuple[str, int]]:
        """``(term, records)`` of one field, most frequent first."""

    def count_namespace(self, tenant: str, principal: str, scope_id: str) -> int:
        """Retrievable rows of one namespace."""


def _field_line(label: str, terms: list[tuple[str, int]], limit: int) -> str:
    if not terms:
        return f"{label}: (none yet)"
    shown = ", ".join(f"{term} ({count})" for term, count in terms[:limit])
    more = len(terms) - limit
    return f"{label}: {shown}" + (f", and {more} more" if more > 0 else "")


def render_memory_map(
    canonical: Vocabulary,
    tenant: str,
    principal: str,
    scope_id: str,
    *,
    limit: int = MAX_TERMS,
    max_tokens: int = MAX_TOKENS,
    token_counter: TokenCounter = estimate_tokens,
) -> str:
    """The memory map of one namespace: plain text within ``max_tokens`` tokens as
    ``token_counter`` (default :func:`~memory_ledger.projections.tokens.estimate_tokens`)
    counts them.

    Shows up to ``limit`` terms per field, fewer when the budget requires it (the most
    frequent terms are kept; the rest are summarized as "and N more").
    """
    subjects = canonical.vocabulary(tenant, principal, scope_id, "subject")
    predicates = canonical.vocabulary(tenant, principal, scope_id, "predicate")
    total = canonical.count_namespace(tenant, principal, scope_id)
    header = (
        f"Memory map: {total} remembered records. Use these names as recall's "
        "'about' (subject) and 'attribute' (predicate); counts in parentheses."
    )
    shown = limit
    while True:
        text = "\n".join(
            [
                header,
                _field_line("about", subjects, shown),
                _field_line("attribute", predicates, shown),
            ]
        )
        if shown == 0 or token_counter(text) <= max_tokens:
            return text
        shown -= 1
