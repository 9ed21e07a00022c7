"""A turn's transcript is capped (``memory.max_transcript_bytes``, default 1 MiB of UTF-8):
a larger one is refused with ``TranscriptTooLargeError`` naming its size and the limit,
before anything is written; the cap is configurable in ``[memory]`` and per session."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.config import ConfigError, MemoryConfig, load_config
from memory_ledger.commands.errors import InvalidArgumentError, TranscriptTooLargeError
from memory_ledger.replay.cli.app import app

NS = Namespace("acme", "alice", "assistant")
MIB = 1024 * 1024


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    with MemoryEngine.open(tmp_path / "store", sync=False, index_in_background=False) as opened:
        yield opened


def test_the_default_cap_is_one_mebibyte(engine: MemoryEngine) -> None:
    assert MemoryConfig().max_transcript_bytes == MIB
    session = engine.session(NS, "s1")
    head = engine.head
    with pytest.raises(TranscriptTooLargeError) as raised:
        session.observe_final_transcript(1, "user: " + "a" * MIB)
    error = raised.value
    assert isinstance(error, InvalidArgumentError) and error.parameter == "transcript"
    assert error.reason_code == "transcript_too_large"
    assert (error.size, error.limit) == (MIB + 6, MIB)
    assert f"{MIB + 6:,} bytes" in str(error) and f"limit of {MIB:,} bytes" in str(error)
    assert "max_transcript_bytes" in str(error)
    assert engine.head == head
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.size, copy.limit, copy.reason_code) == (MIB + 6, MIB, "transcript_too_large")
    session.observe_final_transcript(1, "user: I like green tea.")  # the session still works
    assert engine.head > head


def test_the_cap_counts_utf8_bytes_and_is_configurable(engine: MemoryEngine) -> None:
    session = engine.session(NS, "s1", max_transcript_bytes=100)
    head = engine.head
    with pytest.raises(TranscriptTooLargeError, match="102 bytes") as raised:
        session.observe_final_transcript(1, "é" * 51)  # 51 characters, 102 bytes
    assert raised.value.limit == 100
    assert engine.head == head
    session.observe_final_transcript(1, "u" * 100)  # exactly the limit is fine
    assert engine.head > head


def test_the_cap_is_a_memory_key(tmp_path: Path) -> None:
    toml = tmp_path / "memory-ledger.toml"
    toml.write_text("[memory]\nmax_transcript_bytes = 2048\n", encoding="utf-8")
    assert load_config(toml).max_transcript_bytes == 2048
    with pytest.raises(ConfigError, match="max_transcript_bytes must be positive"):
        MemoryConfig(max_transcript_bytes=0)


def test_run_names_the_line_of_a_transcript_over_the_cap(tmp_path: Path) -> None:
    toml = tmp_path / "memory-ledger.toml"
    toml.write_text("[memory]\nmax_transcript_bytes = 64\n", encoding="utf-8")
    script = tmp_path / "big.jsonl"
    steps = [
        {
            "op": "open",
            "session": "s1",
            "namespace": {"tenant": "t", "principal": "p", "scope_id": "s"},
        },
        {"op": "turn", "session": "s1", "turn": 1, "transcript": "user: " + "x" * 100},
    ]
    script.write_text("".join(json.dumps(s) + "\n" for s in steps), encoding="utf-8")
    result = CliRunner().invoke(
        app, ["--config", str(toml), "run", str(script), "--store", str(tmp_path / "store")]
    )
    assert result.exit_code != 0 and "Traceback" not in result.output
    assert "line 2" in result.stderr and "106 bytes" in result.stderr
    assert "limit of 64 bytes" in result.stderr
