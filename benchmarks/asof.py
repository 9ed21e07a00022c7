"""The debugger's recall as of a new point, from memory_history vs the old fold (issue 35 item 4).

The store: the synthetic corpus of ``benchmarks.corpus`` in one namespace (appended as
MemoryActivated events with sync off, as ``python -m benchmarks ui`` builds it), then,
through the engine's public commands, a recorded session of 20 turns whose new values
supersede 20 memories, and 20 forgets: points between them differ. It is opened read-only
as ``memory-ledger ui`` opens it, and requests go through Starlette's in-process test
client (the app with its token gate, no socket: an upper bound of the server's time).

Measured:

- the first recall as of a point in the namespace: its BM25 index derived from a copy of
  the engine's live recall index (read from the persisted index the writer left, on the
  server's first use of it) by undoing the ``memory_history`` changes between the head and
  the point; and, the old first point in the same run, the index built from every memory
  retrievable then (one ``memory_history`` query and a build: ``recall_point`` without kept
  indexes, ``--build-samples``);
- recall as of a new point after that (``/recall?...&at=P``, P not asked before): cold
  (the index derived from the one kept at the first point: the changes between the two)
  and warm (the next query at P: the kept index), p50 over several points;
- the warm-up ``memory-ledger ui`` runs at start on a background thread (each namespace's
  index built at the head), and the first recall as of a point after it (derived);
- the baseline, in the same run and at the same size: the old path, a fold of the ledger
  up to P into fresh read models (``replay.as_of``) and its recall
  (``--baseline-samples`` folds; 0 leaves it out);
- another page (the namespace's first page of memories) requested again and again while
  an as-of recall readies a namespace's index (no point kept: the live index copied and
  the point's derived): its p50 beside
  the same page requested when nothing else runs (the old server held one lock around
  every page, so it waited for the whole fold).

Target (issue 35): under 1 s at 100,000 memories, and other pages answer meanwhile.
``--quick``: 2,000 memories.
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from pathlib import Path
from typing import Any

from benchmarks.corpus import BENCH_NAMESPACE, fill, item, memories, queries, scratch, variant
from benchmarks.results import median, print_table, save
from memory_ledger.commands import MemoryEngine
from memory_ledger.commands.extraction import RecordedExtractor

TARGET_S = 1.0
TOKEN = "bench-token"
NS = f"t={BENCH_NAMESPACE.tenant}&p={BENCH_NAMESPACE.principal}&s={BENCH_NAMESPACE.scope_id}"


def load() -> str:
    """The machine's 1-minute load average and core count."""
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (5 min {five:.2f}) on {os.cpu_count()} cores"


def build(folder: Path, size: int) -> tuple[int, list[int], list[str]]:
    """The store of ``size`` memories; its head, the points after each late change (new
    points to travel to), and the queries asked."""
    corpus = memories(size)
    points: list[int] = []
    with MemoryEngine.open(folder, sync=False) as engine:
        fill(engine, corpus)
        points.append(engine.head)
        extractor = RecordedExtractor()
        session = engine.session(BENCH_NAMESPACE, "bench-asof", extractor=extractor)
        for turn, m in enumerate(corpus[:20], start=1):  # new values: 20 supersessions
            extractor.provide(turn, [item(variant(m, turn), f"bench-asof:{turn}")])
            session.observe_final_transcript(turn, f"user: {variant(m, turn).statement}")
            points.append(engine.head)
        session.finish()
        for m in corpus[100:120]:  # 20 forgets
            engine.forget(BENCH_NAMESPACE, m.statement)
            points.append(engine.head)
        engine.catch_up()
        head = engine.head
    return head, points, queries(corpus, 64)


def _get(client: Any, path: str) -> tuple[float, str]:
    started = time.perf_counter()
    response = client.get(path)
    elapsed = time.perf_counter() - started
    if response.status_code != 200:
        msg = f"{path}: HTTP {response.status_code}"
        raise RuntimeError(msg)
    return elapsed, response.text


def measure(
    folder: Path, size: int, samples: int, baseline_samples: int, rounds: int, builds: int = 1
) -> dict[str, Any]:
    from starlette.testclient import TestClient

    from memory_ledger.projections.history import CanonicalMemoryAt
    from memory_ledger.replay import as_of, recall_point
    from memory_ledger.replay.audit.past_indexes import DerivedIndexes
    from memory_ledger.replay.ui import UiState, create_app, open_read_only

    started = time.perf_counter()
    head, points, asked = build(folder, size)
    figures: dict[str, Any] = {
        "memories": size,
        "head": head,
        "build_s": time.perf_counter() - started,
    }
    # new points, spread over the late changes (each a different set of memories)
    chosen = [points[(i * (len(points) - 1)) // max(1, samples - 1)] for i in range(samples)]
    chosen = list(dict.fromkeys(chosen))
    engine = open_read_only(folder)
    state = UiState(engine, TOKEN, kept_points=2)
    building = threading.Event()
    original = CanonicalMemoryAt.active_memories
    original_load = DerivedIndexes.load

    def signalling(canonical: CanonicalMemoryAt, *args: Any, **kwargs: Any) -> Any:
        building.set()  # a recall as of a point is building its index now
        return original(canonical, *args, **kwargs)

    def signalling_load(derived: DerivedIndexes, key: str) -> Any:
        building.set()  # a recall as of a point is deriving its index now
        return original_load(derived, key)

    try:
        with TestClient(create_app(state)) as client:
            _get(client, f"/?token={TOKEN}")
            page = f"/namespace?{NS}"
            idle = [_get(client, page)[0] for _ in range(max(5, samples))]
            first, _ = _get(client, f"/recall?{NS}&q={asked[0]}&at={chosen[0]}")
            figures["asof_first_s"] = first
            cold, warm = [], []
            for i, at in enumerate(chosen[1:], start=1):
                cold.append(_get(client, f"/recall?{NS}&q={asked[2 * i]}&at={at}")[0])
                warm.append(_get(client, f"/recall?{NS}&q={asked[2 * i + 1]}&at={at}")[0])
            figures["points"] = len(cold)
            figures["asof_cold_p50_s"] = median(cold)
            figures["asof_cold_max_s"] = max(cold)
            figures["asof_warm_p50_s"] = median(warm)
            # another page while an as-of recall builds a namespace's index (the longest)
            CanonicalMemoryAt.active_memories = signalling  # type: ignore[method-assign,assignment]
            DerivedIndexes.load = signalling_load  # type: ignore[method-assign]
            during: list[float] = []
            overlapped = 0
            try:
                for i, at in enumerate(chosen[:rounds]):
                    state.close()  # no point nor index kept: a full build again
                    building.clear()
                    done = threading.Event()
                    slow: list[float] = []

                    def ask(
                        at: int = at,
                        i: int = i,
                        slow: list[float] = slow,
                        done: threading.Event = done,
                    ) -> None:
                        slow.append(_get(client, f"/recall?{NS}&q={asked[40 + i]}&at={at}")[0])
                        done.set()

                    thread = threading.Thread(target=ask, daemon=True)
                    thread.start()
                    building.wait(60)
                    while not done.is_set():
                        elapsed, _ = _get(client, page)
                        if not done.is_set():
                            overlapped += 1
                            during.append(elapsed)
                    thread.join()
                    figures.setdefault("asof_build_while_paging_s", []).append(slow[0])
            finally:
                CanonicalMemoryAt.active_memories = original  # type: ignore[method-assign]
                DerivedIndexes.load = original_load  # type: ignore[method-assign]
            # what `memory-ledger ui` does at start: warm each namespace's index at the head
            state.close()
            t0 = time.perf_counter()
            state.warm().join()
            figures["warm_up_s"] = time.perf_counter() - t0
            at = chosen[len(chosen) // 2]
            figures["asof_first_after_warm_up_s"] = _get(
                client, f"/recall?{NS}&q={asked[60]}&at={at}"
            )[0]
            figures["other_page_idle_p50_ms"] = median(idle) * 1000
            figures["other_page_during_asof_p50_ms"] = median(during) * 1000 if during else None
            figures["other_page_during_asof_answered"] = overlapped
        built: list[float] = []
        for i in range(builds):  # the old first point: its index built from every memory
            t0 = time.perf_counter()
            with recall_point(engine, chosen[i % len(chosen)]) as past:
                past.recall(BENCH_NAMESPACE, asked[30 + i], 10)
            built.append(time.perf_counter() - t0)
        if built:
            figures["asof_first_built_p50_s"] = median(built)
            figures["asof_first_built_samples"] = len(built)
        folds: list[float] = []
        for i in range(baseline_samples):
            at = chosen[i % len(chosen)]
            t0 = time.perf_counter()
            with as_of(engine, at) as past:
                past.recall(BENCH_NAMESPACE, asked[50 + i], 10)
            folds.append(time.perf_counter() - t0)
        if folds:
            figures["fold_baseline_p50_s"] = median(folds)
            figures["fold_baseline_samples"] = len(folds)
    finally:
        state.close()
        engine.close()
    return figures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks asof", description=__doc__)
    parser.add_argument("--size", type=int, default=100_000, help="memories in the store")
    parser.add_argument("--samples", type=int, default=7, help="new points asked")
    parser.add_argument(
        "--baseline-samples", type=int, default=2, help="folds of the old path (0: none)"
    )
    parser.add_argument(
        "--build-samples",
        type=int,
        default=1,
        help="first points built from every memory, the old path (0: none)",
    )
    parser.add_argument(
        "--rounds", type=int, default=1, help="full builds timed beside another page"
    )
    parser.add_argument("--dir", default=None, help="scratch folder parent (default: $TMPDIR)")
    parser.add_argument("--quick", action="store_true", help="2,000 memories, 4 points")
    args = parser.parse_args(argv)
    size, samples = (2000, 4) if args.quick else (args.size, args.samples)
    print(f"before: {load()}")
    with scratch("bench_asof_", args.dir) as folder:
        f = measure(
            folder / "store",
            size,
            samples,
            args.baseline_samples,
            args.rounds,
            args.build_samples,
        )
    after = load()
    print(f"after: {after}")
    n = f"{f['memories']:,}"
    rows = [
        (f"{n}: store built (head {f['head']:,})", f"{f['build_s']:.1f} s"),
        (
            "first recall as of a point in the namespace (index derived from the engine's "
            "persisted one), once",
            f"{f['asof_first_s']:.3f} s",
        ),
        (
            f"recall as of a new point (index derived), cold, p50 of {f['points']}",
            f"{f['asof_cold_p50_s']:.3f} s",
        ),
        ("recall as of a new point, cold, max", f"{f['asof_cold_max_s']:.3f} s"),
        ("recall as of a kept point, warm, p50", f"{f['asof_warm_p50_s'] * 1000:.1f} ms"),
        ("another page, idle, p50", f"{f['other_page_idle_p50_ms']:.1f} ms"),
    ]
    during = f["other_page_during_asof_p50_ms"]
    rows.append(
        (
            "another page while an as-of recall readies its index, p50 "
            f"({f['other_page_during_asof_answered']} answered meanwhile)",
            "none answered" if during is None else f"{during:.1f} ms",
        )
    )
    rows.append(
        (
            "that as-of recall (index readied while the other page is asked)",
            ", ".join(f"{v:.2f} s" for v in f["asof_build_while_paging_s"]),
        )
    )
    rows.append(
        (
            "warm-up at server start (each namespace's index at the head, background)",
            f"{f['warm_up_s']:.2f} s",
        )
    )
    rows.append(
        (
            "first recall as of a point after the warm-up (index derived)",
            f"{f['asof_first_after_warm_up_s']:.3f} s",
        )
    )
    if "asof_first_built_p50_s" in f:
        rows.append(
            (
                "old first point: index built from every memory then, p50 of "
                f"{f['asof_first_built_samples']}",
                f"{f['asof_first_built_p50_s']:.2f} s",
            )
        )
    if "fold_baseline_p50_s" in f:
        ratio = f["fold_baseline_p50_s"] / f["asof_cold_p50_s"]
        rows.append(
            (
                f"baseline: fold up to the point + recall (old path), p50 of "
                f"{f['fold_baseline_samples']}",
                f"{f['fold_baseline_p50_s']:.2f} s ({ratio:.0f}x a new point's)",
            )
        )
    print_table(f"memory-ledger ui: recall as of a point, {n} memories", rows)
    slowest = max(f["asof_first_s"], f["asof_cold_p50_s"])
    verdict = "met" if slowest < TARGET_S and during is not None else "NOT met"
    print(
        f"target: as-of recall at a new point (first and later) under {TARGET_S:.0f} s, "
        f"other pages answer meanwhile: {verdict}"
    )
    path = save("asof", {**f, "load_after": after})
    print(f"figures written to {path}")
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
