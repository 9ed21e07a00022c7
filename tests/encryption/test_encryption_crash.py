"""A SIGKILL during an erasure leaves the old state or the fully erased one, never a mix
(issue #16).

An erasure destroys the namespace's data key by replacing the key store file (its commit
point), then appends a ``NamespaceErased`` record, then catches the projections up (which
drops the namespace's rows). A child process (``tests/erase_child.py``) erases namespace
``acme/alice`` of a copy of one template store and is SIGKILLed:

- at fault points (``ledger.faults``): ``keys.replace`` (the new key file written, not yet
  renamed over the old one), ``erasure.keys_destroyed`` (keys gone, no record yet),
  ``ledger.put`` / ``ledger.commit`` (inside the record's write transaction),
  ``projections.commit`` (inside the catch-up batch that drops the rows),
  ``projections.rewrite`` (the projection file copied without the rows' old blocks, the
  copy not yet renamed over it);
- at random times after it started erasing.

After each kill the store is reopened (which rolls an interrupted erasure's record forward)
and must be exactly one of:

- old: alice's key is live, no ``NamespaceErased`` record, every event of alice decodes,
  recall and rows of alice as before;
- erased: alice's key is destroyed (wrapped bytes in no file), exactly one
  ``NamespaceErased`` record naming her namespace, every event of hers reads as erased, no
  recall hit and no projection row of hers;

and in both the chain verifies (erased: no file holds a statement of alice's, even in an old
DuckDB block), the live projections equal a rebuild, and bob's recall is
unchanged. Retrying the erasure (as a host would) then ends erased, with one record.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.extraction import RecordedExtractor
from memory_ledger.ledger.events import ErasedPayload, NamespaceErased
from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.key_store import FileKeyStore
from memory_ledger.projections.digest import table_digests
from memory_ledger.replay import rebuild_projections, verify_store
from tests.conftest import make_item
from tests.encryption_helpers import bytes_found

REPO_ROOT = Path(__file__).resolve().parents[2]
ALICE = Namespace("acme", "alice", "chat")
BOB = Namespace("globex", "bob", "chat")
FAULT_POINTS = (
    "keys.replace",
    "erasure.keys_destroyed",
    "ledger.put",
    "ledger.commit",
    "projections.commit",
    "projections.rewrite",
)
TIMER_ROUNDS = 6
QUERIES = ("bees Porto", "espresso", "chess", "choir Sundays")


def alice_hits(engine: MemoryEngine) -> list[Any]:
    return [engine.recall(ALICE, q, 5).results for q in QUERIES]


def bob_hits(engine: MemoryEngine) -> list[Any]:
    return [engine.recall(BOB, q, 5).results for q in QUERIES]


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An encrypted store with two namespaces (direct commands and a reconciled session)."""
    store = tmp_path_factory.mktemp("erase-crash") / "template"
    key = os.urandom(32)
    with MemoryEngine.open(store, master_key=key, sync=False) as engine:
        for ns in (ALICE, BOB):
            engine.remember(ns, f"{ns.principal} drinks espresso at noon.")
            engine.remember(ns, f"{ns.principal} plays chess on Sundays.")
            engine.remember(ns, f"{ns.principal} sings in a choir.")
            extractor = RecordedExtractor()
            session = engine.session(ns, "s1", extractor=extractor)
            extractor.provide(1, [make_item(f"{ns.principal} keeps bees in Porto.")])
            session.observe_final_transcript(1, "user: I keep bees in Porto, ask me anything")
            session.finish()
            session.close()
        alice, bob = alice_hits(engine), bob_hits(engine)
        assert all(alice) and all(bob)
        alice_id = engine.keyring.namespace_id(ALICE)
        [record] = [r for r in engine.keyring.records() if r.namespace_id == alice_id]
        head = engine.head
    return {
        "alice_id": alice_id,
        "store": store,
        "key": key,
        "alice": alice,
        "bob": bob,
        "wrapped": record.wrapped,
        "head": head,
    }


def run_child(store: Path, key: bytes, point: str, delay: float | None) -> str:
    """Erase in a child; SIGKILL it at ``point`` or ``delay`` seconds after it began
    erasing; return how it ended (``killed`` or ``done``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.erase_child", str(store), key.hex(), point],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    try:
        while True:
            line = proc.stdout.readline()
            if not line:
                code = proc.wait(timeout=60)
                assert code == 0, proc.stderr.read().decode()
                return "done"
            message = json.loads(line)
            if message["kind"] == "at_fault":
                break
            if message["kind"] == "erasing" and delay is not None:
                time.sleep(delay)
                break
        proc.send_signal(signal.SIGKILL)
        code = proc.wait(timeout=60)
        return "killed" if code == -signal.SIGKILL else "done"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdout.close()
        proc.stderr.close()


def check_state(store: Path, template: dict[str, Any]) -> str:
    """Reopen the store; assert it is wholly old or wholly erased; return which."""
    key = template["key"]
    # What the kill left in the key store, before an engine rolls anything forward.
    records = FileKeyStore(store / "keys", read_only=True).read().keys
    [alice] = [r for r in records if r.namespace_id == template["alice_id"]]
    with MemoryEngine.open(store, master_key=key, sync=False) as engine:
        erasures, erased_events, alice_events = [], 0, 0
        for _, raw_id, version, topic, state in engine.read_records(0, engine.head + 1):
            event = engine.mapper.decode(topic, state, raw_id, version)  # type: ignore[attr-defined]
            if isinstance(event, NamespaceErased):
                erasures.append(event)
            elif isinstance(event, ErasedPayload):
                erased_events += 1
            elif event.namespace == ALICE:
                alice_events += 1
        report = verify_store(engine)
        assert report.ok and report.checked == engine.head, report
        engine.catch_up()
        assert table_digests(engine.projections.conn) == rebuild_projections(engine).digests
        assert bob_hits(engine) == template["bob"]
        [[alice_rows]] = engine.projections.conn.execute(
            "SELECT count(*) FROM canonical_memory WHERE principal = 'alice'"
        ).fetchall()
        if not alice.erased:
            assert erasures == [] and erased_events == 0
            assert engine.head == template["head"]
            assert alice_events > 0 and alice_rows > 0
            assert alice_hits(engine) == template["alice"]
            return "old"
        assert len(erasures) == 1 and erasures[0].namespace_ids == (template["alice_id"],)
        assert erasures[0].requested_by == "crash-test"
        assert alice_events == 0 and erased_events > 0 and alice_rows == 0
        assert all(hits == () for hits in alice_hits(engine))
        assert bytes_found(template["wrapped"], store) == []
        # No old DuckDB block, WAL or leftover copy keeps a statement (issue 34 item 2).
        assert bytes_found(b"alice drinks espresso", store) == []
        return "erased"


def test_sigkill_during_erasure_leaves_old_or_fully_erased_state(
    template: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rng = random.Random(16)
    rounds: list[tuple[str, float | None]] = [(point, None) for point in FAULT_POINTS]
    # The key store is replaced within a few ms of the start: most timers aim at that.
    rounds += [("none", rng.uniform(0.0, 0.004)) for _ in range(TIMER_ROUNDS - 2)]
    rounds += [("none", rng.uniform(0.004, 0.04)) for _ in range(2)]
    outcomes: Counter[str] = Counter()
    for number, (point, delay) in enumerate(rounds):
        store = tmp_path / f"round-{number}"
        shutil.copytree(template["store"], store)
        ended = run_child(store, template["key"], point, delay)
        state = check_state(store, template)
        outcomes[f"{point if delay is None else 'timer'}:{ended}:{state}"] += 1
        if point == "keys.replace":
            assert state == "old"  # killed before the commit point
        elif delay is None:
            assert ended == "killed" and state == "erased"  # after it: rolled forward
        # A host retries the erasure: it ends erased, with exactly one record.
        with MemoryEngine.open(store, master_key=template["key"], sync=False) as engine:
            again = engine.erase("acme", "alice", requested_by="crash-test")
            assert again.namespaces == (1 if state == "old" else 0)
        assert check_state(store, template) == "erased"
    with capsys.disabled():
        print(f"\nerasure kills: {dict(sorted(outcomes.items()))}")
    assert sum(n for k, n in outcomes.items() if ":killed:" in k) >= len(FAULT_POINTS)
