"""Screenshots of every view of ``memory-ledger ui`` (results/ui-*.png) from a small story.

The story (written through the engine's public commands: a recorded extractor's sessions,
recall, forget): Alice moves from Lisbon to Porto, likes espresso, asks for British English;
a second user has a few memories. The debugger is started as ``memory-ledger ui --json``
in its own process and Debian's Chromium (``/usr/bin/chromium``, headless, through
Playwright's Python package; nothing is downloaded) opens each view: namespaces, a
namespace's memories, its timeline, one event, a memory's lineage, time travel between the
move and now, recall explained, integrity. Run: ``python -m benchmarks.ui_demo``.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.corpus import scratch
from benchmarks.results import results_dir
from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.extraction import RecordedExtractor

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ALICE = Namespace("acme", "alice", "assistant")
BOB = Namespace("acme", "bob", "assistant")


def fact(statement: str, predicate: str | None, value: str | None, evidence: str) -> dict[str, Any]:
    return {
        "kind": "semantic",
        "subject": "Alice",
        "predicate": predicate,
        "value": value,
        "statement": statement,
        "source": "fact" if predicate else "preference",
        "scope": "user",
        "reason": "useful for later answers about Alice",
        "importance": 0.8,
        "confidence": 0.9,
        "tags": [],
        "supersedes": None,
        "conflicts_with": [],
        "evidence": [evidence],
    }


def story(folder: Path) -> dict[str, Any]:
    """Write the story's store; the positions and ids the screenshots open."""
    turns = [
        (
            "week-1",
            1,
            datetime(2024, 3, 4, 9, 15, tzinfo=UTC),
            "user: I moved to Lisbon last month and I'm hunting for a good espresso place.",
            [
                fact("Alice lives in Lisbon.", "lives_in", "Lisbon", "week-1:1"),
                fact("Alice likes espresso.", None, None, "week-1:1"),
            ],
        ),
        (
            "week-1",
            2,
            datetime(2024, 3, 4, 9, 17, tzinfo=UTC),
            "user: Please always answer me in British English, and keep it short.",
            [
                fact(
                    "Alice wants answers in British English, kept short.",
                    "answer_style",
                    "british english",
                    "week-1:2",
                )
            ],
        ),
        (
            "week-2",
            1,
            datetime(2024, 6, 2, 18, 0, tzinfo=UTC),
            "user: Big news, we moved to Porto this weekend! The flat is near the river.",
            [
                fact("Alice lives in Porto.", "lives_in", "Porto", "week-2:1"),
                fact(
                    "Alice's flat in Porto is near the river.",
                    "flat_location",
                    "near the river",
                    "week-2:1",
                ),
            ],
        ),
        (
            "week-2",
            2,
            datetime(2024, 6, 2, 18, 5, tzinfo=UTC),
            "user: My sister Inês visits from Braga on the 20th.",
            [fact("Alice's sister Inês lives in Braga.", "sister_lives_in", "Braga", "week-2:2")],
        ),
    ]
    with MemoryEngine.open(folder) as engine:
        positions: dict[str, int] = {}
        for session_id in ("week-1", "week-2"):
            extractor = RecordedExtractor()
            session = engine.session(ALICE, session_id, extractor=extractor)
            for sid, turn, when, transcript, items in turns:
                if sid != session_id:
                    continue
                extractor.provide(turn, items)
                session.observe_final_transcript(turn, transcript, occurred_at=when)
            session.recall("where does Alice live?", turn_id=2)
            session.finish()
            positions[session_id] = engine.head
        for text in ("Bob prefers tea to coffee.", "Bob works at Northwind.", "Bob is vegan."):
            engine.remember(BOB, text)
        lisbon = engine.recall(ALICE, "Alice lives in Lisbon", 5)
        porto = next(h.memory_id for h in lisbon if "Porto" in h.statement)
        head = engine.head
    with MemoryEngine.open(folder) as engine, engine.read_models() as live:
        old = live.conn.execute(
            "SELECT memory_id FROM canonical_memory WHERE statement = 'Alice lives in Lisbon.'"
        ).fetchall()[0][0]
    return {"before_move": positions["week-1"], "head": head, "lisbon": old, "porto": porto}


def start(store: Path) -> tuple[subprocess.Popen[str], str]:
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])}
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from memory_ledger.replay.cli.app import main; main()",
            "ui",
            "--store",
            str(store),
            "--json",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=store.parent,
    )
    assert process.stdout is not None
    return process, str(json.loads(process.stdout.readline())["url"])


def main(argv: list[str]) -> int:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        print(f"{CHROMIUM} is missing: apt-get install chromium", file=sys.stderr)
        return 2
    out = results_dir()
    ns = f"t={ALICE.tenant}&p={ALICE.principal}&s={ALICE.scope_id}"
    with scratch("ui_demo_") as folder:
        store = folder / "store"
        ids = story(store)
        process, url = start(store)
        base = url.split("?")[0].rstrip("/")
        views = {
            "namespaces": "/",
            "namespace": f"/namespace?{ns}",
            "timeline": f"/timeline?{ns}",
            "event": "/event/3",
            "memory": f"/memory/{ids['lisbon']}",
            "timetravel": f"/timetravel?{ns}&mode=position&a={ids['before_move']}&b={ids['head']}",
            "recall": f"/recall?{ns}&q=where+does+Alice+live&at=",
            "integrity": "/integrity",
        }
        try:
            with sync_playwright() as driver:
                browser = driver.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                page = browser.new_page(viewport={"width": 1200, "height": 760})
                page.goto(url)
                for name, path in views.items():
                    page.goto(base + path)
                    target = out / f"ui-{name}.png"
                    page.screenshot(path=str(target), full_page=name not in ("timeline",))
                    print(f"wrote {target}")
                browser.close()
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(timeout=20)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
