"""Fixtures of the debugger's tests: the test store (built once per module) and a client
that holds the token."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from memory_ledger.replay.ui import UiState, create_app, open_read_only
from tests.ui.ui_store import UiStore, build_store

TOKEN = "test-token-0123456789"


@pytest.fixture(scope="module")
def ui_store(tmp_path_factory: pytest.TempPathFactory) -> UiStore:
    return build_store(tmp_path_factory.mktemp("ui") / "store")


@pytest.fixture
def state(ui_store: UiStore) -> Iterator[UiState]:
    engine = open_read_only(ui_store.path)
    state = UiState(engine, TOKEN, page_size=2)
    try:
        yield state
    finally:
        state.close()
        engine.close()


@pytest.fixture
def client(state: UiState) -> Iterator[TestClient]:
    with TestClient(create_app(state)) as client:
        response = client.get(f"/?token={TOKEN}")
        assert response.status_code == 200
        yield client


def store_files(path: Path) -> dict[str, bytes]:
    """Every file of the store but this process's projection slots (the read models are
    the reader's own, disposable) and LMDB's reader table."""
    return {
        str(p.relative_to(path)): p.read_bytes()
        for p in sorted(path.rglob("*"))
        if p.is_file() and "projections" not in p.parts and p.name != "lock.mdb"
    }
