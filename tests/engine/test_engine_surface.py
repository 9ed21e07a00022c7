"""Other modules use ``MemoryEngine``'s methods, never the collaborators it holds.

The engine keeps its ledger recorder, mapper, projection store, runner and read-model
helpers as attributes for its own use and for tests of those internals. Every other module
of the four packages and the benchmarks goes through the engine's documented methods
(``read_models``, ``read_records``, ``event_decoder``, ``lmdb_recorder``,
``retrievable_memories``, ...), so the engine can change what it holds without breaking them.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INTERNALS = (
    "factory",
    "recorder",
    "mapper",
    "projections",
    "runner",
    "canonical",
    "transcripts",
    "recall_index",
    "_read_lock",
)
REACH = re.compile(r"\bengine\.(" + "|".join(INTERNALS) + r")\b")

# Benchmarks that time one internal on purpose (the figure is about that internal).
ALLOWED = {
    ("benchmarks/recall.py", "recall_index"),  # the bare BM25 index
    ("benchmarks/growth.py", "recall_index"),  # which way the index opened (file or rebuild)
    ("benchmarks/memory_map.py", "canonical"),  # the renderer without its bounds
    ("benchmarks/engine.py", "recorder"),  # stopwatch around the condition check in finish()
}


def test_no_module_reaches_into_the_engine() -> None:
    reaches = []
    for folder in ("commands", "projections", "replay", "benchmarks", "examples"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            name = path.relative_to(ROOT).as_posix()
            if name == "commands/engine/memory_engine.py":
                continue
            for number, line in enumerate(path.read_text().splitlines(), start=1):
                for match in REACH.finditer(line):
                    if (name, match.group(1)) not in ALLOWED:
                        reaches.append(f"{name}:{number}: {line.strip()}")
    assert not reaches, "use a MemoryEngine method instead:\n" + "\n".join(reaches)
