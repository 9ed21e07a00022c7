"""Smoke test: every benchmark runs at its tiny size, prints its table and writes its JSON.

Figures go to a temporary folder (``BENCH_RESULTS_DIR``), never to ``results/``. The
bm25s baseline (LoCoMo) and the matplotlib plots (recall, growth, million) are optional
parts: the benchmarks skip them, saying so, where those packages are absent (CI installs
only the ``test`` extra). Benchmarks that read LoCoMo are skipped where the data file is absent.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from benchmarks.__main__ import BENCHMARKS
from benchmarks.run_all import NEEDS_LOCOMO, quick_args
from benchmarks.run_all import main as run_all
from tests.conftest import skip_without_locomo


def importable(name: str) -> bool:
    try:
        importlib.import_module(name)
    except ImportError:
        return False
    return True


HAS_MATPLOTLIB = importable("matplotlib")
HAS_BM25S = importable("bm25s")

# benchmark name -> the JSON file it writes
OUTPUTS = {
    "catchup": "catchup.json",
    "secrets": "secrets.json",
    "run": "locomo_run.json",
    "append": "append.json",
    "engine": "engine.json",
    "recall": "recall.json",
    "memory_map": "memory_map.json",
    "locomo": "locomo.json",
    "locomo-limits": "locomo_limits.json",
    "hybrid": "hybrid.json",
    "memory": "memory.json",
    "mcp": "mcp.json",
    "cli": "cli.json",
    "growth": "growth.json",
    "million": "million.json",
    "peers": "peers.json",
    "workspace": "workspace.json",
    "encryption": "encryption.json",
    "erasure_files": "erasure_files.json",
    "races": "races.json",
    "langgraph": "langgraph.json",
    "langgraph_async": "langgraph_async.json",
    "conformance": "conformance.json",
    "ann": "ann.json",
    "bm25": "bm25.json",
    "vectors_ack": "vectors_ack.json",
    "ui": "ui.json",
    "ui-forms": "ui_forms.json",
    "asof": "asof.json",
    "verify_flips": "verify_flips.json",
    "verify_file_flips": "verify_file_flips.json",
    "word_targets": "word_targets.json",
    "mem0_import": "mem0_import.json",
    "serving": "serving.json",
    "otel": "otel.json",
    "batch_cpu": "batch_cpu.json",
    "batch_floor": "batch_floor.json",
}


@pytest.fixture
def results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "results"
    monkeypatch.setenv("BENCH_RESULTS_DIR", str(folder))
    return folder


def test_every_benchmark_is_covered() -> None:
    assert set(BENCHMARKS) - {"all"} == set(OUTPUTS)


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_benchmark_quick(name: str, results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if name in NEEDS_LOCOMO:
        skip_without_locomo()
    module = importlib.import_module(BENCHMARKS[name])
    assert module.main(quick_args(name)) == 0
    out = capsys.readouterr().out
    written = results / OUTPUTS[name]
    assert f"figures written to {written}" in out
    payload = json.loads(written.read_text())
    assert payload["benchmark"] == written.stem
    assert payload["figures"]
    if name in ("recall", "growth", "million"):
        plot = results / {"recall": "recall_latency.png"}.get(name, f"{name}.png")
        if HAS_MATPLOTLIB:
            assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        else:
            assert "plot skipped" in out and not plot.exists()
    if name == "locomo":
        figures = payload["figures"]
        assert figures["questions"] > 0
        assert 0.0 <= figures["ours"]["all"]["recall@5"] <= figures["ceiling"]["all"]["recall@5"]
        assert ("bm25s" in figures) == HAS_BM25S
    if name == "encryption":
        figures = payload["figures"]
        for figure in ("append", "catchup"):
            assert figures[f"{figure}_clear_events_per_s"] > 0
            assert figures[f"{figure}_sealed_events_per_s"] > 0
        assert figures["recall_sealed_p50_ms"] > 0 and figures["recall_p50_sealed_over_clear"] > 0


def test_all_quick_runs_each_in_its_own_process(
    results: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import benchmarks.__main__ as runner

    monkeypatch.setattr(
        runner, "BENCHMARKS", {"memory_map": BENCHMARKS["memory_map"], "all": BENCHMARKS["all"]}
    )
    assert run_all(["--quick"]) == 0
    summary = json.loads((results / "all.json").read_text())["figures"]
    assert summary["quick"] is True
    assert summary["memory_map"]["status"] == "ok"
    assert (results / "memory_map.json").is_file()


def test_append_writers_quick(results: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``append --writers`` (group commit) at its tiny size: every writer count is reported."""
    module = importlib.import_module(BENCHMARKS["append"])
    assert module.main(["--writers", "1,2,4", "--quick"]) == 0
    out = capsys.readouterr().out
    written = results / "append_writers.json"
    assert f"figures written to {written}" in out
    figures = json.loads(written.read_text())["figures"]
    assert {"writers_1", "writers_2", "writers_4", "writers_8 (group commit off)"} <= set(figures)
    assert figures["writers_4"]["commands_per_s"] > 0
