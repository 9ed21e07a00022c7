"""Named fault points for crash and fault-injection tests: off by default, free when off.

The write path calls :func:`fault` at a few named points. Nothing is installed outside
tests, and then a call costs one function call and one empty-dict check. A test installs a
callable under a point's name in :data:`FAULTS` (in the process that is meant to fail); the
callable may raise (an in-process fault), sleep until the process is SIGKILLed (a crash at
that exact point), or count calls. Library code never writes to :data:`FAULTS` and no
environment variable enables it.

Points (:data:`POINTS`):

- ``ledger.put``: inside an LMDB write transaction of the log, right after one event's
  records were put (before the next event's; after the last one too);
- ``ledger.commit``: inside an LMDB write transaction, every put done, before the commit;
- ``session.appended``: a session command's events are committed (durable) and its caller
  has not seen them yet: the session state, read buffer and projections are not updated;
- ``session.finish_planned``: ``finish()`` planned its events and has not appended them;
- ``decision.planned``: a decision about canonical memory (``commands.canonical.boundary``) read the
  ledger and planned its events, and has not appended them (a concurrent writer may
  overtake it here: its append condition then fails and it decides again);
- ``projections.commit``: inside a projection batch's DuckDB transaction, its rows and its
  tracking position written, before COMMIT;
- ``vectors.commit``: inside the DuckDB transaction that writes a batch of
  ``memory_vectors`` rows, the rows written, before COMMIT;
- ``keys.replace``: the key store's new file is written and fsynced under its temporary
  name, and has not replaced the old one (``ledger.key_store``);
- ``recall_index.write``: the persisted recall index's temporary file holds its header and
  first namespace's blob, not the rest (``commands.recall.index_file``);
- ``recall_index.replace``: that file is complete and fsynced under its temporary name and
  has not replaced the old one;
- ``erasure.keys_destroyed``: an erasure's commit point passed (the key store no longer
  holds the keys) and its ``NamespaceErased`` record is not appended yet.
- ``projections.rewrite``: a projection file that rows were deleted from (an erasure) is
  copied to a fresh file, fsynced, that has not replaced it yet (``projections.store``).
- ``rekey.swap``: the id format step's new ledger is verified and its swap journal written,
  and nothing was swapped yet (``replay.audit.rekey``);
- ``rekey.swap_part``: that step moved the old ``ledger/`` aside and not the new one in.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["FAULTS", "POINTS", "fault"]

POINTS = (
    "ledger.put",
    "ledger.commit",
    "session.appended",
    "session.finish_planned",
    "decision.planned",
    "projections.commit",
    "vectors.commit",
    "keys.replace",
    "erasure.keys_destroyed",
    "recall_index.write",
    "recall_index.replace",
    "projections.rewrite",
    "rekey.swap",
    "rekey.swap_part",
)
"""Every fault point the code calls."""

FAULTS: dict[str, Callable[[], None]] = {}
"""Installed faults by point name (tests only; empty otherwise)."""


def fault(name: str) -> None:
    """Run the fault installed at point ``name``, if any (nothing is, outside tests)."""
    if FAULTS:
        hook = FAULTS.get(name)
        if hook is not None:
            hook()
