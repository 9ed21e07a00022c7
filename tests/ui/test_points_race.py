"""Pages over points in time under concurrent requests (newcomer finding F3): requests
started together by a barrier, round after round, over more points than the debugger keeps
(each one pushes another out while requests may still read it), in every mode (position,
recorded time, occurred time: a fold), while a writer appends to another namespace (every
write is a new ledger head: the kept points of the old head are pushed out) and, half-way, a
third namespace is erased. Every answer about the untouched namespace equals the serial
answer to the same request (the parts that name the ledger head aside); no answer is a 500;
a page about the erased namespace asked after its erasure says it was erased and shows none
of its words.

Before the fix a point pushed out of the cache was closed under a request still reading it
(``Connection already closed``) and the requests of one occurred-time moment shared its
fold's DuckDB connection (``ResourceInUseException``): both were 500s, or a 400 naming
DuckDB's text.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.replay.ui import UiState, create_app

ALICE = Namespace("acme", "alice", "assistant")
WRITER = Namespace("acme", "writer", "assistant")
ERASED = Namespace("zulu", "zoltan", "assistant")
ERASED_WORD = "Quokkaphone"
TOKEN = "race-token-0123456789"
THREADS = 8
ROUNDS = 12
ERASE_ROUND = ROUNDS // 2
WAIT = 120.0
"""Seconds before a thread gives up on the barrier (a failed test, never a hung one)."""


def _q(namespace: Namespace) -> str:
    return f"t={namespace.tenant}&p={namespace.principal}&s={namespace.scope_id}"


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    """An encrypted store (so a namespace can be erased): ALICE's memories stored, changed
    and forgotten over two years of occurred time, a namespace to erase."""
    key = tmp_path / "master.key"
    key.write_bytes(os.urandom(32))
    with MemoryEngine.open(tmp_path / "store", master_key=key) as engine:
        ids = []
        for n in range(12):
            when = datetime(2023 + n // 6, 1 + 2 * (n % 6), 1, tzinfo=UTC)
            done = engine.remember(ALICE, f"Alice fact {n} about owls and tea.", occurred_at=when)
            ids.append(str(done.memory_id))
        for n in range(0, 12, 3):
            when = datetime(2024, 12, 1 + n, tzinfo=UTC)
            engine.correct(ALICE, f"Alice fact {n} corrected.", target=ids[n], occurred_at=when)
        engine.forget(ALICE, ids[1])
        for n in range(3):
            engine.remember(ERASED, f"Zoltan likes {ERASED_WORD} number {n}.")
        yield engine


def _requests(head: int) -> list[str]:
    """More points than the state keeps (2), in every mode, about ALICE."""
    a = _q(ALICE)
    positions = [3, 6, 9, 12, head - 4, head]
    times = ["2023-02-01T00:00Z", "2023-08-01T00:00Z", "2024-03-01T00:00Z", "2025-01-01T00:00Z"]
    paths = [f"/recall?{a}&q=Alice+owls+tea&k=8&at={p}" for p in positions]
    paths += [f"/recall?{a}&q=Alice+owls&k=8&mode=occurred&at={t}" for t in times]
    paths += [
        f"/timetravel?{a}&mode=position&a={x}&b={y}"
        for x, y in zip(positions, positions[1:], strict=False)
    ]
    paths += [
        f"/timetravel?{a}&mode=occurred&a={x}&b={y}" for x, y in zip(times, times[1:], strict=False)
    ]
    now = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    paths += [f"/timetravel?{a}&mode=recorded&a=2020-01-01T00:00Z&b={now}"]
    return paths


_HEAD_NAMED = [
    re.compile(r"ledger head \d+"),  # every page's header
    re.compile(r"folded to position \d+"),  # occurred time: the last position scanned
    re.compile(r"at position \d+ \(as of occurred"),  # the same, for recall
]


def _normal(path: str, text: str) -> str:
    """The page without what names the ledger head now (a writer moves it)."""
    for pattern in _HEAD_NAMED:
        text = pattern.sub(lambda m: re.sub(r"\d+", "N", m.group(0)), text)
    return text


def test_concurrent_points_answer_as_served_alone(engine: MemoryEngine) -> None:
    state = UiState(engine, TOKEN, page_size=50, kept_points=2)
    try:
        with TestClient(create_app(state)) as client:
            assert client.get(f"/?token={TOKEN}").status_code == 200
            paths = _requests(engine.head)
            serial = {}
            for path in paths:
                response = client.get(path)
                assert response.status_code == 200, (path, response.text)
                serial[path] = _normal(path, response.text)
            # The points differ (each answer is one point's own, not another's).
            recalls = {serial[p] for p in paths if p.startswith("/recall")}
            travels = {serial[p] for p in paths if p.startswith("/timetravel")}
            assert len(recalls) >= 8 and len(travels) >= 6
            assert all("Alice fact" in serial[p] for p in paths[1:6])
            erased = [
                f"/recall?{_q(ERASED)}&q={ERASED_WORD}&at={engine.head}",
                f"/timetravel?{_q(ERASED)}&mode=occurred&a=2020-01-01T00:00Z&b=2099-01-01T00:00Z",
                f"/timetravel?{_q(ERASED)}&mode=position&a=1&b={engine.head}",
            ]
            answers, failures = _race(client, engine, paths, erased)
    finally:
        state.close()
    assert not failures, failures[:3]
    assert len(answers) == THREADS * ROUNDS
    wrong = [
        (status, path, re.findall(r'id="error">(.*?)<', text))
        for path, status, text, after_erasure in answers
        if (path in serial and (status, _normal(path, text)) != (200, serial[path]))
        or (path not in serial and status != 200)
        or (path not in serial and after_erasure and "Zoltan likes" in text)
        or (path not in serial and after_erasure and 'id="erased"' not in text)
    ]
    assert not wrong, f"{len(wrong)} of {len(answers)} answers differ: {sorted(wrong)[:6]}"


def _race(
    client: TestClient, engine: MemoryEngine, paths: list[str], erased: list[str]
) -> tuple[list[tuple[str, int, str, bool]], list[str]]:
    """THREADS request threads and a writer, each round started by one barrier: thread i
    asks path (round * THREADS + i) (a request about the namespace erased half-way in
    every third round), the writer appends a memory of WRITER (the erasure in round
    ERASE_ROUND). Returns (path, status, text, asked after the erasure ended) of every
    answer and the failures of the threads themselves."""
    barrier = threading.Barrier(THREADS + 1, timeout=WAIT)
    erasure_done = threading.Event()
    answers: list[tuple[str, int, str, bool]] = []
    failures: list[str] = []
    lock = threading.Lock()

    def ask(index: int) -> None:
        try:
            for round_ in range(ROUNDS):
                barrier.wait()
                n = round_ * THREADS + index
                path = erased[n % len(erased)] if n % 3 == 0 else paths[n % len(paths)]
                after = erasure_done.is_set()
                response = client.get(path)
                with lock:
                    answers.append((path, response.status_code, response.text, after))
        except Exception as error:  # reported by the test, with the others
            failures.append(f"thread {index}: {error!r}")
            barrier.abort()

    def write() -> None:
        try:
            for round_ in range(ROUNDS):
                barrier.wait()
                if round_ == ERASE_ROUND:
                    engine.erase(ERASED.tenant, ERASED.principal, requested_by="dpo")
                    erasure_done.set()
                else:
                    engine.remember(WRITER, f"Writer note {round_} about owls.")
        except Exception as error:
            failures.append(f"writer: {error!r}")
            barrier.abort()

    threads = [threading.Thread(target=ask, args=(i,), daemon=True) for i in range(THREADS)]
    threads.append(threading.Thread(target=write, daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * ROUNDS)
        assert not thread.is_alive(), "a racing thread hung"
    return answers, failures
