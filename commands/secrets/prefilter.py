"""The literal prefilter: one cheap test that skips the scan of ASCII text no detector can
match.

Every detector of the scan (``secrets.detect``'s sources) is gated by a necessary
condition: a regex plugin by its :class:`~memory_ledger.commands.secrets.scan.Gate`, a
rule by its context words or its long token run (a rule with neither by its anchors, which
its finder alone tries the pattern at in ASCII text), the keyword assignments by their
anchors, the entropy detector by its gate. A text that passes none of them yields no
candidate, so its scan finds nothing. :func:`may_hold_secret` unites those conditions
(read from the same tables the detectors use, so a new rule or plugin gate widens it by
itself): a 20-character token run, or one literal as written, or one literal in any case.

It is sound for ASCII text only (the case-insensitive literals are found in the lower-case
copy, which for ASCII text has the same offsets and the same letters the gated detectors
fold; non-ASCII text is always scanned in full). A detector whose condition the tables do
not express disables the prefilter (:data:`PREFILTER` is None) instead of weakening it.
``tests/secrets/test_prefilter.py`` checks, on adversarial strings and the secret corpora,
that the prefiltered scan and the full scan agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from memory_ledger.commands.secrets.plugins import (
    ENTROPY_GATE,
    KEYWORD_ANCHORED,
    KEYWORD_ANCHORS,
    PLUGIN_GATES,
)
from memory_ledger.commands.secrets.rules import RULES
from memory_ledger.commands.secrets.scan import LONG_RUN, Gate

__all__ = ["COVERED_SOURCES", "PREFILTER", "Prefilter", "may_hold_secret"]

COVERED_SOURCES: Final = (
    "plugin_candidates",
    "rule_candidates",
    "keyword_candidates",
    "entropy_candidates",
)
"""The scan's detectors whose conditions the prefilter unites (``secrets.detect`` uses the
prefilter only while its sources are exactly these)."""


class _Unfilterable(Exception):
    """A detector runs without a literal or long-run condition."""


def _minimal(literals: Iterable[str], covered_by: Iterable[str] = ()) -> tuple[str, ...]:
    """``literals`` without the ones that contain another (or whose lower case holds one of
    ``covered_by``): wherever a dropped literal occurs, a kept one occurs too."""
    kept = sorted({lit for lit in literals if lit.isascii()}, key=lambda lit: (len(lit), lit))
    folded = tuple(covered_by)
    out: list[str] = []
    for lit in kept:
        if any(shorter in lit for shorter in out) or any(c in lit.lower() for c in folded):
            continue
        out.append(lit)
    return tuple(out)


class Prefilter:
    """The united condition: ``literals`` (as written), ``folded`` (lower case, found in
    the lower-case text) and the long token run. Built by :func:`build`."""

    __slots__ = ("literals", "folded")

    def __init__(self, literals: tuple[str, ...], folded: tuple[str, ...]) -> None:
        self.literals = literals
        self.folded = folded

    def may_match(self, text: str) -> bool:
        """Whether some detector's condition holds in ASCII ``text`` (False: the scan of
        ``text`` finds nothing)."""
        for literal in self.literals:
            if literal in text:
                return True
        lower = text.lower()
        for literal in self.folded:
            if literal in lower:
                return True
        return LONG_RUN.search(text) is not None


def _gate_literals(gate: Gate, literals: set[str], folded: set[str]) -> None:
    if gate.long_run:
        return  # the long token run is part of the united condition
    if not gate.literals and not gate.folded:
        raise _Unfilterable
    literals.update(gate.literals)
    folded.update(gate.folded)


def build() -> Prefilter | None:
    """The prefilter of the current detector tables, or None when one detector has a
    condition they do not express."""
    literals: set[str] = set()
    folded: set[str] = set()
    try:
        for gate in (*PLUGIN_GATES, ENTROPY_GATE):
            _gate_literals(gate, literals, folded)
        for rule in RULES:
            if rule.long_run:
                continue
            if rule.words:
                (literals if rule.case_sensitive else folded).update(rule.words)
            elif rule.finder is not None and rule.anchors:
                folded.update(rule.anchors)
            else:
                raise _Unfilterable
        if not KEYWORD_ANCHORED:
            raise _Unfilterable
        folded.update(KEYWORD_ANCHORS)
    except _Unfilterable:
        return None
    kept_folded = _minimal(folded)
    return Prefilter(_minimal(literals, kept_folded), kept_folded)


PREFILTER: Final = build()
"""The prefilter of the detector tables (None: disabled, every text scanned in full)."""


def may_hold_secret(text: str) -> bool:
    """Whether the scan of ``text`` must run: always for non-ASCII text, else whether a
    detector's condition holds (:class:`Prefilter`). False means the scan finds nothing."""
    if PREFILTER is None or not text.isascii():
        return True
    return PREFILTER.may_match(text)
