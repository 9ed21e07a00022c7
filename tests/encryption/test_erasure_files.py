"""Erasure reaches every file, whenever it is written (issue 34, item 2).

Every derived file (projection slots, the persisted recall index, backups, exports, the
workspace vector cache) is written through ``projections/derived.py``, which asks the
keyring which namespaces are erased at the time of the write. The cases the issue names
(erase, recall, close; another process holding a slot; kill -9; backup and restore) and
a property over random interleavings of them (``benchmarks.erasure_files``; the long
profile is ``python -m benchmarks erasure_files``) read every byte of every file for the
erased namespace's names and words.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from benchmarks.erasure_files import Step, World, check_interleaving, step_strategy
from memory_ledger.commands import MemoryEngine
from memory_ledger.commands.engine.memory_engine import recall_index_path
from memory_ledger.commands.recall.index_file import RecallIndexFile, fingerprint
from memory_ledger.ledger.ids import Namespace
from memory_ledger.projections.derived import ErasedNamespaces, slot_stale
from tests.encryption_helpers import bytes_found


def _names(world: World, number: int) -> list[bytes]:
    ns = world.subjects[number].namespace
    return [ns.tenant.encode(), ns.principal.encode(), ns.scope_id.encode()]


def test_a_recall_after_the_erasure_writes_no_name_into_the_recall_index(tmp_path: Path) -> None:
    world = World(tmp_path, seed=7)
    for step in [("remember", 0, 0), ("remember", 1, 0), ("recall", 0, 0), ("close", 0, 0)]:
        world.run(step)
    projections = world.store / "projections"
    # The scan finds what is there: before the erasure the index holds the names.
    assert bytes_found(_names(world, 0)[1], projections)
    for step in [("erase", 0, 2), ("recall", 0, 0), ("recall", 1, 0), ("close", 0, 0)]:
        world.run(step)
    assert world.leaks() == []
    assert bytes_found(_names(world, 1)[1], projections)  # the other namespace is kept


def test_a_process_holding_a_slot_writes_no_erased_word_when_it_closes(tmp_path: Path) -> None:
    world = World(tmp_path, seed=8)
    steps: list[Step] = [
        ("remember", 0, 0),
        ("remember", 1, 0),
        ("child_open", 0, 0),  # recalls every namespace: its index holds their words
        ("erase", 0, 0),
        ("close", 0, 0),
        ("child_close", 0, 0),  # never caught up to the erasure before closing
    ]
    try:
        for step in steps:
            world.run(step)
    finally:
        world.abort()
    assert world.leaks() == []


def test_a_killed_holder_leaves_a_stale_slot_that_the_next_open_deletes(tmp_path: Path) -> None:
    world = World(tmp_path, seed=9)
    steps: list[Step] = [
        ("remember", 0, 0),
        ("child_open", 0, 0),
        ("child_remember", 0, 0),
        ("close", 0, 0),
        ("child_kill", 0, 0),  # killed while holding slot 1: its files stay as they were
        ("recall", 1, 0),  # the main engine claims slot 0 again
        ("erase", 0, 0),  # slot 1 is idle: deleted now
        ("close", 0, 0),
    ]
    try:
        for step in steps:
            world.run(step)
    finally:
        world.abort()
    assert world.leaks() == []
    # Killed after the erasure: its slot's stamp is stale, and the next open deletes it.
    world = World(tmp_path / "again", seed=10)
    steps = [
        ("remember", 0, 0),
        ("child_open", 0, 0),
        ("erase", 0, 0),  # slot 1 is held: left to its holder
        ("close", 0, 0),
        ("child_kill", 0, 0),
    ]
    try:
        for step in steps:
            world.run(step)
    finally:
        world.abort()
    projections = world.store / "projections"
    assert (projections / "slot-0.erasures").read_bytes() == b"1"  # closed knowing it
    assert slot_stale(projections / "slot-1.duckdb", 1)  # killed before it knew
    assert not slot_stale(projections / "slot-0.duckdb", 1)
    MemoryEngine.open(world.store, master_key=world.key).close()
    assert world.leaks() == []
    assert not list((world.store / "projections").glob("slot-1.*duckdb*"))


def test_a_recall_index_naming_an_erased_namespace_is_removed_when_opened(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, seed=11)
    for step in [("remember", 0, 0), ("recall", 0, 0), ("close", 0, 0)]:
        world.run(step)
    index = recall_index_path(world.store / "projections" / "slot-0.duckdb")
    kept = index.read_bytes()
    for step in [("erase", 0, 0), ("close", 0, 0)]:
        world.run(step)
    index.write_bytes(kept)  # a copy from before the erasure put back
    assert bytes_found(_names(world, 0)[1], index.parent)
    with MemoryEngine.open(world.store, master_key=world.key) as engine:
        assert not index.exists()  # removed when the engine opened it, never served
        index.write_bytes(kept)
        erased = ErasedNamespaces.of_keyring(engine.keyring)
        opened = RecallIndexFile(index, fingerprint(True), engine.head, erased=erased)
        assert opened.reason == "erased"
        assert opened.namespaces() == []
        assert not index.exists()
    assert world.leaks() == []


def test_backups_exports_and_restores_after_an_erasure_hold_none_of_it(tmp_path: Path) -> None:
    world = World(tmp_path, seed=12)
    steps: list[Step] = [
        ("remember", 0, 0),
        ("remember", 2, 0),
        ("backup", 0, 0),  # before: it keeps namespace 0 (docs/erasure.md), not checked
        ("recall", 0, 0),
        ("erase", 0, 1),
        ("recall", 0, 0),
        ("backup", 0, 0),
        ("export", 0, 0),
        ("restore", 0, 0),
    ]
    for step in steps:
        world.run(step)
    world.finish()
    assert [c.erased for c in world.copies] == [frozenset(), *[frozenset({0})] * 3]
    assert world.leaks() == []


@settings(
    max_examples=3,  # the long profile: python -m benchmarks erasure_files
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    # A failing interleaving has at most 10 steps: printed as found (shrinking one costs
    # minutes of processes and fsyncs).
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(
    steps=st.lists(step_strategy(), min_size=3, max_size=8),
    world_seed=st.integers(0, 2**32),
)
def test_no_interleaving_brings_an_erased_name_or_word_back(
    steps: list[Step], world_seed: int
) -> None:
    # Every interleaving erases namespace 0 somewhere, so each example checks something.
    steps = [("remember", 0, 0), *steps[:3], ("erase", 0, world_seed % 3), *steps[3:]]
    root = Path(tempfile.mkdtemp(prefix="ml-erasure-files-"))
    try:
        assert check_interleaving(root, world_seed, steps) == []
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_an_erasing_process_killed_before_it_deleted_idle_slots_leaves_them_stale(
    tmp_path: Path,
) -> None:
    world = World(tmp_path, seed=13)
    world.subjects[0].namespace = Namespace(
        "acme", "alice", "s" + world.subjects[0].namespace.scope_id
    )
    steps: list[Step] = [
        ("remember", 0, 0),
        ("child_open", 0, 0),  # slot 1: rows and recall index of namespace 0
        ("child_close", 0, 0),
        ("close", 0, 0),
    ]
    for step in steps:
        world.run(step)
    projections = world.store / "projections"
    assert b"alice" in (projections / "slot-1.recall").read_bytes()
    # tests/erase_child.py erases acme/alice and is killed once the keys are destroyed,
    # before it deleted the idle slots.
    child = subprocess.Popen(  # noqa: S603 (our own module)
        [
            sys.executable,
            "-m",
            "tests.erase_child",
            str(world.store),
            world.key.read_bytes().hex(),
            "erasure.keys_destroyed",
        ],
        cwd=Path(__file__).resolve().parents[2],
        stdout=subprocess.PIPE,
    )
    assert child.stdout is not None
    while json.loads(child.stdout.readline())["kind"] != "at_fault":
        pass
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    world.erased.add(0)
    assert slot_stale(projections / "slot-1.duckdb", 1)
    MemoryEngine.open(world.store, master_key=world.key).close()  # records it, sweeps
    assert not (projections / "slot-1.duckdb").exists()
    assert world.leaks() == []


def _vector_files(store: Path) -> dict[str, int]:
    """Workspace vector files by the folder under ``workspace-vectors`` that holds them."""
    found: dict[str, int] = {}
    for path in (store / "workspace-vectors").rglob("*.npy"):
        owner = path.relative_to(store / "workspace-vectors").parts[0]
        found[owner] = found.get(owner, 0) + 1
    return found


def test_the_erasure_of_a_namespace_deletes_the_workspace_vectors_its_sessions_cached(
    tmp_path: Path,
) -> None:
    import os
    import threading

    from memory_ledger.commands.errors import MemoryLedgerError
    from memory_ledger.commands.session import WorkspaceOptions
    from tests.workspace_helpers import WordBagProvider, write_tree

    repo = write_tree(tmp_path / "repo", {"a.md": "pelican body\n", "b.py": "def kayak(): ...\n"})
    store = tmp_path / "store"
    zed, kay, late = (
        Namespace("zulu", "zed", "coder"),
        Namespace("keep", "kay", "coder"),
        Namespace("zulu", "zoe", "coder"),
    )
    key = os.urandom(32)
    with MemoryEngine.open(store, master_key=key) as engine:
        erased = engine.erased_namespaces
        folders = {ns: erased.namespace_id(ns).hex for ns in (zed, kay, late)}
        for ns in (zed, kay):
            options = WorkspaceOptions(repo, embeddings=WordBagProvider())
            with engine.session(ns, "task", workspace=options) as session:
                assert session.wait_for_workspace(30).files_embedded == 2
        legacy = store / "workspace-vectors" / "0123456789abcdef" / "00"
        legacy.mkdir(parents=True)
        (legacy / ("0" * 64 + ".npy")).write_bytes(b"a vector cached before namespaces")
        assert _vector_files(store) == {folders[zed]: 2, folders[kay]: 2, "0123456789abcdef": 1}
        # zoe's session is embedding (held at the provider) while her tenant is erased
        gate = threading.Event()
        held = WordBagProvider(gate=gate)
        session = engine.session(late, "task", workspace=WorkspaceOptions(repo, embeddings=held))
        assert held.entered.wait(30)
        report = engine.erase("zulu")
        assert report.namespaces == 2
        assert _vector_files(store) == {folders[kay]: 2}  # zed's and the unowned cache went
        gate.set()
        session.wait_for_workspace(30)
        assert held.calls >= 1
        assert _vector_files(store) == {folders[kay]: 2}  # nothing written after the erasure
        try:
            session.close()  # its release cannot be recorded in an erased namespace
        except MemoryLedgerError:
            pass
        assert not any(t.name == "workspace-indexer" for t in threading.enumerate())
        # kay's cache still serves: a reopened session embeds nothing
        again = WordBagProvider()
        with engine.session(kay, "again", workspace=WorkspaceOptions(repo, embeddings=again)) as s:
            assert s.wait_for_workspace(30).cache_hits == 2
        assert again.calls == 0
    # a folder of an erased namespace found when the store opens (its writer was killed
    # while the erasure ran) is deleted then
    stray = store / "workspace-vectors" / folders[zed] / "0123456789abcdef" / "00"
    stray.mkdir(parents=True)
    (stray / ("1" * 64 + ".npy")).write_bytes(b"left by a killed writer")
    MemoryEngine.open(store, master_key=key).close()
    assert _vector_files(store) == {folders[kay]: 2}
