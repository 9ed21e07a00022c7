"""Admission and use: which memory revisions entered a turn's context, which were used."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any
from uuid import UUID

import msgspec

from memory_ledger.commands.canonical.boundary import DecisionReads, memory_of
from memory_ledger.commands.errors import NotAdmittedError, UnknownMemoryError
from memory_ledger.commands.session.stream import SessionStream, check_turn_id
from memory_ledger.ledger.errors import InvalidArgumentTypeError
from memory_ledger.ledger.events import (
    AdmissionRevoked,
    LedgerEvent,
    MemoryAdmitted,
    MemoryUsed,
)

__all__ = ["AdmissionReport", "SessionAdmission"]


class AdmissionReport(msgspec.Struct, frozen=True, kw_only=True):
    """What ``admit`` recorded: admitted revisions, revocations, and skipped items."""

    admitted: tuple[tuple[UUID, int], ...]
    revoked: tuple[tuple[UUID, int], ...]
    skipped: tuple[str, ...]
    position: int


class SessionAdmission:
    """MemoryAdmitted / AdmissionRevoked / MemoryUsed records of a session's turns.

    :param stream: the session's stream.
    """

    def __init__(self, stream: SessionStream) -> None:
        self.stream = stream

    def admit(self, turn_id: int, items: Sequence[Any]) -> AdmissionReport:
        """Record MemoryAdmitted for the memory items selected into a turn's context, and
        AdmissionRevoked for any admission of the turn whose revision is no longer the
        active one (before the model call).

        ``items``: RecallHit, context items with ``memory_id``/``revision``, or
        ``(memory_id, revision)`` pairs. Session facts (no revision) are skipped: only
        canonical memory is admitted. The memories' states are read from the ledger and the
        records appended under their append condition (``commands.canonical.boundary``).

        :raises UnknownMemoryError: an item names no memory of this session's namespace (an
            id of another namespace gets exactly this error), or (``not_a_memory_id``) its
            memory id is not a UUID; nothing is recorded.
        """
        self.stream.check_open()
        check_turn_id(turn_id)
        if isinstance(items, str | bytes) or not isinstance(items, Iterable):
            msg = f"items must be a sequence of admitted items, got {type(items).__name__}"
            raise InvalidArgumentTypeError(msg, parameter="items", reason_code="not_a_sequence")
        wanted: list[tuple[UUID, int, int]] = []
        skipped: list[str] = []
        for entry in items:
            if isinstance(entry, tuple):
                mid, revision, tokens = entry[0], entry[1], 0
            else:
                mid = getattr(entry, "memory_id", None)
                revision = getattr(entry, "revision", None)
                text = getattr(entry, "statement", None) or getattr(entry, "text", "") or ""
                tokens = self.stream.token_counter(text)
            if mid is None or revision is None:
                skipped.append(str(mid))
                continue
            try:
                memory = UUID(str(mid))
            except ValueError:
                msg = f"{str(mid)[:40]!r} is not a memory id"
                raise UnknownMemoryError(msg, "not_a_memory_id") from None
            wanted.append((memory, int(revision), tokens))
        admitted: list[tuple[UUID, int]] = []
        revoked: list[tuple[UUID, int]] = []

        def plan(reads: DecisionReads) -> list[LedgerEvent]:
            admitted.clear()
            revoked.clear()
            # The namespace first: an id of another namespace is an unknown id (no event).
            for mid, _, _ in wanted:
                if reads.memory(mid) is None:
                    raise UnknownMemoryError(str(mid))
            self.stream.start_plan()
            events: list[LedgerEvent] = []

            def state_of(mid: UUID) -> tuple[int, bool]:
                state = reads.memory(mid)
                return (state.version, state.retrievable) if state else (0, False)

            for mid, revision, tokens in wanted:
                existing = self.stream.state.admissions.get((turn_id, mid))
                if existing is None or existing.revision != revision or existing.revoked:
                    events.append(
                        MemoryAdmitted(
                            **self.stream.envelope(),
                            turn_id=turn_id,
                            memory_id=mid,
                            revision=revision,
                            estimated_tokens=tokens,
                        )
                    )
                    admitted.append((mid, revision))
            check = {(m, r) for m, r, _ in wanted}
            check |= {
                (a.memory_id, a.revision)
                for (t, _), a in self.stream.state.admissions.items()
                if t == turn_id and not a.revoked
            }
            for mid, revision in sorted(check, key=lambda p: (str(p[0]), p[1])):
                version, retrievable = state_of(mid)
                if not retrievable or version != revision:
                    events.append(
                        AdmissionRevoked(
                            **self.stream.envelope(),
                            turn_id=turn_id,
                            memory_id=mid,
                            revision=revision,
                            reason="inactive" if not retrievable else "stale_revision",
                        )
                    )
                    revoked.append((mid, revision))
            return events

        positions = self.stream.append_decision(plan)
        return AdmissionReport(
            admitted=tuple(admitted),
            revoked=tuple(revoked),
            skipped=tuple(skipped),
            position=positions[-1] if positions else 0,
        )

    def record_use(self, turn_id: int, memory_id: UUID | str) -> int:
        """Record that an admitted memory was actually used in a turn; return the position.

        :raises UnknownMemoryError: no memory of this session's namespace has that id (an
            id of another namespace gets exactly this error).
        :raises NotAdmittedError: the memory has no live admission in that turn.
        """
        self.stream.check_open()
        check_turn_id(turn_id)
        try:
            mid = UUID(str(memory_id))
        except ValueError:
            raise UnknownMemoryError(repr(str(memory_id)[:40]), "not_a_memory_id") from None
        if memory_of(self.stream.engine, self.stream.namespace, mid) is None:
            raise UnknownMemoryError(str(mid))
        admission = self.stream.refresh().admissions.get((turn_id, mid))
        if admission is None or admission.revoked:
            msg = f"memory {mid} has no live admission in turn {turn_id}"
            raise NotAdmittedError(msg)

        def plan() -> list[LedgerEvent]:
            self.stream.start_plan()
            return [
                MemoryUsed(
                    **self.stream.envelope(),
                    turn_id=turn_id,
                    memory_id=mid,
                    revision=admission.revision,
                )
            ]

        return self.stream.append_once(plan)[-1]
