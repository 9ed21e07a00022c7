"""Every file the package writes goes through the one place that knows the erased
namespaces (``projections/derived.py``, issue 34 item 2), or is listed here with the
reason it holds no namespace's content in clear.

The test greps the package's source for file writes (``open`` for writing, ``write_bytes``,
``os.replace``, ``np.save``, DuckDB files and ``COPY ... TO``, LMDB copies, ...). A module
that writes a derived file must import ``memory_ledger.projections.derived`` (and use its
``write_atomic`` / ``ErasedNamespaces``); a new writer fails this test until it does, or
until it is added to :data:`HOLDS_NO_CONTENT` with its reason.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("commands", "ledger", "projections", "replay")

WRITE = re.compile(
    r"""open\([^)]*["'](?:w|a|x|r\+)b?\+?["']"""  # open(..., "wb") and friends
    r"""|\.open\(["'](?:w|a|x)"""  # Path.open("wb")
    r"|write_bytes\(|write_text\(|os\.replace\(|os\.rename\(|shutil\.(?:copy|move)|copytree"
    r"|np\.save|\.tofile\(|ACCESS_WRITE|mkstemp|NamedTemporaryFile|O_CREAT|ParquetWriter"
    r"|duckdb\.connect\([^)]|COPY .* TO |ATTACH |env\.copy\("
)

THROUGH_DERIVED = {
    "projections/derived.py": "the one place: write_atomic, ErasedNamespaces, slot stamps",
    "projections/store.py": "DuckDB slot files: scrubbed of erased namespaces (derived) when "
    "opened and closed, rewritten after, stamped; stale idle slots deleted",
    "commands/workspace/vector_cache.py": "workspace vectors (no text) through write_atomic",
    "replay/audit/backup.py": "copies the ledger (sealed payloads, digests) and the key store "
    "verbatim; its manifest through write_atomic; nothing derived is copied",
    "replay/audit/export.py": "read models scrubbed through derived before DuckDB's COPY; events "
    "of erased namespaces are written as erased records; manifest through write_atomic",
}
"""Modules that write derived files and must import ``projections.derived``."""

HOLDS_NO_CONTENT = {
    "ledger/key_store.py": "the key store: wrapped keys and namespace digests only",
    "replay/cli/erase.py": "a new master key file (random bytes)",
    "replay/cli/receipts.py": "a new signing key pair (random bytes)",
    "replay/audit/rebuild.py": "a writability probe (an empty file, removed); the rebuilt "
    "DuckDB file is written by projections/store.py given the erased namespaces",
    "replay/audit/receipts.py": "an erasure receipt: keyed digests, positions, key ids, no name",
    "replay/scripts/locomo.py": "the LoCoMo converter's output script, outside any store",
    "replay/conformance/mutants.py": "the kit's deliberately broken test stores: their own "
    "files, never an engine store's",
    "replay/conformance/plugin.py": "the kit's report of test outcomes (names and results)",
    "replay/audit/stats.py": "opens projection files read-only",
    "replay/audit/rekey.py": "the id format step's swap journal (a fixed sentence); the new "
    "ledger goes through the LMDB recorder, the read models are rebuilt by the engine",
}
"""Modules that write files holding no namespace's content in clear (the reason why)."""


def _writers() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            lines = [
                f"{number}: {line.strip()}"
                for number, line in enumerate(path.read_text().splitlines(), start=1)
                if WRITE.search(line) and not line.lstrip().startswith("#")
            ]
            if lines:
                found[str(path.relative_to(REPO))] = lines
    return found


def test_every_file_writer_goes_through_derived_or_says_why_it_need_not() -> None:
    writers = _writers()
    unknown = {
        name: lines
        for name, lines in writers.items()
        if name not in THROUGH_DERIVED and name not in HOLDS_NO_CONTENT
    }
    assert not unknown, (
        "these modules write files outside projections/derived.py: write derived files "
        f"through it (write_atomic, ErasedNamespaces), or list them here with why: {unknown}"
    )


def test_derived_file_writers_use_the_derived_module() -> None:
    for name in THROUGH_DERIVED:
        if name == "projections/derived.py":
            continue
        source = (REPO / name).read_text()
        assert "memory_ledger.projections.derived import" in source, name


def test_the_lists_name_only_modules_that_still_write() -> None:
    writers = _writers()
    stale = sorted((set(THROUGH_DERIVED) | set(HOLDS_NO_CONTENT)) - set(writers))
    assert not stale, f"listed but writing no file any more (remove them): {stale}"
