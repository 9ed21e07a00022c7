"""Group commit (``memory_ledger.ledger.group_commit``): threads of one process that append
at the same time share one LMDB write transaction and one sync, and each keeps the
guarantees it has alone (atomic, checked in order, acknowledged only after the commit).

Groups are made deterministic by holding the first writer inside its transaction (a hook at
the ``ledger.commit`` fault point) until the others have queued behind it. The kill-while-a-
group-is-written property lives in ``tests/crash/test_crash_property.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from uuid import NAMESPACE_URL, uuid5

import pytest
from eventsourcing.dcb.api import DCBAppendCondition, DCBQuery, DCBQueryItem
from eventsourcing.persistence import IntegrityError, StoredEvent

from memory_ledger.ledger import faults
from memory_ledger.ledger.group_commit import GroupCommit, WriteRequest
from memory_ledger.ledger.lmdb import LMDBApplicationRecorder, LMDBDatastore
from memory_ledger.ledger.records import GENESIS_HASH, chain_hash
from memory_ledger.ledger.tag_index import AppendConditionFailedError

TOPIC = "tests.group_commit:Event"


def command(name: str, events: int = 3, first_version: int = 1) -> list[StoredEvent]:
    """``events`` stored events of the stream named ``name``."""
    stream = uuid5(NAMESPACE_URL, f"group-commit/{name}")
    return [
        StoredEvent(
            originator_id=stream,
            originator_version=first_version + i,
            topic=TOPIC,
            state=f"{name}/{first_version + i}".encode(),
        )
        for i in range(events)
    ]


@pytest.fixture
def recorder(tmp_path: Path) -> Iterator[LMDBApplicationRecorder]:
    datastore = LMDBDatastore(str(tmp_path / "ledger"), sync=True)
    try:
        yield LMDBApplicationRecorder(datastore)
    finally:
        datastore.close()


class HeldLeader:
    """Holds the first transaction to reach ``ledger.commit`` until ``queued`` further
    requests wait in the queue, so they form the next group together."""

    def __init__(self, recorder: LMDBApplicationRecorder, queued: int) -> None:
        self.group_commit = recorder.datastore.shared.group_commit
        self.queued = queued
        self.calls = 0
        self.committing = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> None:
        self.calls += 1
        if self.calls == 1:
            self.committing.set()
            deadline = time.monotonic() + 30
            while len(self.group_commit._queue) < self.queued + 1:
                assert time.monotonic() < deadline, "the other writers never queued"
                time.sleep(0.001)
            self.release.wait(30)

    def __enter__(self) -> HeldLeader:
        faults.FAULTS["ledger.commit"] = self
        return self

    def __exit__(self, *exc: object) -> None:
        faults.FAULTS.pop("ledger.commit", None)


def run_threads(targets: list[Callable[[], object]]) -> list[object]:
    """Run each target in a thread; return what each returned or raised."""
    outcomes: list[object] = [None] * len(targets)

    def run(i: int) -> None:
        try:
            outcomes[i] = targets[i]()
        except BaseException as e:  # noqa: BLE001 (the outcome under test)
            outcomes[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(targets))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return outcomes


def stream_events(recorder: LMDBApplicationRecorder, name: str) -> list[StoredEvent]:
    return list(recorder.select_events(uuid5(NAMESPACE_URL, f"group-commit/{name}")))


def assert_log_chains(recorder: LMDBApplicationRecorder) -> None:
    """Positions run 1..head without gaps and each record's hash chains to the one before,
    across the commands of a group too (each request continues where the one before it in
    the shared transaction left the log)."""
    previous, expected = GENESIS_HASH, 1
    for record in recorder.iter_records():
        assert record.notification_id == expected
        assert record.record_hash == chain_hash(previous, record.body), expected
        previous, expected = record.record_hash, expected + 1
    assert expected - 1 == (recorder.max_notification_id() or 0)


def test_concurrent_commands_share_one_transaction_and_each_is_whole(
    recorder: LMDBApplicationRecorder,
) -> None:
    with HeldLeader(recorder, queued=6) as held:
        first = threading.Thread(target=lambda: recorder.insert_events(command("first")))
        first.start()
        assert held.committing.wait(30)
        names = [f"writer-{i}" for i in range(6)]
        results: list[object] = []
        done = threading.Event()

        def others() -> None:
            results.extend(
                run_threads([lambda n=n: recorder.insert_events(command(n)) for n in names])
            )
            done.set()

        threading.Thread(target=others).start()
        time.sleep(0.2)
        # Nobody is acknowledged while the first transaction is not committed.
        assert not done.is_set()
        held.release.set()
        first.join(30)
        assert done.wait(30)
    stats = recorder.datastore.shared.group_commit.stats
    assert stats.largest >= 6
    for name, positions in zip(names, results, strict=True):
        assert isinstance(positions, list) and len(positions) == 3
        assert positions == list(range(positions[0], positions[0] + 3))  # contiguous
        events = stream_events(recorder, name)
        assert [e.state for e in events] == [f"{name}/{v}".encode() for v in (1, 2, 3)]
        notifications = recorder.select_notifications(
            start=positions[0], limit=3, inclusive_of_start=True
        )
        assert [n.id for n in notifications] == positions
        assert {n.originator_id for n in notifications} == {events[0].originator_id}
    assert recorder.max_notification_id() == 3 * 7
    assert_log_chains(recorder)


def test_a_refused_command_leaves_the_rest_of_its_group_untouched(
    recorder: LMDBApplicationRecorder,
) -> None:
    recorder.insert_events(command("existing"))
    with HeldLeader(recorder, queued=4) as held:
        first = threading.Thread(target=lambda: recorder.insert_events(command("first")))
        first.start()
        assert held.committing.wait(30)
        targets: list[Callable[[], object]] = [
            lambda: recorder.insert_events(command("a")),
            lambda: recorder.insert_events(command("existing", first_version=3)),  # 3 exists
            lambda: recorder.insert_events(command("b")),
            lambda: recorder.insert_events(command("a", first_version=2)),  # a's 2, 3 in group
        ]
        outcome: list[object] = []
        runner = threading.Thread(target=lambda: outcome.extend(run_threads(targets)))
        runner.start()
        time.sleep(0.2)
        held.release.set()
        first.join(30)
        runner.join(30)
    assert isinstance(outcome[1], IntegrityError)  # refused: version 3 existed before
    assert isinstance(outcome[2], list)
    # a's two commands overlap: whichever came second in the group was refused.
    assert sorted(isinstance(o, IntegrityError) for o in (outcome[0], outcome[3])) == [
        False,
        True,
    ]
    assert len(stream_events(recorder, "a")) == 3 and len(stream_events(recorder, "b")) == 3
    assert len(stream_events(recorder, "existing")) == 3
    assert recorder.max_notification_id() == 3 * 4  # existing, first, a, b: nothing else
    assert_log_chains(recorder)


def test_an_append_condition_overtaken_inside_the_group_is_refused(
    recorder: LMDBApplicationRecorder,
) -> None:
    """Two decisions read the same position and append under a condition on the same tag;
    in one group, the first lands and the second is refused, as if committed one by one."""
    read_at = recorder.max_notification_id() or 0

    def decide(name: str, tag: str) -> Callable[[], object]:
        condition = DCBAppendCondition(DCBQuery(items=[DCBQueryItem(tags=[tag])]), after=read_at)
        stored = command(name, events=2)
        return lambda: recorder.insert_events(stored, tags=[[tag], [tag]], condition=condition)

    with HeldLeader(recorder, queued=3) as held:
        first = threading.Thread(target=lambda: recorder.insert_events(command("first")))
        first.start()
        assert held.committing.wait(30)
        outcome: list[object] = []
        targets = [decide("one", "key:k"), decide("two", "key:k"), decide("other", "key:j")]
        runner = threading.Thread(target=lambda: outcome.extend(run_threads(targets)))
        runner.start()
        time.sleep(0.2)
        held.release.set()
        first.join(30)
        runner.join(30)
    assert recorder.datastore.shared.group_commit.stats.largest >= 3
    refused = [o for o in outcome[:2] if isinstance(o, AppendConditionFailedError)]
    landed = [o for o in outcome[:2] if isinstance(o, list)]
    assert len(refused) == 1 and len(landed) == 1
    assert isinstance(outcome[2], list)  # another key: unaffected
    key_events = recorder.select_tagged(DCBQuery(items=[DCBQueryItem(tags=["key:k"])]))
    assert [e.position for e in key_events.events] == landed[0]


def test_a_group_that_fails_as_a_whole_is_retried_one_command_each(
    recorder: LMDBApplicationRecorder,
) -> None:
    failures = {"left": 1}
    gate = HeldLeader(recorder, queued=3)

    def put_fault() -> None:
        if gate.calls >= 1 and gate.release.is_set() and failures["left"]:
            failures["left"] -= 1
            raise OSError("disk hiccup inside the group's transaction")

    faults.FAULTS["ledger.put"] = put_fault
    try:
        with gate:
            first = threading.Thread(target=lambda: recorder.insert_events(command("first")))
            first.start()
            assert gate.committing.wait(30)
            names = ["x", "y", "z"]
            outcome: list[object] = []
            runner = threading.Thread(
                target=lambda: outcome.extend(
                    run_threads([lambda n=n: recorder.insert_events(command(n)) for n in names])
                )
            )
            runner.start()
            time.sleep(0.2)
            gate.release.set()
            first.join(30)
            runner.join(30)
    finally:
        faults.FAULTS.pop("ledger.put", None)
    assert failures["left"] == 0
    # The group's transaction was aborted; each command then ran alone and was written once.
    assert all(isinstance(o, list) for o in outcome), outcome
    for name in names:
        assert len(stream_events(recorder, name)) == 3
    assert recorder.max_notification_id() == 12


def test_with_group_commit_off_every_command_has_its_own_transaction(
    recorder: LMDBApplicationRecorder,
) -> None:
    group_commit = recorder.datastore.shared.group_commit
    group_commit.enabled = False
    outcome = run_threads(
        [lambda n=n: recorder.insert_events(command(f"solo-{n}")) for n in range(8)]
    )
    assert all(isinstance(o, list) for o in outcome)
    assert group_commit.stats.largest == 1
    assert recorder.max_notification_id() == 24


def test_queue_protocol_outcomes_only_after_the_group_ran() -> None:
    """The protocol alone (no LMDB): requests that queue while a group runs join it before
    it commits; nobody returns before its group's ``run_group`` returned; a refusal is one
    request's; a group that fails as a whole runs each of its requests alone."""
    log: list[str] = []
    hold = threading.Event()
    committed = threading.Event()

    def run_alone(request: WriteRequest[object]) -> object:
        log.append("alone")
        return request.fn(None)

    def run_group(group: list[WriteRequest[object]], extend: Callable[[], bool]) -> None:
        log.append("group")
        hold.wait(30)
        done = 0
        while done < len(group) or extend():
            request = group[done]
            try:
                request.result = request.fn(None)
            except ValueError as e:  # the refusal of one request
                request.error = e
            done += 1
        log.append(f"committed {len(group)}")
        if any(r.fn is explode for r in group):
            raise OSError("the transaction failed as a whole")
        committed.set()

    def refuse(txn: object) -> str:
        raise ValueError("refused")

    def explode(txn: object) -> str:
        return "ok when alone"

    queue = GroupCommit(run_group, run_alone)
    returned: dict[str, object] = {}

    def call(name: str, fn: Callable[[object], object]) -> None:
        try:
            returned[name] = queue.write(fn)
        except ValueError as e:
            returned[name] = e
        returned[name + " after commit"] = committed.is_set()

    def wait_until(check: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 30
        while not check():
            assert time.monotonic() < deadline
            time.sleep(0.001)

    threads = [threading.Thread(target=call, args=("first", lambda txn: "first"))]
    threads[0].start()
    wait_until(lambda: log == ["group"])
    threads += [
        threading.Thread(target=call, args=("a", lambda txn: "a")),
        threading.Thread(target=call, args=("refused", refuse)),
        threading.Thread(target=call, args=("b", lambda txn: "b")),
    ]
    for thread in threads[1:]:
        thread.start()
    wait_until(lambda: len(queue._queue) == 4)
    time.sleep(0.05)
    assert not returned  # nobody answered before the commit
    hold.set()
    for thread in threads:
        thread.join(30)
    assert returned["first"] == "first"
    assert returned["a"] == "a" and returned["b"] == "b"
    assert isinstance(returned["refused"], ValueError)
    assert all(returned[f"{name} after commit"] for name in ("first", "a", "refused", "b"))
    assert log == ["group", "committed 4"]  # the three queued behind joined the first
    assert queue.stats.largest == 4

    # A group failing as a whole: every request runs again alone, each gets its own outcome.
    log.clear()
    hold.clear()
    threads = [threading.Thread(target=call, args=("c", lambda txn: "c"))]
    threads[0].start()
    wait_until(lambda: log == ["group"])
    threads.append(threading.Thread(target=call, args=("explode", explode)))
    threads[1].start()
    wait_until(lambda: len(queue._queue) == 2)
    hold.set()
    for thread in threads:
        thread.join(30)
    assert log == ["group", "committed 2", "alone", "alone"]
    assert returned["c"] == "c" and returned["explode"] == "ok when alone"

    # Off: each request alone, in order.
    queue.enabled = False
    log.clear()
    call("solo", lambda txn: "solo")
    assert log == ["alone"] and returned["solo"] == "solo"


def test_plain_appends_checked_together_keep_their_order_around_a_conditional_one(
    recorder: LMDBApplicationRecorder,
) -> None:
    """Plain appends (no condition) of a group are checked and written together, in runs
    split by a conditional append: each outcome, position and tag is what running them one
    after the other would give."""
    read_at = recorder.max_notification_id() or 0
    condition = DCBAppendCondition(DCBQuery(items=[DCBQueryItem(tags=["key:p"])]), after=read_at)
    targets: list[Callable[[], object]] = [
        lambda: recorder.insert_events(command("p", events=2), tags=[["key:p"], []]),
        lambda: recorder.insert_events(command("q", events=2)),
        # Overtaken by the first (same tag): refused whichever run it follows.
        lambda: recorder.insert_events(
            command("r", events=1), tags=[["key:p"]], condition=condition
        ),
        lambda: recorder.insert_events(command("q", events=2, first_version=2)),  # q's 2 taken
        lambda: recorder.insert_events(command("s", events=3), tags=[[], ["tag:s"], []]),
    ]
    with HeldLeader(recorder, queued=len(targets)) as held:
        first = threading.Thread(target=lambda: recorder.insert_events(command("first")))
        first.start()
        assert held.committing.wait(30)
        outcome: list[tuple[Callable[[], object], object]] = []

        def record(target: Callable[[], object]) -> None:
            try:
                outcome.append((target, target()))
            except IntegrityError as e:
                outcome.append((target, e))

        for target in targets:  # queued one after the other: the group keeps this order
            queued = len(held.group_commit._queue)
            threading.Thread(target=record, args=(target,)).start()
            deadline = time.monotonic() + 30
            while len(held.group_commit._queue) == queued:
                assert time.monotonic() < deadline
                time.sleep(0.001)
        held.release.set()
        first.join(30)
        deadline = time.monotonic() + 30
        while len(outcome) < len(targets):
            assert time.monotonic() < deadline
            time.sleep(0.001)
    results = {targets.index(t): r for t, r in outcome}
    assert results[0] == [4, 5] and results[1] == [6, 7] and results[4] == [8, 9, 10]
    assert isinstance(results[2], AppendConditionFailedError)
    assert isinstance(results[3], IntegrityError)
    assert recorder.max_notification_id() == 10
    assert recorder.datastore.shared.group_commit.stats.largest == len(targets)
    assert_log_chains(recorder)
    assert recorder.tags_of(4) == ["key:p"] and recorder.tags_of(5) == []
    assert recorder.tags_of(9) == ["tag:s"] and recorder.tags_of(8) == []


def test_refused_outcomes_of_plain_appends_checked_together() -> None:
    """``accept_in_order``: a request is refused when a key exists before the group, repeats
    within itself, or was written by an accepted request before it; a refused one's keys
    stay free for those after it."""
    from memory_ledger.ledger.group_insert import accept_in_order

    def request(*keys: bytes) -> WriteRequest[object]:
        return WriteRequest(lambda txn: None, 0, payload=([(k, b"") for k in keys], None))

    requests = [
        request(b"a1", b"a2"),
        request(b"x1"),  # exists before the group
        request(b"b1", b"b1"),  # repeats within itself
        request(b"a2", b"c1"),  # a2 written by the first
        request(b"c1", b"b1"),  # c1 and b1 still free: the requests holding them were refused
    ]
    accepted = accept_in_order(requests, {b"x1"})
    assert accepted == [requests[0], requests[4]]
    for refused, key in ((1, b"x1"), (2, b"b1"), (3, b"a2")):
        assert isinstance(requests[refused].error, IntegrityError)
        assert key.hex() in str(requests[refused].error)


def test_stats_count_the_time_groups_hold_the_writer_lock(
    recorder: LMDBApplicationRecorder,
) -> None:
    """``GroupStats.run_seconds`` adds up the time leaders spent running their groups (the
    transaction up to the commit's return): at least the time a commit was held."""
    stats = recorder.datastore.shared.group_commit.stats
    before = stats.run_seconds
    faults.FAULTS["ledger.commit"] = lambda: time.sleep(0.02)
    try:
        recorder.insert_events(command("timed"))
    finally:
        faults.FAULTS.pop("ledger.commit", None)
    assert 0.02 <= stats.run_seconds - before < 5
