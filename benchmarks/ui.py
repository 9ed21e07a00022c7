"""Debugger page times p50/p99 per view at 1,000 and 100,000 memories (memory-ledger ui).

Each store: the synthetic corpus of ``benchmarks.corpus`` in one namespace (appended as
MemoryActivated events with sync off, the way ``python -m benchmarks recall`` builds its
stores: the fastest path, 100,000 in well under a minute here), then through the engine's
public commands a recorded session of 20 turns whose new values supersede 20 memories.
The store is then opened read-only as ``memory-ledger ui`` opens it and each view is
requested through Starlette's in-process test client (the app with its token gate, no
socket): the time of one request, an upper bound of the server's time. Paged views are
timed at their first page and at a page in the middle (keyset: half-way through the ledger).

Cold figures are reported apart: a time-travel point is a fold of the ledger up to it
(``replay.as_of``; the debugger keeps the last four open), and integrity walks the whole
hash chain (``verify``) and counts every record (``stats``), both once per ledger head.
Baseline in the same run: the stylesheet (``/static/ui.css``) through the same client, the
floor of a request. Target (issue 29): pages of a 100,000-memory store in under 200 ms of
server time (paged). ``--quick``: 1,000 memories only. ``--keep DIR``: build each store
once under ``DIR`` and reuse it on later runs (the read-only debugger never changes it).
``--screenshots``: also write the PNG screenshots of ``benchmarks.ui_demo``.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.corpus import BENCH_NAMESPACE, fill, item, memories, queries, scratch, variant
from benchmarks.results import median, percentile, print_table, save
from memory_ledger.commands import MemoryEngine
from memory_ledger.commands.extraction import RecordedExtractor

TARGET_MS = 200.0
TOKEN = "bench-token"
NS = f"t={BENCH_NAMESPACE.tenant}&p={BENCH_NAMESPACE.principal}&s={BENCH_NAMESPACE.scope_id}"


def load() -> str:
    """The machine's 1-minute load average and core count."""
    one, five, _ = os.getloadavg()
    return f"load {one:.2f} (5 min {five:.2f}) on {os.cpu_count()} cores"


def build(folder: Path, size: int) -> dict[str, Any]:
    """The benchmark store of ``size`` memories; what was written and how long it took."""
    corpus = memories(size)
    started = time.perf_counter()
    with MemoryEngine.open(folder, sync=False) as engine:
        fill(engine, corpus)
        extractor = RecordedExtractor()
        session = engine.session(BENCH_NAMESPACE, "bench-ui", extractor=extractor)
        for turn, m in enumerate(corpus[:20], start=1):  # new values: 20 supersessions
            extractor.provide(turn, [item(variant(m, turn), f"bench-ui:{turn}")])
            session.observe_final_transcript(turn, f"user: {variant(m, turn).statement}")
        session.finish()
        engine.catch_up()
        head = engine.head
    return {
        "build_s": time.perf_counter() - started,
        "head": head,
        "corpus": corpus,
    }


def timed(get: Callable[[str], Any], path: str) -> float:
    started = time.perf_counter()
    response = get(path)
    elapsed = (time.perf_counter() - started) * 1000
    if response.status_code != 200:
        msg = f"{path}: HTTP {response.status_code}"
        raise RuntimeError(msg)
    return elapsed


def reuse(folder: Path, size: int) -> dict[str, Any]:
    """The store ``build`` left in ``folder`` (``--keep``), built on first use."""
    if not (folder / "built").exists():
        built = build(folder / "store", size)
        (folder / "built").write_text(f"{built['head']}\n{built['build_s']}\n")
    head, build_s = (folder / "built").read_text().split()
    return {"build_s": float(build_s), "head": int(head), "corpus": memories(size)}


def measure(folder: Path, size: int, samples: int, *, keep: bool = False) -> dict[str, Any]:
    from starlette.testclient import TestClient

    from memory_ledger.replay.ui import UiState, create_app, open_read_only

    built = reuse(folder, size) if keep else build(folder, size)
    if keep:
        folder = folder / "store"
    head = built["head"]
    figures: dict[str, Any] = {"memories": size, "head": head, "build_s": built["build_s"]}
    engine = open_read_only(folder)
    state = UiState(engine, TOKEN)
    try:
        with TestClient(create_app(state)) as client:
            get = client.get
            started = time.perf_counter()
            get(f"/?token={TOKEN}")
            figures["open_first_page_ms"] = (time.perf_counter() - started) * 1000
            superseded = get(f"/namespace?{NS}&status=superseded").text
            old_id = superseded.split('href="/memory/')[1].split('"')[0]
            asked = queries(built["corpus"], samples)
            views: dict[str, Callable[[int], str]] = {
                "baseline: stylesheet": lambda i: "/static/ui.css",
                "namespaces": lambda i: "/",
                "memories, first page": lambda i: f"/namespace?{NS}",
                "memories, middle page": lambda i: f"/namespace?{NS}&before={head // 2 + i}",
                "timeline, first page": lambda i: f"/timeline?{NS}",
                "timeline, middle page": lambda i: f"/timeline?{NS}&after={head // 2 + i}",
                "timeline, by type": lambda i: f"/timeline?{NS}&type=MemorySuperseded",
                "event payload": lambda i: f"/event/{head // 2 + i}",
                "memory (lineage)": lambda i: f"/memory/{old_id}",
                "recall explained": lambda i: f"/recall?{NS}&q={asked[i]}",
            }
            # cold: the first fold of two points, the first integrity walk
            a, b = head // 2, head
            tt = f"/timetravel?{NS}&mode=position&a={a}&b={b}"
            figures["cold time travel (2 folds) ms"] = timed(get, tt)
            figures["cold integrity (verify + stats) ms"] = timed(get, "/integrity")
            views["time travel, first page"] = lambda i: tt
            views["time travel, next page"] = lambda i: f"{tt}&offset={50 + i}"
            views["recall as of a point"] = lambda i: f"/recall?{NS}&q={asked[i]}&at={a}"
            views["integrity (cached per head)"] = lambda i: "/integrity"
            for name, path in views.items():
                get(path(0))  # warm-up (index build, caches)
                values = [timed(get, path(i)) for i in range(samples)]
                figures[name] = {"p50_ms": median(values), "p99_ms": percentile(values, 99)}
    finally:
        state.close()
        engine.close()
    return figures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks ui", description=__doc__)
    parser.add_argument("--sizes", default="1000,100000")
    parser.add_argument("--samples", type=int, default=40, help="requests per view and size")
    parser.add_argument("--dir", default=None, help="scratch folder parent (default: $TMPDIR)")
    parser.add_argument("--quick", action="store_true", help="1,000 memories only")
    parser.add_argument(
        "--keep",
        default=None,
        help="keep the stores under this folder and reuse them on the next run (built once)",
    )
    parser.add_argument("--screenshots", action="store_true", help="also write results/ui-*.png")
    args = parser.parse_args(argv)
    sizes = [1000] if args.quick else [int(s) for s in args.sizes.split(",") if s.strip()]
    print(f"before: {load()}")
    results = []
    for size in sizes:
        if args.keep:
            kept = Path(args.keep) / f"ui_{size}"
            kept.mkdir(parents=True, exist_ok=True)
            results.append(measure(kept, size, args.samples, keep=True))
            continue
        with scratch(f"bench_ui_{size}_", args.dir) as folder:
            results.append(measure(folder / "store", size, args.samples))
    print(f"after: {load()}")
    rows: list[tuple[str, str]] = []
    over = []
    for f in results:
        n = f"{f['memories']:,}"
        rows.append((f"{n}: store built (head {f['head']:,})", f"{f['build_s']:.1f} s"))
        rows.append((f"{n}: open + first page", f"{f['open_first_page_ms']:.0f} ms"))
        for key, value in f.items():
            if isinstance(value, dict):
                rows.append(
                    (f"{n}: {key} p50 / p99", f"{value['p50_ms']:.1f} / {value['p99_ms']:.1f} ms")
                )
                if value["p99_ms"] > TARGET_MS and not key.startswith("baseline"):
                    over.append(f"{n} {key}")
            elif key.startswith("cold"):
                rows.append((f"{n}: {key.removesuffix(' ms')}", f"{value:.0f} ms (once)"))
    print_table("memory-ledger ui: request time per view (in-process, server side)", rows)
    verdict = "all paged views under" if not over else f"over {TARGET_MS:.0f} ms: {over}; target"
    print(f"target p99 < {TARGET_MS:.0f} ms per page: {verdict} {TARGET_MS:.0f} ms")
    path = save("ui", {"sizes": results, "load_after": load()})
    print(f"figures written to {path}")
    if args.screenshots:
        from benchmarks.ui_demo import main as screenshots

        return screenshots([])
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
