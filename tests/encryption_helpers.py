"""Helpers of the encryption-at-rest tests (issue #16): LoCoMo ingestion, a frozen clock,
raw file scans and snapshots of a store folder."""

from __future__ import annotations

import contextlib
import hashlib
import re
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger.ids import Namespace
from memory_ledger.replay.scripts.locomo import convert_sample, find_sample, load_samples
from memory_ledger.replay.scripts.script import RunReport, parse_script, run_script

ERASED_SAMPLE = "conv-26"
KEPT_SAMPLE = "conv-30"
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is
    it its itself just me more most my myself no nor not now of off on once only or other our
    ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself
    yourselves really something anything everything actually definitely absolutely wonderful
    amazing awesome beautiful thanks thank""".split()
)


def locomo_namespace(sample_id: str) -> Namespace:
    """The namespace the LoCoMo converter gives a sample (docs/design.md)."""
    return Namespace("locomo", sample_id, "conversation")


def script_steps(data: Path, sample_id: str) -> list[tuple[int, Any]]:
    """The parsed session script of one LoCoMo sample (what ``memory-ledger run`` reads)."""
    converted = convert_sample(find_sample(load_samples(data), sample_id))
    import msgspec

    lines = [msgspec.json.encode(step) for step in converted.steps]
    return parse_script(lines)


def ingest(engine: MemoryEngine, data: Path, sample_id: str) -> RunReport:
    """Run a sample's session script into ``engine`` (the CLI ``run`` path)."""
    return run_script(engine, script_steps(data, sample_id))


def transcripts_of(data: Path, sample_id: str) -> list[str]:
    """Every dialogue turn's transcript text of a sample."""
    converted = convert_sample(find_sample(load_samples(data), sample_id))
    return [step["transcript"] for step in converted.steps if step["op"] == "turn"]


def distinctive_words(data: Path, sample_id: str, other: str, count: int = 20) -> list[str]:
    """``count`` words of at least 9 letters that the sample's transcripts use and the
    ``other`` sample's never do (stopwords out): most frequent first, then alphabetical."""
    word = re.compile(r"[A-Za-z]{9,}")
    mine = Counter(w.lower() for t in transcripts_of(data, sample_id) for w in word.findall(t))
    theirs = {w.lower() for t in transcripts_of(data, other) for w in word.findall(t)}
    ranked = sorted(
        (w for w in mine if w not in theirs and w not in STOPWORDS),
        key=lambda w: (-mine[w], w),
    )
    return ranked[:count]


def files_under(*folders: Path) -> list[Path]:
    return sorted(
        p for folder in folders if folder.exists() for p in folder.rglob("*") if p.is_file()
    )


def words_found(words: list[str], *folders: Path) -> dict[str, list[str]]:
    """Which of ``words`` occur (any letter case: as written, lower, capitalized, upper) in
    the raw bytes of which files under ``folders``."""
    found: dict[str, list[str]] = {}
    contents = {p: p.read_bytes() for p in files_under(*folders)}
    for w in words:
        forms = {w, w.lower(), w.capitalize(), w.upper()}
        where = [str(p) for p, data in contents.items() if any(f.encode() in data for f in forms)]
        if where:
            found[w] = where
    return found


def bytes_found(needle: bytes, *folders: Path) -> list[str]:
    """Files under ``folders`` whose raw bytes hold ``needle``."""
    return [str(p) for p in files_under(*folders) if needle in p.read_bytes()]


def snapshot(folder: Path) -> dict[str, str]:
    """``{relative path: sha256 of the bytes}`` of every file under ``folder``."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in files_under(folder)
    }


class FrozenClock:
    """A clock for the session commands that steps 1 ms per call from 2024-01-01, so two
    stores fed the same commands record the same times (their rows compare equal)."""

    def __init__(self) -> None:
        self.now = datetime(2024, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        self.now += timedelta(milliseconds=1)
        return self.now

    def reset(self) -> None:
        self.now = datetime(2024, 1, 1, tzinfo=UTC)


@contextlib.contextmanager
def frozen_clock() -> Iterator[FrozenClock]:
    """Patch ``utc_now`` in every loaded ``memory_ledger.commands`` module."""
    clock = FrozenClock()
    with pytest.MonkeyPatch.context() as patch:
        for name, module in list(sys.modules.items()):
            if name.startswith("memory_ledger.commands") and hasattr(module, "utc_now"):
                patch.setattr(module, "utc_now", clock)
        yield clock
