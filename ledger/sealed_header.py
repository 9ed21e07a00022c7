"""What a recorder reads of a sealed state without decrypting it (and without importing the
cryptography library): the data key id in its clear header
(:mod:`memory_ledger.ledger.sealing` defines the envelope: ``0xFF``, the envelope version,
then the 16-byte key id)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["sealed_key_ids"]


def sealed_key_ids(states: Iterable[bytes]) -> set[bytes]:
    """The data key ids (16 bytes each) named by the sealed ones of ``states`` (clear states
    name none): what an append checks against the keys an erasure destroyed."""
    return {state[2:18] for state in states if state[:1] == b"\xff"}
