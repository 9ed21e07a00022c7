"""The word-target property (issue 34 item 1) through the engine API, fast profile: over
generated people, attributes and values, a correction about one person never supersedes
another person's memory and supersedes the same person's attribute; a forget by a
description forgets only a memory holding every content word of it. The long profile is
``python -m benchmarks word_targets`` (it prints how many examples it tried)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings

from benchmarks.word_targets import Example, check_example, worlds
from memory_ledger.commands import MemoryEngine


def test_word_targets_never_touch_another_subjects_memory(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "store") as engine:
        tried: list[Example] = []

        @settings(
            max_examples=20,
            deadline=None,
            database=None,
            suppress_health_check=[HealthCheck.too_slow],
        )
        @given(worlds())
        def prop(example: Example) -> None:
            tried.append(example)
            check_example(engine, example)

        prop()
        assert tried
