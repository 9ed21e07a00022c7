"""How a command that names its target by words chooses it (issue 34 item 1): the one rule of
``forget``, ``pin`` and ``correct`` without a target id, on every surface.

A command never acts on a memory its words are not about. Two rules, each over the memories a
lexical search of the words found (best first; a memory's own subject, predicate and
statement count, never its source transcript):

- **A description** (``forget`` and ``pin``): the target holds every content word of the
  words (stems; :data:`~memory_ledger.commands.recall.lexical.QUERY_STOP_WORDS` and
  :data:`DESCRIPTION_FILLERS`, such as the command's verb and "I", aside):
  "espresso" names "Alice only drinks espresso."; "where Bob lives" does not name "Alice
  lives in Lisbon." (it lacks "Bob"). A memory whose statement is exactly the words is the
  one named even when longer ones hold them too.
- **A correction** (``correct`` without a target): the target is about the same subject and
  the same attribute and differs in the value. A statement is read as a head (subject and
  attribute) and a value: the value is what follows its last link word (a copula or a
  preposition, :data:`LINK_WORDS`) or, without one, its last word. "Alice lives in Porto."
  (head ``alice live``) corrects "Alice lives in Lisbon."; "Bob is allergic to shellfish."
  (``bob allerg``) never corrects "Alice is allergic to peanuts." (``alice allerg``), nor
  "Erin's favourite colour is green." Carol's, nor "The staging database port is 5433." the
  production one. A subject given by the caller decides who: the candidate's subject must be
  it (or, without one, its statement must start with it) and the rest of the heads must
  agree. The head must name an attribute beside the subject ("Alice is a nurse." names
  none: it is near "Alice is a teacher.", not the same). Words such as "now" and
  "actually" (:data:`CORRECTION_FILLERS`) are not read.

What the words name is one memory (the target), several (``ambiguous_match``: pass one of the
listed ids), none that clearly matches although some are near (``no_clear_target``: the
near ones are listed, so a model can retry with ``target``), or nothing at all (``no_match``
for a description; a correction naming nothing is simply remembered). Each refusal is an
:class:`~memory_ledger.commands.errors.UnknownMemoryError` listing at most :data:`LISTED`
candidates (id and the start of the statement) and never repeating the words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

from memory_ledger.commands.errors import UnknownMemoryError
from memory_ledger.commands.recall.lexical import QUERY_STOP_WORDS, stem
from memory_ledger.ledger.ids import normalize_statement
from memory_ledger.projections.text_index import tokenize

__all__ = [
    "CORRECTION_FILLERS",
    "DESCRIPTION_FILLERS",
    "LINK_WORDS",
    "LISTED",
    "NamedMemory",
    "WordMatch",
    "content_stems",
    "correction_match",
    "correction_target",
    "description_stems",
    "description_target",
    "holds_every_word",
]

LISTED = 5
"""How many candidates a refusal lists (best first); the others are counted."""

LINK_WORDS = frozenset(
    "is are was were am be been being in at on to from with for by of as into".split()
)
"""Words after which a statement's value starts (the last one followed by a content word)."""

CORRECTION_FILLERS = frozenset(
    "now actually currently instead anymore longer really no not".split()
)
"""Words a correction adds that are neither subject, attribute nor value ("Alice now lives
in Porto.")."""

DESCRIPTION_FILLERS = LINK_WORDS | frozenset(
    "forget forgot remember pin correct delete drop erase please about "
    "i me my mine myself we us our ours you your yours".split()
)
"""Words a description may hold that say how it was asked, not what: the command's own verb,
"please", first and second person pronouns (the user and the assistant, whose memory it
is) and link words ("forget that I like green tea" describes "Alice likes green tea.";
"sister Inês visits from Porto" describes "Alice's sister Inês lives in Porto and visits
on 20 March 2024.")."""


class NamedMemory(Protocol):
    """What the rule reads of a candidate memory (a ``MemoryDoc`` is one)."""

    @property
    def memory_id(self) -> str: ...

    @property
    def subject(self) -> str | None: ...

    @property
    def predicate(self) -> str | None: ...

    @property
    def statement(self) -> str: ...


Doc = TypeVar("Doc", bound=NamedMemory)

WordMatch = Literal["same", "near", "other"]
"""How a correction relates to a candidate: the same subject and attribute with another
value, near (not clearly the same, not clearly another subject or attribute), or other."""


def _tokens(text: str) -> list[str]:
    return tokenize(text.replace("_", " "))


def content_stems(text: str, ignored: frozenset[str] = frozenset()) -> list[str]:
    """The stems of ``text``'s content words, in order (stop words and ``ignored`` dropped;
    all of them when nothing else is left). Underscores separate words (a predicate
    ``favourite_colour``)."""
    tokens = _tokens(text)
    kept = [t for t in tokens if t not in QUERY_STOP_WORDS and t not in ignored] or tokens
    return [stem(t) for t in kept]


def description_stems(words: str) -> set[str]:
    """The content stems a description must find in its target (:data:`DESCRIPTION_FILLERS`
    aside)."""
    return set(content_stems(words, DESCRIPTION_FILLERS))


def _own_stems(doc: NamedMemory) -> set[str]:
    """Every stem of the memory's own text (subject, predicate, statement)."""
    own = f"{doc.subject or ''} {doc.predicate or ''} {doc.statement}"
    return {stem(t) for t in _tokens(own)}


def holds_every_word(words: str, doc: NamedMemory) -> bool:
    """Whether the memory's own subject, predicate and statement hold every content word of
    ``words`` (the description rule)."""
    return description_stems(words) <= _own_stems(doc)


@dataclass(frozen=True)
class _Read:
    """A statement read as head (subject and attribute stems) and value stems."""

    head: tuple[str, ...]
    value: tuple[str, ...]


def _read(statement: str, *, fillers: bool) -> _Read:
    tokens = _tokens(statement)
    if fillers:
        tokens = [t for t in tokens if t not in CORRECTION_FILLERS]
    content = [
        (i, t) for i, t in enumerate(tokens) if t not in QUERY_STOP_WORDS and t not in LINK_WORDS
    ]
    cut = None
    first = content[0][0] if content else 0
    last = content[-1][0] if content else 0
    for i, token in enumerate(tokens):
        if token in LINK_WORDS and first < i < last:
            cut = i  # the last link word with a content word on each side
    if cut is None:
        split = max(len(content) - 1, 0)
        head = [t for _, t in content[:split]]
        value = [t for _, t in content[split:]]
    else:
        head = [t for j, t in content if j < cut]
        value = [t for j, t in content if j > cut]
    return _Read(tuple(stem(t) for t in head), tuple(stem(t) for t in value))


def _strip(head: tuple[str, ...], prefix: tuple[str, ...]) -> tuple[str, ...]:
    return head[len(prefix) :] if prefix and head[: len(prefix)] == prefix else head


def correction_match(text: str, doc: NamedMemory, subject: str | None = None) -> WordMatch:
    """How the correction ``text`` relates to the memory ``doc`` (module docstring):
    ``same`` when both heads agree and the values differ, ``other`` when a head holds a word
    the other statement lacks (another subject or attribute) or ``subject`` (the caller's)
    is not the memory's, ``near`` otherwise (the same words, read differently)."""
    if normalize_statement(text) == normalize_statement(doc.statement):
        return "other"  # the same statement: nothing to correct (remembering reinforces it)
    new = _read(text, fillers=True)
    old = _read(doc.statement, fillers=True)
    new_head, old_head = new.head, old.head
    if subject is not None:
        wanted = tuple(content_stems(subject))
        if doc.subject is not None:
            if tuple(content_stems(doc.subject)) != wanted:
                return "other"
        elif old_head[: len(wanted)] != wanted:
            return "other"
        new_head, old_head = _strip(new_head, wanted), _strip(old_head, wanted)
    elif doc.subject is not None and not set(content_stems(doc.subject)) <= set(new_head):
        return "other"  # the memory's subject is not the correction's
    # The head must hold an attribute beside the subject: "Alice is a nurse." (head
    # ``alice``) does not say which attribute of Alice's it corrects.
    least = 1 if subject is not None else 2
    if len(new_head) >= least and new_head == old_head and new.value != old.value:
        return "same"
    new_all = set(new.head) | set(new.value)
    old_all = set(old.head) | set(old.value)
    if not new.head or not set(new_head) <= old_all or not set(old_head) <= new_all:
        return "other"
    return "near"


def _listing(found: Sequence[NamedMemory], capped: bool) -> str:
    listed = "; ".join(f"{doc.memory_id}: {doc.statement[:60]}" for doc in found[:LISTED])
    rest = len(found) - LISTED
    more = f"; and {'at least ' if capped else ''}{rest} more" if rest > 0 else ""
    return f"{listed}{more}"


def _pairs(found: Sequence[NamedMemory]) -> list[tuple[str, str]]:
    """The listed candidates as ``(memory_id, statement)`` (the error's ``candidates``)."""
    return [(str(doc.memory_id), doc.statement) for doc in found[:LISTED]]


def _ambiguous(found: Sequence[NamedMemory], capped: bool) -> UnknownMemoryError:
    count = f"at least {len(found)}" if capped else str(len(found))
    msg = f"the words name {count} memories, pass one memory id: {_listing(found, capped)}"
    return UnknownMemoryError(msg, reason_code="ambiguous_match", candidates=_pairs(found))


def _unclear(near: Sequence[NamedMemory], capped: bool) -> UnknownMemoryError:
    msg = (
        "no memory clearly matches the given words; nothing was written. Pass one memory id "
        f"as target if one of these is meant: {_listing(near, capped)}"
    )
    return UnknownMemoryError(msg, reason_code="no_clear_target", candidates=_pairs(near))


def description_target(words: str, candidates: Sequence[Doc], *, capped: bool = False) -> Doc:
    """The one memory among ``candidates`` (best lexical match first) that the description
    ``words`` names (a ``forget`` or ``pin``): the one holding every content word of it.
    ``capped``: the search stopped at its depth (more may match: counts say "at least").

    :raises UnknownMemoryError: ``ambiguous_match`` (several hold every word and none is
        exactly the words), ``no_clear_target`` (none holds every word, some share one:
        they are listed) or ``no_match`` (none shares a word).
    """
    holders = [doc for doc in candidates if holds_every_word(words, doc)]
    exact = normalize_statement(words)
    verbatim = [doc for doc in holders if normalize_statement(doc.statement) == exact]
    if len(verbatim) == 1:
        return verbatim[0]
    if len(holders) == 1:
        return holders[0]
    if holders:
        raise _ambiguous(holders, capped)
    wanted = description_stems(words)
    near = [doc for doc in candidates if wanted & _own_stems(doc)]
    if near:
        raise _unclear(near, capped)
    raise UnknownMemoryError(
        "no memory of this namespace matches the given words", reason_code="no_match"
    )


def correction_target(
    text: str, candidates: Sequence[Doc], *, subject: str | None = None, capped: bool = False
) -> Doc | None:
    """The memory among ``candidates`` (best lexical match first) that the correction
    ``text`` supersedes: the one about the same subject and attribute with another value
    (:func:`correction_match`; ``subject``: the caller's, which decides). None when no
    candidate is near: the correction is then simply remembered.

    :raises UnknownMemoryError: ``ambiguous_match`` (several are the same subject and
        attribute) or ``no_clear_target`` (none is, some are near: they are listed).
    """
    matches = [(doc, correction_match(text, doc, subject)) for doc in candidates]
    same = [doc for doc, match in matches if match == "same"]
    if len(same) == 1:
        return same[0]
    if same:
        raise _ambiguous(same, capped)
    near = [doc for doc, match in matches if match == "near"]
    if near:
        raise _unclear(near, capped)
    return None
