"""Checking the plain appends of one group commit together (:mod:`memory_ledger.ledger.lmdb`).

A plain append (no tracking record, no append condition) is refused only when one of its
stream keys (stream id and version) is already recorded. Run one after the other in a shared
transaction, each append sees the keys of the appends accepted before it; checked together,
the same outcome follows from the keys found in the store before the group and the keys of
the requests accepted so far, in request order.
"""

from __future__ import annotations

from typing import Any

from memory_ledger.ledger.errors import LedgerIntegrityError
from memory_ledger.ledger.group_commit import WriteRequest

__all__ = ["accept_in_order", "recorded_key"]


def recorded_key(rows: list[tuple[bytes, bytes]], existing: set[bytes]) -> bytes | None:
    """The first stream key of ``rows`` (``(key, body)`` pairs) that is in ``existing`` or
    repeats within ``rows``; None when all are new."""
    seen: set[bytes] = set()
    for key, _ in rows:
        if key in seen or key in existing:
            return key
        seen.add(key)
    return None


def accept_in_order(
    requests: list[WriteRequest[Any]], existing: set[bytes]
) -> list[WriteRequest[Any]]:
    """The requests (``payload[0]``: their rows) that would be accepted one after the other,
    in order, given the stream keys ``existing`` before them; each refused one gets the
    :class:`LedgerIntegrityError` it would have had alone (``existing`` grows by the keys of
    the accepted ones)."""
    accepted: list[WriteRequest[Any]] = []
    for request in requests:
        rows = request.payload[0]
        key = recorded_key(rows, existing)
        if key is not None:
            msg = f"Stored event already recorded: {key.hex()}"
            request.result, request.error = None, LedgerIntegrityError(msg)
            continue
        existing.update(key for key, _ in rows)
        accepted.append(request)
    return accepted
