"""The stored-event batches the append benchmarks write (``append`` on LMDB and the other
recorders, ``append_postgres`` on PostgreSQL): one module both import, so neither imports the
other for them."""

from __future__ import annotations

from eventsourcing.persistence import JSONTranscoder, StoredEvent

from benchmarks.corpus import candidate_batches
from memory_ledger.ledger.mapper import MsgspecMapper

__all__ = ["BATCH_SIZES", "stored_batches"]

BATCH_SIZES = (1, 10, 100)
"""Events per append the benchmarks measure."""


def stored_batches(batch: int, count: int, tag: str) -> list[list[StoredEvent]]:
    """``count`` batches of ``batch`` stored events; each batch is one new stream."""
    mapper = MsgspecMapper(transcoder=JSONTranscoder())  # the transcoder is never used
    return [
        [mapper.to_stored_event(event) for event in events]
        for events in candidate_batches(batch, count, f"append/{tag}/{batch}")
    ]
