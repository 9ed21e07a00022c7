"""Behaviour of ``memory_ledger.ledger.lmdb`` beyond the library's conformance cases.

Multi-process properties (gapless ids, map growth, stale reader slots, durability,
cross-process subscriptions) run real child processes: fresh interpreters started with
``subprocess`` and ``sys.executable`` (never forked from this process, which has LMDB
environments open), whose entry points live in ``tests/lmdb_child.py``.
"""

from __future__ import annotations

import hashlib
import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from uuid import UUID, uuid4

import pytest
from eventsourcing.persistence import (
    DatabaseError,
    InfrastructureFactory,
    IntegrityError,
    Notification,
    OperationalError,
    StoredEvent,
    Tracking,
)
from eventsourcing.utils import Environment
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from memory_ledger.ledger.lmdb import (
    FORMAT_VERSION,
    GENESIS_HASH,
    LedgerFormatError,
    LMDBApplicationRecorder,
    LMDBDatastore,
    LMDBFactory,
    LMDBProcessRecorder,
    decode_record,
)

try:
    import lmdb_child
except ImportError:  # pragma: no cover - when pytest does not put tests/ on sys.path
    from tests import lmdb_child

TESTS_DIR = Path(__file__).resolve().parents[1]
REPO_ROOT = TESTS_DIR.parent
CHILD_FILE = TESTS_DIR / "lmdb_child.py"
TOPIC = lmdb_child.TOPIC
MiB = 1024**2

LMDB_MODULE = "memory_ledger.ledger.lmdb"


# Child processes ----------------------------------------------------------------------------


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Child:
    """One child interpreter running an entry point of ``tests/lmdb_child.py``."""

    def __init__(self, entry_point: str, *args: Any) -> None:
        self.name = entry_point
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD_FILE), entry_point, json.dumps(list(args))],
            cwd=REPO_ROOT,
            env=_child_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: list[str] = []
        threading.Thread(target=self._pump_stdout, daemon=True).start()
        threading.Thread(target=self._pump_stderr, daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _pump_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self._stderr.append(line)

    def message(self, timeout: float = 30.0) -> dict[str, Any]:
        """The next JSON message from the child (fails on timeout or exit)."""
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"{self.name} sent nothing within {timeout}s; stderr:\n{''.join(self._stderr)}"
            ) from None
        if line is None:
            self.proc.wait(timeout=10)
            raise AssertionError(
                f"{self.name} exited with {self.proc.returncode}; stderr:\n{''.join(self._stderr)}"
            )
        return dict(json.loads(line))

    def expect(self, key: str, timeout: float = 30.0) -> Any:
        message = self.message(timeout)
        assert key in message, (message, "".join(self._stderr))
        return message[key]

    def go(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def result(self, timeout: float = 30.0) -> dict[str, Any]:
        result = self.expect("result", timeout)
        self.proc.wait(timeout=10)
        assert self.proc.returncode == 0, "".join(self._stderr)
        return dict(result)

    def sigkill(self) -> None:
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        assert self.proc.returncode == -signal.SIGKILL

    def cleanup(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=10)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def spawn() -> Iterator[Callable[..., Child]]:
    """Start child processes; any still running at teardown are killed."""
    started: list[Child] = []

    def start(entry_point: str, *args: Any) -> Child:
        child = Child(entry_point, *args)
        started.append(child)
        return child

    yield start
    for child in started:
        child.cleanup()


# In-process helpers --------------------------------------------------------------------------


@pytest.fixture
def open_store(tmp_path: Path) -> Iterator[Callable[..., LMDBDatastore]]:
    """Open datastores (sync off unless asked); all are closed at teardown."""
    opened: list[LMDBDatastore] = []

    def open_(path: Path | str | None = None, **kwargs: Any) -> LMDBDatastore:
        kwargs.setdefault("map_size", 4 * MiB)
        kwargs.setdefault("sync", False)
        datastore = LMDBDatastore(str(path or tmp_path / "store"), **kwargs)
        opened.append(datastore)
        return datastore

    yield open_
    for datastore in opened:
        datastore.close()


def all_notifications(recorder: LMDBApplicationRecorder) -> list[Notification]:
    return list(recorder.select_notifications(start=1, limit=1_000_000))


def chain_mismatches(recorder: LMDBApplicationRecorder) -> tuple[list[int], int | None]:
    """Walk ``iter_records()`` and recompute every hash.

    Returns the ids whose stored hash differs from ``sha256(stored prev hash || body)`` (a local
    check that pinpoints tampered records), and the first id from which the chain recomputed
    from :data:`GENESIS_HASH` alone stops matching the stored hashes (None when it all matches).
    """
    local: list[int] = []
    first_broken: int | None = None
    stored_prev = chained = GENESIS_HASH
    expected_id = 1
    for record in recorder.iter_records(page=7):
        assert record.notification_id == expected_id
        expected_id += 1
        if hashlib.sha256(stored_prev + record.body).digest() != record.record_hash:
            local.append(record.notification_id)
        chained = hashlib.sha256(chained + record.body).digest()
        if first_broken is None and chained != record.record_hash:
            first_broken = record.notification_id
        stored_prev = record.record_hash
    return local, first_broken


def reader_pids(readers_text: str) -> set[int]:
    """Pids listed by ``lmdb.Environment.readers()`` (its first column)."""
    pids = set()
    for line in readers_text.splitlines():
        fields = line.split()
        if fields and fields[0].isdigit():
            pids.add(int(fields[0]))
    return pids


# 1. Concurrent writers ----------------------------------------------------------------------


def test_concurrent_processes_get_gapless_contiguous_ids(
    tmp_path: Path, spawn: Callable[..., Child], open_store: Callable[..., LMDBDatastore]
) -> None:
    path = str(tmp_path / "store")
    n_children, n_batches, batch_size = 4, 50, 5
    total = n_children * n_batches * batch_size
    # The children create the store concurrently, then all start writing at once.
    children = [spawn("concurrent_writer", path, c, n_batches, batch_size) for c in range(4)]
    for child in children:
        child.expect("ready")
    for child in children:
        child.go()
    returned = {c: child.result()["ids"] for c, child in enumerate(children)}

    recorder = LMDBApplicationRecorder(open_store(path))
    notifications = all_notifications(recorder)
    assert [n.id for n in notifications] == list(range(1, total + 1))
    assert recorder.max_notification_id() == total

    by_batch: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for n in notifications:
        c, b, i = json.loads(n.state)
        assert n.originator_id == lmdb_child.stream_id("writer", c)
        assert n.originator_version == b * batch_size + i + 1
        by_batch.setdefault((c, b), []).append((i, n.id))
    assert set(by_batch) == {(c, b) for c in range(n_children) for b in range(n_batches)}
    for (c, b), members in by_batch.items():
        indexes = [i for i, _ in members]
        ids = [nid for _, nid in members]
        assert indexes == list(range(batch_size)), (c, b, members)
        # Contiguous: no other insert landed inside this batch.
        assert ids == list(range(ids[0], ids[0] + batch_size)), (c, b, ids)
        # And it is exactly what insert_events returned to that child.
        assert returned[c][b] == ids
    for c in range(n_children):
        versions = [
            e.originator_version for e in recorder.select_events(lmdb_child.stream_id("writer", c))
        ]
        assert versions == list(range(1, n_batches * batch_size + 1))
    assert chain_mismatches(recorder) == ([], None)


# 2. Map growth across processes ---------------------------------------------------------------


def test_map_grows_past_small_map_size_while_another_process_reads(
    tmp_path: Path, spawn: Callable[..., Child], open_store: Callable[..., LMDBDatastore]
) -> None:
    path = str(tmp_path / "store")
    map_size = 1 * MiB
    n_writers, batches, batch_size, size = 2, 64, 4, 16 * 1024  # 8 MiB of payloads in all
    total = n_writers * batches * batch_size
    # The reader opens (and creates) the store first, so it maps only the small size and
    # must adopt every growth the writers make.
    reader = spawn("looping_reader", path, map_size, total, size, 30.0)
    reader.expect("ready")
    writers = [
        spawn("growing_writer", path, map_size, batches, batch_size, size, w)
        for w in range(n_writers)
    ]
    for writer in writers:
        writer.expect("ready")
    for writer in writers:
        writer.go()
    written = [writer.result(timeout=60) for writer in writers]
    read = reader.result(timeout=60)

    for result in written:
        assert "error" not in result, result.get("traceback")
        last = result["last_ids"]
        assert last == list(range(last[0], last[0] + batch_size))
        assert result["map_size"] >= 8 * MiB
    assert "error" not in read, read.get("traceback")  # e.g. MapFullError, MapResizedError
    assert max(result["last_ids"][-1] for result in written) == total
    assert sum(result["_grow"] for result in written) >= 3  # 1 MiB -> at least 8 MiB
    assert read["read_up_to"] == total
    assert read["max_seen"] == total
    assert read["_adopt_new_size"] >= 1  # the reader did see MDB_MAP_RESIZED and adopted it

    datastore = open_store(path, map_size=map_size)
    recorder = LMDBApplicationRecorder(datastore)
    notifications = all_notifications(recorder)
    assert [n.id for n in notifications] == list(range(1, total + 1))
    seen = {}
    for n in notifications:
        tag = n.state.split(b"|", 1)[0].decode()
        w, batch, index = map(int, tag.split(":"))
        assert n.originator_id == lmdb_child.stream_id("grow", w, batch)
        assert n.originator_version == index + 1
        assert n.state == lmdb_child.payload(tag, size)
        seen[(w, batch, index)] = n.id
    assert len(seen) == total
    for w in range(n_writers):
        for batch in range(batches):
            first = seen[(w, batch, 0)]
            assert [seen[(w, batch, i)] for i in range(batch_size)] == list(
                range(first, first + batch_size)
            )
    assert os.path.getsize(os.path.join(path, "data.mdb")) >= 8 * MiB
    assert chain_mismatches(recorder) == ([], None)


def _read_continuously(
    recorder: LMDBApplicationRecorder, state: bytes | None, done: threading.Event
) -> Callable[[], None]:
    """A thread target: read the tail of the log until ``done``; raise on inconsistency."""

    def read_loop() -> None:
        while not done.is_set():
            last = recorder.max_notification_id() or 0
            start = max(last - 3, 1)
            notifications = recorder.select_notifications(start=start, limit=10)
            # A later snapshot than max_notification_id's: it may hold more, never less.
            ids = [n.id for n in notifications]
            assert ids == list(range(start, start + len(ids)))
            assert not last or ids[-1] >= last
            assert state is None or all(n.state == state for n in notifications)

    return read_loop


def _with_busy_readers(
    recorder: LMDBApplicationRecorder,
    action: Callable[[], Any],
    *,
    readers: int,
    budget: float,
    state: bytes | None = None,
) -> tuple[bool, Any]:
    """Run ``action`` in a thread while ``readers`` threads read without pause.

    Returns whether it finished within ``budget`` seconds, and its result (or exception).
    The readers are stopped and joined in any case; reader errors fail the test.
    """
    done = threading.Event()
    errors: list[BaseException] = []
    outcome: list[Any] = []
    read_loop = _read_continuously(recorder, state, done)

    def guarded(target: Callable[[], Any], sink: list[Any]) -> None:
        try:
            result = target()
        except BaseException as e:
            sink.append(e)
        else:
            if sink is outcome:
                sink.append(result)

    threads = [threading.Thread(target=guarded, args=(read_loop, errors)) for _ in range(readers)]
    for thread in threads:
        thread.start()
    time.sleep(0.05)
    worker = threading.Thread(target=guarded, args=(action, outcome))
    worker.start()
    worker.join(timeout=budget)
    finished = not worker.is_alive()
    done.set()
    for thread in [*threads, worker]:
        thread.join(timeout=60)
    assert not any(t.is_alive() for t in [*threads, worker])
    assert errors == []
    return finished, outcome[0] if outcome else None


# A failed write transaction must not wait for busy readers: with py-lmdb >= 2, aborting a
# write transaction waits until no LMDB call of the process is in flight, which threads that
# read without pause can postpone indefinitely, holding LMDB's writer lock for every process.
# ledger.lmdb therefore commits refused (untouched) transactions and grows the map ahead of
# a write instead of aborting. These guard that; the stall shows most on a loaded machine.


def test_rejected_batch_returns_promptly_while_threads_read(
    open_store: Callable[..., LMDBDatastore],
) -> None:
    recorder = LMDBApplicationRecorder(open_store(map_size=16 * MiB))
    oid = uuid4()
    recorder.insert_events([StoredEvent(oid, v, TOPIC, b"x") for v in range(1, 20)])

    def insert_duplicates() -> int:
        rejected = 0
        for version in range(1, 6):
            try:
                recorder.insert_events([StoredEvent(oid, version, TOPIC, b"duplicate")])
            except IntegrityError:
                rejected += 1
        return rejected

    finished, rejected = _with_busy_readers(recorder, insert_duplicates, readers=4, budget=10.0)
    assert finished, "a rejected insert blocked while other threads were reading"
    assert rejected == 5
    assert recorder.max_notification_id() == 19


def test_map_grows_promptly_while_threads_read(
    open_store: Callable[..., LMDBDatastore],
) -> None:
    datastore = open_store(map_size=128 * 1024)
    recorder = LMDBApplicationRecorder(datastore)
    state, oid = b"s" * 20_000, uuid4()

    def write_all() -> list[int]:
        ids: list[int] = []
        for version in range(1, 101):
            ids.extend(recorder.insert_events([StoredEvent(oid, version, TOPIC, state)]) or [])
        return ids

    finished, ids = _with_busy_readers(recorder, write_all, readers=4, budget=10.0, state=state)
    assert finished, "growing the map blocked while other threads were reading"
    assert ids == list(range(1, 101))
    assert datastore.env.info()["map_size"] >= 2 * MiB
    assert [n.id for n in all_notifications(recorder)] == list(range(1, 101))


def test_map_grows_in_process_and_writes_keep_working(
    open_store: Callable[..., LMDBDatastore],
) -> None:
    datastore = open_store(map_size=64 * 1024)
    recorder = LMDBApplicationRecorder(datastore)
    start_size = datastore.env.info()["map_size"]
    big = b"x" * 100_000
    oid = uuid4()
    ids = [recorder.insert_events([StoredEvent(oid, v, TOPIC, big)])[0] for v in range(1, 21)]
    assert ids == list(range(1, 21))
    assert datastore.env.info()["map_size"] > start_size
    assert [e.state for e in recorder.select_events(oid)] == [big] * 20


# 3. Stale reader slots ------------------------------------------------------------------------


@pytest.mark.parametrize("parent_holds_env", [True, False], ids=["parent-open", "parent-closed"])
def test_stale_reader_slot_of_killed_process_is_cleared_on_open(
    tmp_path: Path,
    spawn: Callable[..., Child],
    open_store: Callable[..., LMDBDatastore],
    parent_holds_env: bool,
) -> None:
    path = str(tmp_path / "store")
    datastore = open_store(path)
    recorder = LMDBApplicationRecorder(datastore)
    oid = uuid4()
    assert recorder.insert_events([StoredEvent(oid, 1, TOPIC, b"a")]) == [1]
    if not parent_holds_env:
        datastore.close()

    holder = spawn("hold_read_transaction", path)
    holder_pid = holder.expect("ready")
    assert holder_pid == holder.pid
    if parent_holds_env:
        assert holder_pid in reader_pids(datastore.env.readers())
    holder.sigkill()
    if parent_holds_env:
        # The dead process still occupies its slot until someone checks.
        assert holder_pid in reader_pids(datastore.env.readers())

    fresh = spawn("fresh_open", path).result()
    assert "error" not in fresh, fresh.get("traceback")
    assert holder_pid not in reader_pids(fresh["readers"])
    assert fresh["ids"] == [2, 3, 4]
    if parent_holds_env:
        # The lock table was not reinitialised (this process holds it): reader_check did it.
        assert fresh["cleared"] >= 1
        assert holder_pid not in reader_pids(datastore.env.readers())
        assert recorder.insert_events([StoredEvent(oid, 2, TOPIC, b"b")]) == [5]
    else:
        recorder = LMDBApplicationRecorder(open_store(path))
    assert [n.id for n in all_notifications(recorder)] == list(
        range(1, 6 if parent_holds_env else 5)
    )


# 4. Duplicates abort the whole batch ---------------------------------------------------------


def test_duplicate_inside_and_across_batches_writes_nothing_of_the_batch(
    open_store: Callable[..., LMDBDatastore],
) -> None:
    datastore = open_store()
    recorder = LMDBApplicationRecorder(datastore)
    a, b = uuid4(), uuid4()
    assert recorder.insert_events([StoredEvent(a, 1, TOPIC, b"a1")]) == [1]
    last_txnid = datastore.env.info()["last_txnid"]
    with pytest.raises(IntegrityError):  # duplicate inside the batch
        recorder.insert_events(
            [StoredEvent(b, 1, TOPIC, b"b1"), StoredEvent(a, 2, TOPIC, b"a2")]
            + [StoredEvent(b, 1, TOPIC, b"b1 again")]
        )
    with pytest.raises(IntegrityError):  # duplicate of an already recorded event
        recorder.insert_events([StoredEvent(b, 1, TOPIC, b"b1"), StoredEvent(a, 1, TOPIC, b"x")])
    assert recorder.max_notification_id() == 1
    assert recorder.select_events(b) == []
    assert [e.originator_version for e in recorder.select_events(a)] == [1]
    assert datastore.env.info()["last_txnid"] == last_txnid  # no write was committed at all
    # The refused events can be recorded later, and take the next ids.
    assert recorder.insert_events(
        [StoredEvent(b, 1, TOPIC, b"b1"), StoredEvent(a, 2, TOPIC, b"a2")]
    ) == [2, 3]
    assert chain_mismatches(recorder) == ([], None)


def test_stale_tracking_refuses_the_whole_process_batch(
    open_store: Callable[..., LMDBDatastore],
) -> None:
    datastore = open_store()
    recorder = LMDBProcessRecorder(datastore)
    oid = uuid4()
    ids = recorder.insert_events(
        [StoredEvent(oid, 1, TOPIC, b"1")], tracking=Tracking("upstream", 5)
    )
    assert ids == [1]
    last_txnid = datastore.env.info()["last_txnid"]
    for stale in (5, 4):
        with pytest.raises(IntegrityError):
            recorder.insert_events(
                [StoredEvent(oid, 2, TOPIC, b"2")], tracking=Tracking("upstream", stale)
            )
    assert datastore.env.info()["last_txnid"] == last_txnid
    assert recorder.max_notification_id() == 1
    assert recorder.max_tracking_id("upstream") == 5
    assert recorder.insert_events(
        [StoredEvent(oid, 2, TOPIC, b"2")], tracking=Tracking("upstream", 6)
    ) == [2]
    assert recorder.max_tracking_id("upstream") == 6


event_keys = st.tuples(st.integers(0, 2), st.integers(1, 4))  # (stream, version)
batches_strategy = st.lists(st.lists(event_keys, max_size=5), min_size=1, max_size=10)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batches_strategy, text_ids=st.booleans())
def test_log_equals_model_of_accepted_batches(
    batches: list[list[tuple[int, int]]], text_ids: bool
) -> None:
    with tempfile.TemporaryDirectory(prefix="lmdb_model_") as tmp:
        datastore = LMDBDatastore(
            tmp, map_size=4 * MiB, sync=False, originator_id_type="text" if text_ids else "uuid"
        )
        try:
            recorder = LMDBApplicationRecorder(datastore)
            streams: list[UUID | str] = [
                f"stream-{i}-{uuid4()}" if text_ids else uuid4() for i in range(3)
            ]
            model: list[tuple[UUID | str, int, bytes]] = []  # the log, in order
            recorded: set[tuple[int, int]] = set()
            for batch_no, batch in enumerate(batches):
                events = [
                    StoredEvent(streams[s], v, TOPIC, f"{batch_no}:{pos}".encode())
                    for pos, (s, v) in enumerate(batch)
                ]
                before = recorder.max_notification_id()
                assert before == (len(model) or None)
                duplicate = len(set(batch)) < len(batch) or any(k in recorded for k in batch)
                event("rejected batch" if duplicate else "accepted batch")
                if duplicate:
                    with pytest.raises(IntegrityError):
                        recorder.insert_events(events)
                    assert recorder.max_notification_id() == before
                    for s, v in set(batch) - recorded:
                        assert recorder.select_events(streams[s], gt=v - 1, lte=v) == []
                else:
                    ids = recorder.insert_events(events)
                    assert ids == list(range(len(model) + 1, len(model) + len(events) + 1))
                    model.extend((e.originator_id, e.originator_version, e.state) for e in events)
                    recorded.update(batch)

            log = all_notifications(recorder)
            assert [n.id for n in log] == list(range(1, len(model) + 1))
            assert [(n.originator_id, n.originator_version, n.state) for n in log] == model
            for stream in streams:
                expected = sorted((v, state) for oid, v, state in model if oid == stream)
                stored = [(e.originator_version, e.state) for e in recorder.select_events(stream)]
                assert stored == expected
            assert chain_mismatches(recorder) == ([], None)
        finally:
            datastore.close()


# 5. Hash chain -------------------------------------------------------------------------------


def _fill(recorder: LMDBApplicationRecorder, total: int) -> None:
    oids = [uuid4() for _ in range(3)]
    versions = [0, 0, 0]
    written = 0
    batch_size = 1
    while written < total:
        events = []
        for _ in range(min(batch_size, total - written)):
            s = written % 3
            versions[s] += 1
            events.append(StoredEvent(oids[s], versions[s], TOPIC, os.urandom(1 + written % 50)))
            written += 1
        recorder.insert_events(events)
        batch_size = batch_size % 4 + 1


def test_hash_chain_recomputes_from_genesis(open_store: Callable[..., LMDBDatastore]) -> None:
    recorder = LMDBApplicationRecorder(open_store())
    assert list(recorder.iter_records()) == []
    _fill(recorder, 40)
    records = list(recorder.iter_records(page=7))
    assert [r.notification_id for r in records] == list(range(1, 41))
    assert records[0].record_hash == hashlib.sha256(GENESIS_HASH + records[0].body).digest()
    assert chain_mismatches(recorder) == ([], None)
    # iter_records from the middle, and its records agree with the notifications.
    assert [r.notification_id for r in recorder.iter_records(start=35, page=2)] == list(
        range(35, 41)
    )
    for record, n in zip(records, all_notifications(recorder), strict=True):
        assert (record.originator_id, record.originator_version, record.topic, record.state) == (
            n.originator_id,
            n.originator_version,
            n.topic,
            n.state,
        )


def test_select_raw_pages_agree_with_the_notifications(
    open_store: Callable[..., LMDBDatastore],
) -> None:
    recorder = LMDBApplicationRecorder(open_store())
    assert recorder.select_raw(0, 10) == []
    _fill(recorder, 40)
    notifications = all_notifications(recorder)
    expected = [
        (n.id, n.originator_id.bytes, n.originator_version, n.topic, n.state) for n in notifications
    ]
    assert recorder.select_raw(0, 100) == expected
    assert recorder.select_raw(5, 7) == expected[5:12]
    assert recorder.select_raw(5, 100, stop=9) == expected[5:9]
    assert recorder.select_raw(39, 100, stop=1 << 70) == expected[39:]
    assert recorder.select_raw(40, 10) == []
    assert recorder.select_raw(0, 0) == []
    assert recorder.select_raw(0, 10, stop=0) == recorder.select_raw(0, 10, stop=-3) == []


@pytest.mark.parametrize("position", [1, 17, 40])
def test_flipping_one_stored_byte_is_detected_at_that_position(
    open_store: Callable[..., LMDBDatastore], position: int
) -> None:
    datastore = open_store()
    recorder = LMDBApplicationRecorder(datastore)
    _fill(recorder, 40)
    key = position.to_bytes(8, "big")
    log = datastore.db(b"log")
    with datastore.read() as txn:
        original = bytes(txn.get(key, db=log))
    tampered = bytearray(original)
    tampered[-1] ^= 0x01  # last byte of the body: inside the event state, still decodes
    datastore.write(lambda txn: txn.put(key, bytes(tampered), db=log))

    assert chain_mismatches(recorder) == ([position], position)
    before, after = decode_record(key, original), decode_record(key, bytes(tampered))
    assert after.record_hash == before.record_hash
    assert after.state != before.state
    assert len(after.state) == len(before.state)


# 6. Format version ---------------------------------------------------------------------------


def test_newer_format_version_refuses_to_open(
    tmp_path: Path, spawn: Callable[..., Child], open_store: Callable[..., LMDBDatastore]
) -> None:
    path = str(tmp_path / "store")
    datastore = open_store(path)
    with datastore.read() as txn:
        assert txn.get(b"format_version", db=datastore.db(b"meta")) == str(FORMAT_VERSION).encode()
    LMDBApplicationRecorder(datastore).insert_events([StoredEvent(uuid4(), 1, TOPIC, b"x")])
    newer = FORMAT_VERSION + 1
    datastore.write(
        lambda txn: txn.put(b"format_version", str(newer).encode(), db=datastore.db(b"meta"))
    )
    datastore.close()  # the only handle on this path in this process

    # A fresh process refuses it...
    refused = spawn("try_open", path).result()
    assert refused["error_type"] == "memory_ledger.ledger.errors.LedgerFormatError"
    assert f"format version {newer}" in refused["message"]
    assert os.path.realpath(path) in refused["message"]
    # ...and so does this one, now that it has no handle open on the path.
    with pytest.raises(LedgerFormatError) as excinfo:
        LMDBDatastore(path, sync=False)
    assert isinstance(excinfo.value, DatabaseError)
    assert f"format version {newer}" in str(excinfo.value)
    assert os.path.realpath(path) in str(excinfo.value)


def test_current_format_version_reopens(
    tmp_path: Path, spawn: Callable[..., Child], open_store: Callable[..., LMDBDatastore]
) -> None:
    path = str(tmp_path / "store")
    open_store(path).close()
    assert spawn("try_open", path).result() == {"opened": True}


def test_unreadable_format_version_refuses_to_open(
    tmp_path: Path, spawn: Callable[..., Child], open_store: Callable[..., LMDBDatastore]
) -> None:
    path = str(tmp_path / "store")
    datastore = open_store(path)
    datastore.write(lambda txn: txn.put(b"format_version", b"v1", db=datastore.db(b"meta")))
    datastore.close()
    refused = spawn("try_open", path).result()
    assert refused["error_type"] == "memory_ledger.ledger.errors.LedgerFormatError"
    assert "unreadable format version" in refused["message"]
    assert os.path.realpath(path) in refused["message"]


def test_refused_open_leaves_a_newer_store_untouched(
    tmp_path: Path, spawn: Callable[..., Child]
) -> None:
    path = str(tmp_path / "store")
    spawn("raw_make_store", path, str(FORMAT_VERSION + 1)).result()
    before = spawn("raw_store_state", path).result()
    assert before["dbs"] == ["meta"]
    refused = spawn("try_open", path).result()
    assert refused["error_type"] == "memory_ledger.ledger.errors.LedgerFormatError"
    assert spawn("raw_store_state", path).result() == before


# 7. Durability -------------------------------------------------------------------------------


def test_acknowledged_ids_survive_sigkill_with_sync_on(
    tmp_path: Path, spawn: Callable[..., Child], open_store: Callable[..., LMDBDatastore]
) -> None:
    path = str(tmp_path / "store")
    batch_size = 3
    writer = spawn("acknowledging_writer", path, 100_000, batch_size)
    writer.expect("ready")
    acked: list[dict[str, Any]] = [writer.expect("ack") for _ in range(25)]
    writer.sigkill()  # mid-stream: it was still writing

    recorder = LMDBApplicationRecorder(open_store(path))
    notifications = {n.id: n for n in all_notifications(recorder)}
    max_id = recorder.max_notification_id()
    assert max_id is not None and sorted(notifications) == list(range(1, max_id + 1))
    for ack in acked:
        batch = ack["batch"]
        assert ack["ids"] == list(range(batch * batch_size + 1, (batch + 1) * batch_size + 1))
        for index, nid in enumerate(ack["ids"]):
            n = notifications[nid]
            assert n.originator_id == lmdb_child.stream_id("ack", batch)
            assert n.originator_version == index + 1
            assert n.state == f"{batch}:{index}".encode()
    assert chain_mismatches(recorder) == ([], None)


@pytest.mark.parametrize("sync", ["n", "y"])
def test_factory_lmdb_sync_setting_round_trips(tmp_path: Path, sync: str) -> None:
    env = {
        "PERSISTENCE_MODULE": LMDB_MODULE,
        "LMDB_PATH": str(tmp_path / "s"),
        "LMDB_SYNC": sync,
    }
    factory = InfrastructureFactory.construct(env=env)
    assert isinstance(factory, LMDBFactory)
    try:
        assert factory.datastore.sync is (sync == "y")
        flags = factory.datastore.env.flags()
        assert flags["sync"] is (sync == "y")
        assert flags["metasync"] is (sync == "y")
        recorder = factory.application_recorder()
        oid = uuid4()
        events = [StoredEvent(oid, v, TOPIC, f"state {v}".encode()) for v in (1, 2, 3)]
        assert recorder.insert_events(events) == [1, 2, 3]
    finally:
        factory.close()
    reopened = InfrastructureFactory.construct(env=env)
    try:
        recorder = reopened.application_recorder()
        assert list(recorder.select_events(oid)) == events
        assert [n.id for n in recorder.select_notifications(start=1, limit=10)] == [1, 2, 3]
    finally:
        reopened.close()


# 8. Subscriptions ----------------------------------------------------------------------------


def _collect(subscription: Any, count: int, timeout: float) -> list[Notification]:
    """Take ``count`` notifications, stopping the subscription if they take too long."""
    watchdog = threading.Timer(timeout, subscription.stop)
    watchdog.start()
    received: list[Notification] = []
    try:
        for notification in subscription:
            received.append(notification)
            if len(received) == count:
                break
    finally:
        watchdog.cancel()
    return received


def test_subscription_receives_events_written_by_another_process(
    tmp_path: Path, spawn: Callable[..., Child], open_store: Callable[..., LMDBDatastore]
) -> None:
    path = str(tmp_path / "store")
    recorder = LMDBApplicationRecorder(open_store(path, poll_interval=0.05))
    oid = uuid4()
    recorder.insert_events([StoredEvent(oid, 1, TOPIC, b"p1"), StoredEvent(oid, 2, TOPIC, b"p2")])
    writer = spawn("subscription_writer", path, 5, 3, 0.05)
    writer.expect("ready")
    with recorder.subscribe(gt=None) as subscription:
        writer.go()
        received = _collect(subscription, 17, timeout=20)
    written = writer.result()
    assert written["ids"] == list(range(3, 18))
    assert [n.id for n in received] == list(range(1, 18))
    assert [n.state for n in received[:2]] == [b"p1", b"p2"]
    for n in received[2:]:
        batch, index = divmod(n.id - 3, 3)
        assert n.originator_id == lmdb_child.stream_id("sub", batch)
        assert n.state == f"{batch}:{index}".encode()


def test_subscription_is_woken_promptly_by_in_process_writes(
    tmp_path: Path, open_store: Callable[..., LMDBDatastore]
) -> None:
    path = tmp_path / "store"
    # Polling every 30 s cannot explain a prompt delivery: only the in-process wake-up can.
    recorder = LMDBApplicationRecorder(open_store(path, poll_interval=30.0))
    # Another handle on the same path shares the environment, and so its listeners.
    writer = LMDBApplicationRecorder(open_store(path))
    oid = uuid4()
    writer.insert_events([StoredEvent(oid, 1, TOPIC, b"before")])
    with recorder.subscribe(gt=None) as subscription:
        assert [n.state for n in _collect(subscription, 1, timeout=5)] == [b"before"]
        for version in (2, 3, 4):
            time.sleep(0.1)  # let the pull thread go back to waiting
            started = time.monotonic()
            writer.insert_events([StoredEvent(oid, version, TOPIC, b"v%d" % version)])
            received = _collect(subscription, 1, timeout=5)
            latency = time.monotonic() - started
            assert [n.id for n in received] == [version]
            assert latency < 2.0
    # Stopping the subscription unregisters its wake-up event.
    assert not recorder.datastore.shared.listeners


def test_subscription_gt_and_topics(open_store: Callable[..., LMDBDatastore]) -> None:
    recorder = LMDBApplicationRecorder(open_store(poll_interval=0.05))
    oid = uuid4()
    recorder.insert_events(
        [StoredEvent(oid, v, "other:Topic" if v % 2 else TOPIC, b"") for v in range(1, 7)]
    )
    with recorder.subscribe(gt=2, topics=[TOPIC]) as subscription:
        assert [n.id for n in _collect(subscription, 2, timeout=5)] == [4, 6]


# 9. Typed errors -----------------------------------------------------------------------------


def _construct(tmp_path: Path, **settings: str) -> InfrastructureFactory[Any]:
    env = {
        "PERSISTENCE_MODULE": LMDB_MODULE,
        "LMDB_PATH": str(tmp_path / "s"),
        **settings,
    }
    return InfrastructureFactory.construct(env=env)


@pytest.mark.parametrize("value", ["lots", "1.5MB", "0", "-4096"])
def test_bad_map_size_raises_oserror_naming_the_key(tmp_path: Path, value: str) -> None:
    with pytest.raises(OSError, match="LMDB_MAP_SIZE"):
        _construct(tmp_path, LMDB_MAP_SIZE=value)
    assert not (tmp_path / "s").exists()  # nothing was opened


def test_map_size_setting_is_used(tmp_path: Path) -> None:
    factory = _construct(tmp_path, LMDB_MAP_SIZE=f" {2 * MiB} ", LMDB_SYNC="n")
    try:
        assert factory.datastore.env.info()["map_size"] == 2 * MiB  # type: ignore[attr-defined]
    finally:
        factory.close()


@pytest.mark.parametrize("path", [None, ""])
def test_missing_lmdb_path_raises_oserror_naming_the_key(path: str | None) -> None:
    env = {"PERSISTENCE_MODULE": LMDB_MODULE}
    if path is not None:
        env["LMDB_PATH"] = path
    with pytest.raises(OSError, match="LMDB_PATH"):
        InfrastructureFactory.construct(env=env)
    # With an application name, both the prefixed and the plain key are named.
    with pytest.raises(OSError, match="MYAPP_LMDB_PATH.*LMDB_PATH"):
        LMDBFactory(Environment(name="MyApp", env=env))


@pytest.mark.parametrize("value", ["int", "uuid4", "bytes"])
def test_invalid_originator_id_type_raises_oserror_naming_the_key(
    tmp_path: Path, value: str
) -> None:
    with pytest.raises(OSError, match="ORIGINATOR_ID_TYPE") as excinfo:
        _construct(tmp_path, ORIGINATOR_ID_TYPE=value)
    assert value in str(excinfo.value)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("value", ["TEXT", "uuid"])
def test_valid_originator_id_types_are_accepted(tmp_path: Path, value: str) -> None:
    factory = _construct(tmp_path, ORIGINATOR_ID_TYPE=value, LMDB_SYNC="n")
    try:
        assert factory.datastore.originator_id_type == value.lower()  # type: ignore[attr-defined]
    finally:
        factory.close()


@pytest.mark.parametrize(("key", "value"), [("LMDB_SYNC", "maybe"), ("LMDB_POLL_INTERVAL", "soon")])
def test_invalid_sync_and_poll_settings_raise_oserror_naming_the_key(
    tmp_path: Path, key: str, value: str
) -> None:
    with pytest.raises(OSError, match=key) as excinfo:
        _construct(tmp_path, **{key: value})
    assert value in str(excinfo.value)
    assert not (tmp_path / "s").exists()


def test_uncreatable_directory_raises_operational_error_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "regular-file"
    blocker.write_text("not a directory")
    store = blocker / "store"
    with pytest.raises(OperationalError) as excinfo:
        LMDBDatastore(str(store), sync=False)
    assert str(store) in str(excinfo.value)
    with pytest.raises(OperationalError) as excinfo:
        InfrastructureFactory.construct(
            env={
                "PERSISTENCE_MODULE": LMDB_MODULE,
                "LMDB_PATH": str(store / "deeper"),
            }
        )
    assert str(store / "deeper") in str(excinfo.value)
    assert blocker.read_text() == "not a directory"


def test_closed_datastore_raises_operational_error(
    open_store: Callable[..., LMDBDatastore],
) -> None:
    datastore = open_store()
    recorder = LMDBApplicationRecorder(datastore)
    datastore.close()
    with pytest.raises(OperationalError, match="closed"):
        recorder.max_notification_id()
    datastore.close()  # idempotent


def test_a_datastore_collected_while_the_registry_is_busy_does_not_deadlock(
    tmp_path: Path,
) -> None:
    """The garbage collector may finalize a datastore (``__del__`` releases its environment)
    on a thread that holds the registry's lock, inside ``_Registry.acquire`` building another
    environment; that thread must not wait on itself. Seen as a CI run hung in
    ``_Registry.release`` called from ``Condition.__init__`` inside ``acquire``."""
    from memory_ledger.ledger import lmdb as lmdb_module

    old = lmdb_module.LMDBDatastore(str(tmp_path / "old"))
    finished = threading.Event()

    def finalize_under_the_lock() -> None:
        with lmdb_module._registry._lock:  # as acquire() holds it when the collector runs
            old.__del__()  # what the collector calls
            fresh = lmdb_module.LMDBDatastore(str(tmp_path / "fresh"))
        fresh.close()
        finished.set()

    worker = threading.Thread(target=finalize_under_the_lock, daemon=True)
    worker.start()
    worker.join(timeout=60)
    assert finished.is_set(), "releasing a datastore under the registry's lock deadlocked"
    assert old._shared is None
    again = lmdb_module.LMDBDatastore(str(tmp_path / "old"))  # the old store reopens
    again.close()
