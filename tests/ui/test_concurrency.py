"""Pages never wait for one another (issue 35 item 4): while a recall as of a point is held
in the middle of readying its index (a barrier, not a clock: after the live engine's index
is copied, before the point's is derived from it), other pages, and a recall as of another
point, are answered; each answer equals the one served alone afterwards."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from starlette.testclient import TestClient

from memory_ledger.projections.history import CanonicalMemoryAt
from memory_ledger.replay.ui import UiState
from tests.ui.ui_store import ALICE, UiStore

Q = f"t={ALICE.tenant}&p={ALICE.principal}&s={ALICE.scope_id}"
WAIT = 120.0
"""Seconds before a test gives up on an event that should already have happened (a failed
test instead of a hung one; never reached when the code is right)."""


class Held:
    """Holds the first index derivation of position ``held`` (its read of the changes
    since the live index's position) until :meth:`release`."""

    def __init__(self, held: int) -> None:
        self.held = held
        self.entered = threading.Event()
        self.released = threading.Event()
        self.builds = 0

    def wrap(self, original: Callable[..., Any]) -> Callable[..., Any]:
        def changed_between(canonical: CanonicalMemoryAt, *args: Any, **kwargs: Any) -> Any:
            if canonical.position == self.held:
                self.builds += 1
            if canonical.position == self.held and not self.entered.is_set():
                self.entered.set()
                assert self.released.wait(WAIT), "the held recall was never released"
            return original(canonical, *args, **kwargs)

        return changed_between

    def release(self) -> None:
        self.released.set()


def _get(client: TestClient, path: str, into: dict[str, Any]) -> threading.Thread:
    def run() -> None:
        response = client.get(path)
        into[path] = (response.status_code, response.text)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_other_pages_answer_while_a_recall_as_of_a_point_is_built(
    client: TestClient,
    state: UiState,
    ui_store: UiStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    point = ui_store.position_before_move
    held = Held(point)
    monkeypatch.setattr(
        CanonicalMemoryAt, "changed_between", held.wrap(CanonicalMemoryAt.changed_between)
    )
    slow_path = f"/recall?{Q}&q=where+does+Alice+live&at={point}"
    answers: dict[str, Any] = {}
    slow = _get(client, slow_path, answers)
    try:
        assert held.entered.wait(WAIT), "the recall as of a point never started"
        others = [
            "/",
            f"/namespace?{Q}",
            f"/timeline?{Q}",
            f"/timetravel?{Q}&mode=position&a={point}&b={ui_store.head}",
            f"/recall?{Q}&q=where+does+Alice+live&k=5",
            f"/recall?{Q}&q=where+does+Alice+live&at={ui_store.head}",  # another point
        ]
        for path in others:
            thread = _get(client, path, answers)
            thread.join(WAIT)
            assert not thread.is_alive(), f"{path} waited for the recall as of {point}"
            assert answers[path][0] == 200, path
        assert slow.is_alive() and slow_path not in answers  # still held all along
    finally:
        held.release()
    slow.join(WAIT)
    assert not slow.is_alive()
    status, text = answers[slow_path]
    assert status == 200 and "Alice lives in Lisbon" in text
    # The same pages served one at a time answer the same.
    for path, (code, page) in answers.items():
        again = client.get(path)
        assert (again.status_code, again.text) == (code, page), path


def test_two_requests_for_one_new_point_ready_it_once(
    client: TestClient, state: UiState, ui_store: UiStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    point = ui_store.position_before_move
    held = Held(point)
    monkeypatch.setattr(
        CanonicalMemoryAt, "changed_between", held.wrap(CanonicalMemoryAt.changed_between)
    )
    opened: list[int] = []
    original = state.point

    def point_of(mode: str, at: Any) -> Any:
        opened.append(at)
        return original(mode, at)

    monkeypatch.setattr(state, "point", point_of)
    answers: dict[str, Any] = {}
    first = _get(client, f"/recall?{Q}&q=Alice&at={point}", answers)
    assert held.entered.wait(WAIT)
    second = _get(client, f"/recall?{Q}&q=Lisbon&at={point}", answers)
    while len(opened) < 2:  # the second request reached the point (and waits for it)
        assert first.is_alive()
        second.join(0.01)
    held.release()
    first.join(WAIT)
    second.join(WAIT)
    assert {code for code, _ in answers.values()} == {200}
    assert held.builds == 1  # one index derived, for both


def test_after_the_warm_up_the_first_point_derives_its_index(ui_store: UiStore) -> None:
    """``memory-ledger ui`` warms each namespace's index at the head at start: the first
    recall as of an earlier point then derives its index (and answers as the fold)."""
    from memory_ledger.replay import PastRecall, as_of
    from memory_ledger.replay.ui import open_read_only

    engine = open_read_only(ui_store.path)
    state = UiState(engine, "token")
    try:
        state.warm().join()
        with state.point("position", ui_store.position_before_move) as past:
            assert isinstance(past, PastRecall)
            with as_of(engine, ui_store.position_before_move) as oracle:
                assert past.recall(ALICE, "Alice", 3) == oracle.recall(ALICE, "Alice", 3)
            assert past.sources == {ALICE.key(): "derived"}
    finally:
        state.close()
        engine.close()
