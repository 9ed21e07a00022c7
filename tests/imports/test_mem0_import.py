"""The mem0 import (issue 37 item 2) on stores written by mem0 itself: every mem0 version in
the imported memory's history with its time, the current memories equal to mem0's
``get_all`` per user, namespaces from the host's mapping only, secrets refused and never
stored, idempotent reruns and resumed interruptions."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.ledger.ids import Namespace
from memory_ledger.replay.imports import (
    collect_memories,
    import_mem0,
    interchange_digest,
    read_qdrant_owners,
)
from memory_ledger.replay.imports.mem0_history import read_history, row_time
from tests.imports.mem0_fixtures import SECRET

USERS = {
    "alice": Namespace("acme", "alice", "mem0"),
    "bob": Namespace("acme", "bob", "mem0"),
    "carol": Namespace("acme", "carol", "mem0"),
}


def rows_of(engine: MemoryEngine, namespace: Namespace) -> list[dict[str, Any]]:
    with engine.read_models() as live:
        cursor = live.conn.execute(
            "SELECT statement, status, occurred_at FROM canonical_memory "
            "WHERE tenant = ? AND principal = ? AND scope_id = ?",
            [namespace.tenant, namespace.principal, namespace.scope_id],
        )
        return [
            dict(zip(("statement", "status", "occurred_at"), r, strict=True))
            for r in cursor.fetchall()
        ]


def mapped_import(engine: MemoryEngine, folder: Path, **kwargs: Any) -> Any:
    owners = read_qdrant_owners(folder / "qdrant")
    return import_mem0(engine, folder / "history.db", user_map=USERS, owners=owners, **kwargs)


def state(engine: MemoryEngine) -> dict[str, str]:
    """The interchange digest of each mapped namespace: memories, versions and times."""
    return {user: interchange_digest(collect_memories(engine, ns)[1]) for user, ns in USERS.items()}


def test_the_current_memories_equal_mem0s_get_all_per_user(
    tmp_path: Path, mem0_store: tuple[Path, dict[str, Any]]
) -> None:
    folder, expected = mem0_store
    with MemoryEngine.open(tmp_path / "store") as engine:
        report = mapped_import(engine, folder)
        for user, namespace in USERS.items():
            current = sorted(
                r["statement"] for r in rows_of(engine, namespace) if r["status"] == "active"
            )
            assert current == expected["users"][user], user
    # Deleted memories have no point in the vector store any more: with no default
    # namespace their rows are refused as owner_unknown, and the rest is imported.
    codes = {item.reason_code for item in report.refused}
    assert codes <= {"owner_unknown", "secret_detected"}
    assert any(item.reason_code == "secret_detected" for item in report.refused)


def test_every_mem0_version_is_in_the_history_with_its_time(
    tmp_path: Path, mem0_store: tuple[Path, dict[str, Any]]
) -> None:
    folder, expected = mem0_store
    owners = read_qdrant_owners(folder / "qdrant")
    default = Namespace("acme", "everyone", "mem0")
    with MemoryEngine.open(tmp_path / "store") as engine:
        report = import_mem0(
            engine, folder / "history.db", namespace=default, user_map=USERS, owners=owners
        )
        seen: dict[str, list[tuple[str, datetime | None]]] = {}
        for namespace in [*USERS.values(), default]:
            for row in rows_of(engine, namespace):
                seen.setdefault(row["statement"], []).append((row["status"], row["occurred_at"]))
    assert {r.reason_code for r in report.refused} == {"secret_detected"}
    for history in expected["history"].values():
        for entry in history:
            text = entry["new_memory"]
            if entry["event"] == "DELETE" or text == SECRET:
                continue
            time = entry["created_at"] if entry["event"] == "ADD" else entry["updated_at"]
            times = [at for _, at in seen[text]]
            assert datetime.fromisoformat(time) in times, text
    # mem0's deletes are forgets here, and its updates supersede the value before.
    assert seen["Bob likes green tea."][0][0] == "forgotten"
    assert seen["Alice is allergic to peanuts."][0][0] == "forgotten"
    assert seen["Alice lives in Lisbon."][0][0] == "superseded"
    assert seen["Alice lives in Porto."][0][0] == "superseded"
    assert seen["Alice lives in Braga since March."][0][0] == "active"


def test_the_history_keeps_mem0s_order_and_times(mem0_store: tuple[Path, dict[str, Any]]) -> None:
    folder, expected = mem0_store
    rows = list(read_history(folder / "history.db"))
    assert len(rows) == sum(len(h) for h in expected["history"].values())
    for history in expected["history"].values():
        ours = [r for r in rows if r.memory_id == history[0]["memory_id"]]
        assert [r.event for r in ours] == [h["event"] for h in history]
        assert [r.row_id for r in ours] == [h["id"] for h in history]
    first = next(r for r in rows if r.new_memory == "Alice lives in Lisbon.")
    assert row_time(first) == datetime.fromisoformat("2023-05-08T13:56:00+00:00")


def test_a_secret_is_refused_reported_and_never_stored(
    tmp_path: Path, mem0_store: tuple[Path, dict[str, Any]]
) -> None:
    folder, _ = mem0_store
    store = tmp_path / "store"
    with MemoryEngine.open(store) as engine:
        report = import_mem0(engine, folder / "history.db", namespace=USERS["carol"])
        rows = rows_of(engine, USERS["carol"])
    refused = [item for item in report.refused if item.reason_code == "secret_detected"]
    assert len(refused) == 1 and refused[0].event == "ADD"
    assert "sk-proj" not in repr(report)
    # Her later UPDATE is remembered: the value mem0 holds now is here.
    assert "Carol keeps her keys in the blue box." in [r["statement"] for r in rows]
    for file in store.rglob("*"):
        if file.is_file():
            assert b"Q7h2Lm9Xc4Vb8Nz1Kp5Rt3Wy6Ud0Fg2Hj" not in file.read_bytes(), file


def test_a_second_run_writes_nothing(
    tmp_path: Path, mem0_store: tuple[Path, dict[str, Any]]
) -> None:
    folder, _ = mem0_store
    with MemoryEngine.open(tmp_path / "store") as engine:
        first = mapped_import(engine, folder)
        head = engine.head
        second = mapped_import(engine, folder)
        assert engine.head == head
    assert first.imported > 0 and second.imported == 0
    assert second.already == first.imported
    assert second.refused == first.refused


class Interrupted(Exception):
    pass


@settings(max_examples=6, deadline=None)
@given(stop=st.integers(min_value=1, max_value=16))
def test_an_interrupted_import_resumes_to_the_state_of_one_clean_run(
    tmp_path_factory: pytest.TempPathFactory, mem0_store: tuple[Path, dict[str, Any]], stop: int
) -> None:
    folder, _ = mem0_store
    base = tmp_path_factory.mktemp("resume")
    with MemoryEngine.open(base / "clean") as engine:
        clean = mapped_import(engine, folder)
        clean_state = state(engine)

    def interrupt(done: int, total: int) -> None:
        if done == min(stop, total):
            raise Interrupted

    with MemoryEngine.open(base / "resumed") as engine:
        with pytest.raises(Interrupted):
            mapped_import(engine, folder, progress=interrupt)
        resumed = mapped_import(engine, folder)
        assert state(engine) == clean_state
    assert resumed.imported + resumed.already == clean.imported
    assert resumed.refused == clean.refused


def test_nothing_in_the_data_chooses_a_namespace(
    tmp_path: Path, mem0_store: tuple[Path, dict[str, Any]]
) -> None:
    folder, _ = mem0_store
    owners = read_qdrant_owners(folder / "qdrant")
    only_alice = {"alice": USERS["alice"]}
    with MemoryEngine.open(tmp_path / "store") as engine:
        report = import_mem0(engine, folder / "history.db", user_map=only_alice, owners=owners)
        assert rows_of(engine, USERS["bob"]) == [] and rows_of(engine, USERS["carol"]) == []
        assert rows_of(engine, USERS["alice"])
    assert report.namespaces == 1
    assert {r.reason_code for r in report.refused} == {"unmapped_user", "owner_unknown"}


@pytest.mark.parametrize("kill_after", [2, 7])
def test_an_import_killed_mid_way_resumes_to_the_state_of_one_clean_run(
    tmp_path: Path, mem0_store: tuple[Path, dict[str, Any]], kill_after: int
) -> None:
    """SIGKILL of a process importing (after ``kill_after`` rows, while it writes the next),
    then a rerun: the state of one clean run, nothing twice."""
    import signal
    import subprocess
    import sys

    from tests.imports.mem0_fixtures import ROOT

    folder, _ = mem0_store
    store = tmp_path / "store"
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.imports.mem0_import_child",
            str(store),
            str(folder / "history.db"),
            str(folder / "qdrant"),
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    for line in child.stdout:
        if line.strip() == f"row {kill_after}":
            break
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    with MemoryEngine.open(tmp_path / "clean") as engine:
        clean = mapped_import(engine, folder)
        clean_state = state(engine)
    with MemoryEngine.open(store) as engine:
        resumed = mapped_import(engine, folder)
        assert state(engine) == clean_state
        again = mapped_import(engine, folder)
    assert resumed.already >= kill_after - len(clean.refused)
    assert resumed.imported + resumed.already == clean.imported
    assert again.imported == 0
