"""An output path that cannot be written is a typed error naming it (issue 34 follow-up):
``export``, ``backup``, ``restore`` and ``replay --out`` under a path whose parent is a file
raised a raw ``FileNotFoundError``/``NotADirectoryError`` naming a hidden staging folder
(``.x.<random>.partial``) before, or a misleading "disk full" for ``replay --out``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import memory_ledger
from memory_ledger import MemoryLedgerError
from memory_ledger.replay import (
    OutputUnwritableError,
    backup_store,
    export_store,
    rebuild_projections,
    restore_store,
)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[memory_ledger.MemoryEngine]:
    folder = tmp_path_factory.mktemp("outputs") / "store"
    with memory_ledger.open(folder) as opened:
        opened.remember(memory_ledger.Namespace("t", "u", "s"), "Alice lives in Lisbon.")
        yield opened


def _under_a_file(tmp_path: Path) -> Path:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    return blocker / "out"


@pytest.mark.parametrize(
    "write",
    [
        lambda e, out: export_store(e, out, fmt="jsonl"),
        lambda e, out: backup_store(e, out),
        lambda e, out: rebuild_projections(e, out=out / "x.duckdb"),
    ],
    ids=["export", "backup", "replay"],
)
def test_unwritable_output_is_typed_and_named(
    engine: memory_ledger.MemoryEngine,
    tmp_path: Path,
    write: Callable[[memory_ledger.MemoryEngine, Path], Any],
) -> None:
    out = _under_a_file(tmp_path)
    with pytest.raises(OutputUnwritableError) as caught:
        write(engine, out)
    assert isinstance(caught.value, MemoryLedgerError)
    assert isinstance(caught.value, OSError)
    assert caught.value.reason_code == "output_not_writable"
    assert str(out) in str(caught.value)
    assert ".partial" not in str(caught.value)
    assert not out.exists()


def test_restore_into_unwritable_folder_is_typed(
    engine: memory_ledger.MemoryEngine, tmp_path: Path
) -> None:
    backup_store(engine, tmp_path / "backup")
    out = _under_a_file(tmp_path)
    with pytest.raises(OutputUnwritableError) as caught:
        restore_store(tmp_path / "backup", out)
    assert str(out) in str(caught.value)
