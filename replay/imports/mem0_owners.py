"""Who each mem0 memory belongs to: ``user_id``, ``agent_id`` and ``run_id`` from mem0's
local vector store.

mem0's history database does not say whose a memory is; the payload of its point in the
vector store does (mem0 writes ``user_id``, ``agent_id`` and ``run_id`` there). This reads a
local Qdrant store, mem0's default (``vector_store: {provider: qdrant, config: {path: ...}}``),
through ``qdrant-client`` (the ``mem0`` extra; imported on use). A deleted memory has no
point any more: its owner is unknown, and the import places it by the default namespace.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec

from memory_ledger.replay.imports.errors import Mem0VectorStoreError

__all__ = ["Mem0Owner", "read_qdrant_owners"]


class Mem0Owner(msgspec.Struct, frozen=True, kw_only=True):
    """The ids mem0 keeps with a memory (each None when absent)."""

    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None


def _id(payload: dict[str, Any], key: str) -> str | None:
    value = payload.get(key)
    return str(value) if value not in (None, "") else None


def read_qdrant_owners(path: str | Path, collection: str = "mem0") -> dict[str, Mem0Owner]:
    """The owner of every memory in the local Qdrant store at ``path`` (mem0 memory id ->
    :class:`Mem0Owner`), read-only.

    :raises Mem0VectorStoreError: no folder at ``path``, no such collection, the store is
        held by a running process, or it cannot be read (``mem0_vector_store_unreadable``);
        ``qdrant-client`` is not installed (``mem0_extra_not_installed``).
    """
    folder = Path(path)
    if not folder.is_dir():
        msg = f"no local vector store folder at {str(folder)!r}"
        raise Mem0VectorStoreError(msg, path=str(folder))
    try:
        from qdrant_client import QdrantClient
    except ImportError:
        msg = "reading mem0's vector store needs qdrant-client: pip install 'memory-ledger[mem0]'"
        raise Mem0VectorStoreError(
            msg, path=str(folder), reason_code="mem0_extra_not_installed"
        ) from None
    owners: dict[str, Mem0Owner] = {}
    client = None
    try:
        client = QdrantClient(path=str(folder))
        if not client.collection_exists(collection):
            msg = f"the vector store at {str(folder)!r} has no collection {collection!r}"
            raise Mem0VectorStoreError(msg, path=str(folder))
        offset: Any = None
        while True:
            points, offset = client.scroll(
                collection, limit=1000, offset=offset, with_payload=True, with_vectors=False
            )
            for point in points:
                payload = dict(point.payload or {})
                owners[str(point.id)] = Mem0Owner(
                    user_id=_id(payload, "user_id"),
                    agent_id=_id(payload, "agent_id"),
                    run_id=_id(payload, "run_id"),
                )
            if offset is None:
                break
    except Mem0VectorStoreError:
        raise
    except Exception as e:  # the client's own errors (a lock held, a damaged file): typed
        msg = f"the vector store at {str(folder)!r} cannot be read ({type(e).__name__})"
        raise Mem0VectorStoreError(msg, path=str(folder)) from None
    finally:
        if client is not None:
            client.close()
    return owners
