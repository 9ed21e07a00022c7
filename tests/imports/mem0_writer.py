"""Write a mem0 store with mem0 itself (``mem0ai``), in a child process: a history database
and a local Qdrant vector store, from a script of adds, updates and deletes.

    python -m tests.imports.mem0_writer SCRIPT.json OUT_DIR

``SCRIPT.json`` is a list of steps: ``{"op": "add", "key": K, "user": U, "text": T,
"created_at": ISO?}``, ``{"op": "update", "key": K, "text": T}``, ``{"op": "delete", "key":
K}`` (``key`` names a memory in the script). mem0 runs with ``infer=False`` (no model call:
each message is stored as it is), a deterministic embedder (a digest of the text, 8
dimensions) put in place of its OpenAI one after construction (no key is used, no network),
and telemetry off. It writes ``OUT_DIR/history.db``, ``OUT_DIR/qdrant/`` and
``OUT_DIR/expected.json``: ``ids`` (key -> mem0 memory id), ``users`` (user -> sorted
texts of mem0's ``get_all``) and ``history`` (mem0 memory id -> mem0's ``history()``).

A child process, because mem0 reads its settings from the environment at import time
(``MEM0_TELEMETRY``, ``MEM0_DIR``) and the test process must stay as it is.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any


class DigestEmbedder:
    """A deterministic stand-in for mem0's embedder: 8 numbers from the text's SHA-256."""

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        digest = hashlib.sha256(text.encode()).digest()
        return [(b + 1) / 256 for b in digest[:8]]


def main(script_path: str, out: str) -> None:
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["MEM0_DIR"] = out
    from mem0 import Memory

    config = {
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "path": f"{out}/qdrant",
                "on_disk": True,
                "collection_name": "mem0",
                "embedding_model_dims": 8,
            },
        },
        "embedder": {"provider": "openai", "config": {"api_key": "unused", "embedding_dims": 8}},
        "llm": {"provider": "openai", "config": {"api_key": "unused"}},
        "history_db_path": f"{out}/history.db",
    }
    memory = Memory.from_config(config)
    memory.embedding_model = DigestEmbedder()
    ids: dict[str, str] = {}
    users: set[str] = set()
    for step in json.loads(Path(script_path).read_text()):
        if step["op"] == "add":
            metadata = {"created_at": step["created_at"]} if step.get("created_at") else None
            result = memory.add(
                [{"role": "user", "content": step["text"]}],
                user_id=step["user"],
                infer=False,
                metadata=metadata,
            )
            ids[step["key"]] = result["results"][0]["id"]
            users.add(step["user"])
        elif step["op"] == "update":
            memory.update(ids[step["key"]], step["text"])
        elif step["op"] == "delete":
            memory.delete(ids[step["key"]])
    expected: dict[str, Any] = {
        "ids": ids,
        "users": {
            user: sorted(
                m["memory"]
                for m in memory.get_all(filters={"user_id": user}, top_k=1000)["results"]
            )
            for user in sorted(users)
        },
        "history": {mid: memory.history(mid) for mid in ids.values()},
    }
    Path(out, "expected.json").write_text(json.dumps(expected, default=str))
    memory.vector_store.client.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
