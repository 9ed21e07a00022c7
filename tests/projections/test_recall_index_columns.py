"""The recall index reads only ``DOC_COLUMNS`` of ``canonical_memory`` (fewer Python objects
per row on an index build): they must hold every column its documents are made of, or a
field added to :class:`MemoryDoc` would silently stay empty."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.recall import MemoryDoc
from memory_ledger.commands.recall.index import DOC_COLUMNS, NamespaceRecallIndex


class ReadKeys(dict[str, Any]):
    """A row that remembers which keys were read (``[]`` and ``get``)."""

    def __init__(self, row: dict[str, Any]) -> None:
        super().__init__(row)
        self.read: set[str] = set()

    def __getitem__(self, key: str) -> Any:
        self.read.add(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self.read.add(key)
        return super().get(key, default)


def test_doc_columns_hold_every_column_a_document_reads(tmp_path: Path) -> None:
    ns = Namespace("acme", "alice", "assistant")
    with MemoryEngine.open(tmp_path / "store") as engine:
        old = engine.remember(ns, "Alice drinks green tea.")
        engine.correct(ns, "Alice drinks black tea.", target=old.memory_id)
        engine.catch_up()
        (row,) = [
            r
            for r in engine.canonical.active_memories(ns.tenant, ns.principal, ns.scope_id)
            if r["statement"] == "Alice drinks black tea."
        ]
        watched = ReadKeys(row)
        MemoryDoc.from_row(watched)
        index = NamespaceRecallIndex(engine.canonical)
        index._doc(watched)
    assert watched.read <= set(DOC_COLUMNS), sorted(watched.read - set(DOC_COLUMNS))
    assert set(DOC_COLUMNS) <= set(row)
    # The columns the index reads carry the relations (not empty defaults).
    doc = MemoryDoc.from_row({column: row[column] for column in DOC_COLUMNS})
    assert doc.supersedes == (str(old.memory_id),)
