"""The durable recall policy: how many results, how good a lexical match must be, and how
many one-hop reads of related memories a recall may make.

After seed 000 ("Active recall": ``DurableMemoryRecallPolicy::try_new(limit,
min_lexical_score)`` and ``try_with_related_lookups(n)``, default zero lookups): a recall
is bounded, and related memories (the relations recorded by ``supersedes`` /
``conflicts_with``) are read only when the host asks for it, a bounded number of times, and
returned as annotations beside the hit, never as hits of their own.

- :class:`RecallPolicy` is validated on construction (:class:`RecallPolicyError`,
  ``reason_code`` ``invalid_recall_policy``).
- :func:`check_recall_k` is the one bound on how many results a caller may ask a recall
  for (``memory.recall_max_k``): engine, async engine, session, CLI, MCP and as-of recalls
  all call it, and a larger ``k`` is refused (:class:`RecallLimitError`), never clamped.
- :func:`annotate_relations` reads the related memories of the hits, in rank order, until
  the lookup budget is spent: one read per related memory (all of them fetched in one
  query), each annotation a :class:`~commands.recall.index.RelatedMemory`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final, Protocol

import msgspec

from memory_ledger.commands.recall.index import MemoryDoc, RecallHit, RelatedMemory, RelationKind
from memory_ledger.ledger.arguments import check_count
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.ids import Namespace
from memory_ledger.projections.canonical import CanonicalMemory

__all__ = [
    "DEFAULT_RECALL_POLICY",
    "MAX_RECALL_LIMIT",
    "MAX_RELATED_LOOKUPS",
    "RecallPolicy",
    "RecallLimitError",
    "RecallPolicyError",
    "annotate_relations",
    "check_recall_k",
]

MAX_RECALL_LIMIT: Final = 1000
"""The largest result bound a policy accepts."""

MAX_RELATED_LOOKUPS: Final = 64
"""The largest number of one-hop relation reads a policy accepts per recall."""


class RecallPolicyError(InvalidArgumentError):
    """A :class:`RecallPolicy` setting is invalid (a ``ValueError``; the message and
    ``parameter`` name it; ``reason_code`` ``invalid_recall_policy``)."""

    reason_code = "invalid_recall_policy"


class RecallLimitError(InvalidArgumentError):
    """A recall asked for more results than ``memory.recall_max_k`` allows (a
    ``ValueError``; ``reason_code`` ``k_too_large``). ``parameter`` names the argument
    (``"k"``, or ``"limit"`` for a policy's default bound), ``requested`` is what was asked
    and ``maximum`` the setting's value; nothing was read or recorded."""

    reason_code = "k_too_large"

    def __init__(self, requested: int, maximum: int, *, parameter: str = "k") -> None:
        msg = (
            f"{parameter} is {requested}, over the maximum of {maximum} results a recall may "
            f"return (memory.recall_max_k); ask for at most {maximum} or raise recall_max_k"
        )
        super().__init__(msg, parameter=parameter)
        self.requested = requested
        self.maximum = maximum

    def __reduce__(self) -> tuple[Any, ...]:
        return (_limit_error, (self.requested, self.maximum, self.parameter))


def _limit_error(requested: int, maximum: int, parameter: str | None) -> RecallLimitError:
    return RecallLimitError(requested, maximum, parameter=parameter or "k")


def check_recall_k(k: object, maximum: int, *, parameter: str = "k") -> int:
    """``k``, the number of results a recall is asked for, if it is an integer from 1 to
    ``maximum`` (the ``memory.recall_max_k`` setting, default 50).

    The one check every recall surface shares (``MemoryEngine.recall`` and its async twin,
    session recall, the CLI's ``recall -k``, the MCP ``recall`` tool, as-of recalls): a
    larger ``k`` is refused, never silently cut to ``maximum``.

    :raises InvalidArgumentTypeError: ``k`` is not an integer (``not_an_integer``).
    :raises InvalidArgumentError: ``k`` is below 1 (``out_of_range``).
    :raises RecallLimitError: ``k`` is above ``maximum`` (``k_too_large``).
    """
    count = check_count(parameter, k)
    if count > maximum:
        raise RecallLimitError(count, maximum, parameter=parameter)
    return count


class RecallPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """How a recall is bounded (seed 000, ``DurableMemoryRecallPolicy``).

    :param limit: results returned when the caller gives no ``k`` (1 to
        :data:`MAX_RECALL_LIMIT`; 5, as A3S Code's automatic recall).
    :param min_lexical_score: the BM25 score (:mod:`commands.recall.lexical`; unbounded, >= 0) a
        lexical match needs to count: weaker lexical matches are dropped before fusion. A
        memory the semantic channel finds still counts through that channel. 0.0 (default)
        keeps every lexical match.
    :param related_lookups: how many related memories (``supersedes``, ``superseded_by``,
        ``conflicts_with``) a recall may read to annotate its hits (0 to
        :data:`MAX_RELATED_LOOKUPS`; default 0: no reads, no annotations).
    :raises RecallPolicyError: a value is out of range or of the wrong type.
    """

    limit: int = 5
    min_lexical_score: float = 0.0
    related_lookups: int = 0

    def __post_init__(self) -> None:
        if not _is_int(self.limit) or not 1 <= self.limit <= MAX_RECALL_LIMIT:
            msg = (
                f"recall limit must be an integer from 1 to {MAX_RECALL_LIMIT}, got {self.limit!r}"
            )
            raise RecallPolicyError(msg, parameter="limit")
        score = self.min_lexical_score
        if isinstance(score, bool) or not isinstance(score, int | float):
            msg = f"min_lexical_score must be a number, got {score!r}"
            raise RecallPolicyError(msg, parameter="min_lexical_score")
        if not math.isfinite(score) or score < 0:
            msg = f"min_lexical_score must be a finite number >= 0, got {score!r}"
            raise RecallPolicyError(msg, parameter="min_lexical_score")
        lookups = self.related_lookups
        if not _is_int(lookups) or not 0 <= lookups <= MAX_RELATED_LOOKUPS:
            msg = (
                f"related_lookups must be an integer from 0 to {MAX_RELATED_LOOKUPS}, "
                f"got {lookups!r}"
            )
            raise RecallPolicyError(msg, parameter="related_lookups")

    def with_related_lookups(self, lookups: int) -> RecallPolicy:
        """This policy with ``related_lookups`` set (seed 000's ``try_with_related_lookups``).

        :raises RecallPolicyError: ``lookups`` is out of range.
        """
        return msgspec.structs.replace(self, related_lookups=lookups)


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


DEFAULT_RECALL_POLICY = RecallPolicy()
"""Five results, every lexical match counts, no relation reads."""

_RELATIONS: Final[tuple[RelationKind, ...]] = ("supersedes", "superseded_by", "conflicts_with")


def _related_ids(doc: MemoryDoc) -> list[tuple[RelationKind, str]]:
    out: list[tuple[RelationKind, str]] = []
    for kind in _RELATIONS:
        value = getattr(doc, kind)
        ids = (value,) if isinstance(value, str) else tuple(value or ())
        out.extend((kind, memory_id) for memory_id in ids if memory_id)
    return out


class RowLookup(Protocol):
    """Rows by memory id under a lock: the serving state
    (:class:`~memory_ledger.projections.serving.state.ServingState`, the engine's)."""

    lock: Any

    def row(self, memory_id: str) -> Mapping[str, Any] | None:
        """The canonical memory row ``memory_id`` (any namespace), or None."""


RelatedRows = CanonicalMemory | RowLookup
"""Where related memories are read: the serving state, or a
:class:`~memory_ledger.projections.canonical.CanonicalMemory` (an as-of store's)."""


def annotate_relations(
    canonical: RelatedRows,
    namespace: Namespace,
    ranked: Sequence[tuple[MemoryDoc, RecallHit]],
    lookups: int,
) -> list[RecallHit]:
    """The hits of ``ranked`` with their one-hop relations read, at most ``lookups`` reads.

    Hits are visited in rank order and each one's relations in the order supersedes,
    superseded_by, conflicts_with; every distinct related memory costs one lookup, until
    the budget is spent (later relations go unannotated). A related memory of another
    namespace, or one that no longer exists, is left out. Takes the canonical lock.
    """
    hits = [hit for _, hit in ranked]
    if lookups <= 0:
        return hits
    wanted: list[str] = []
    for doc, _ in ranked:
        for _, memory_id in _related_ids(doc):
            if memory_id not in wanted and len(wanted) < lookups:
                wanted.append(memory_id)
    if not wanted:
        return hits
    rows = _read(canonical, wanted)
    out: list[RecallHit] = []
    for doc, hit in ranked:
        related: list[RelatedMemory] = []
        for kind, memory_id in _related_ids(doc):
            row = rows.get(memory_id)
            if row is None or (row["tenant"], row["principal"], row["scope_id"]) != (
                namespace.tenant,
                namespace.principal,
                namespace.scope_id,
            ):
                continue
            related.append(
                RelatedMemory(
                    relation=kind,
                    memory_id=memory_id,
                    statement=row["statement"],
                    status=row["status"],
                    revision=int(row["revision"]),
                )
            )
        out.append(msgspec.structs.replace(hit, related=tuple(related)) if related else hit)
    return out


def _read(canonical: RelatedRows, memory_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    keys = ("memory_id", "tenant", "principal", "scope_id", "statement", "status", "revision")
    if not isinstance(canonical, CanonicalMemory):
        with canonical.lock:
            found = {memory_id: canonical.row(memory_id) for memory_id in memory_ids}
        return {m: {k: row[k] for k in keys} for m, row in found.items() if row is not None}
    with canonical.lock:
        rows = canonical.conn.execute(
            "SELECT memory_id, tenant, principal, scope_id, statement, status, revision "
            "FROM canonical_memory WHERE memory_id IN (SELECT unnest(?::VARCHAR[]))",
            [list(memory_ids)],
        ).fetchall()
    return {str(r[0]): dict(zip(keys, r, strict=True)) for r in rows}
