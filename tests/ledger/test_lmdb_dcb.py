"""The dynamic consistency boundary on the LMDB ledger (``ledger/tag_index.py``,
``ledger/lmdb_dcb.py`` and the ``tags=``/``condition=`` of ``insert_events``).

- The library's own DCB recorder test cases (``eventsourcing/dcb/tests.py``) on
  ``LMDBDCBRecorder``: on a fresh store, with text originator ids, and on a store whose log
  already holds application records (the DCB interface reads the same log and positions).
- A differential property: random appends with random tags and conditions, and random
  queries, give the same positions, refusals and results as the library's in-memory
  reference recorder (``eventsourcing.dcb.popo.InMemoryDCBRecorder``).
- A refused conditional ``insert_events`` writes nothing (no record, no tag, no tracking) and
  the next append continues the log without a gap; tags survive reopening.
- Two processes read the same slot, then both append a claim conditioned on their read:
  exactly one claim lands per round (the condition is checked inside the LMDB write
  transaction, across processes).
- A format-1 store (no tag index) refuses conditional appends and tagged reads until
  ``build_tag_index`` upgrades it, all at once.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import pytest
from eventsourcing.dcb.api import (
    DCBAppendCondition,
    DCBEvent,
    DCBQuery,
    DCBQueryItem,
    DCBRecorder,
)
from eventsourcing.dcb.persistence import DCBInfrastructureFactory
from eventsourcing.dcb.popo import InMemoryDCBRecorder
from eventsourcing.dcb.tests import DCBRecorderTestCase
from eventsourcing.persistence import (
    DataError,
    IntegrityError,
    OperationalError,
    StoredEvent,
    Tracking,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memory_ledger.ledger.lmdb import (
    FORMAT_VERSION,
    AppendConditionFailedError,
    LMDBApplicationRecorder,
    LMDBDatastore,
    LMDBFactory,
    LMDBProcessRecorder,
)
from memory_ledger.ledger.lmdb_dcb import LMDBDCBFactory, LMDBDCBRecorder
from tests.ledger.test_lmdb_store import Child

TOPIC = "tests.dcb:Recorded"


def _stored(n: int, stream: Any = None) -> list[StoredEvent]:
    stream = stream or uuid4()
    return [StoredEvent(stream, v, TOPIC, f"state {v}".encode()) for v in range(1, n + 1)]


def _query(*tags: str, types: tuple[str, ...] = ()) -> DCBQuery:
    return DCBQuery(items=[DCBQueryItem(types=list(types), tags=list(tags))])


# 1. The library's DCB recorder test cases ---------------------------------------------------


class _DCBStore(DCBRecorderTestCase):
    originator_id_type: Any = "uuid"
    prior_records = 0

    def setUp(self) -> None:
        self.tmpdir = tempfile.mkdtemp(prefix="lmdb_dcb_")
        self.datastore = LMDBDatastore(
            self.tmpdir, map_size=16 * 1024 * 1024, originator_id_type=self.originator_id_type
        )
        if self.prior_records:
            stream = uuid4() if self.originator_id_type == "uuid" else str(uuid4())
            LMDBApplicationRecorder(self.datastore).insert_events(
                _stored(self.prior_records, stream),
                tags=[[f"app:{n}"] for n in range(self.prior_records)],
            )

    def tearDown(self) -> None:
        self.datastore.close()
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def test_append_read(self) -> None:
        self._test_append_read(LMDBDCBRecorder(self.datastore), self.prior_records)

    def test_append_subscribe(self) -> None:
        self._test_append_subscribe(LMDBDCBRecorder(self.datastore), self.prior_records)


class TestLMDBDCBRecorder(_DCBStore):
    pass


class TestLMDBDCBRecorderTextIds(_DCBStore):
    originator_id_type: Any = "text"


class TestLMDBDCBRecorderAfterApplicationRecords(_DCBStore):
    prior_records = 5


del DCBRecorderTestCase


def test_the_factory_is_the_library_dcb_factory_over_the_same_log(tmp_path: Path) -> None:
    env = {"PERSISTENCE_MODULE": "memory_ledger.ledger.lmdb_dcb", "LMDB_PATH": str(tmp_path)}
    factory = DCBInfrastructureFactory.construct(env=env)
    try:
        assert isinstance(factory, LMDBDCBFactory) and isinstance(factory, LMDBFactory)
        dcb = factory.dcb_recorder()
        assert isinstance(dcb, LMDBDCBRecorder)
        recorder = factory.application_recorder()
        assert isinstance(recorder, LMDBApplicationRecorder)
        [first] = recorder.insert_events(_stored(1), tags=[["memory:a"]]) or []
        second = dcb.append([DCBEvent(type="Noted", data=b"x", tags=["memory:a"])])
        assert (first, second) == (1, 2)
        read = dcb.read(_query("memory:a"))
        assert [(e.position, e.event.type, e.event.tags) for e in read] == [
            (1, TOPIC, ["memory:a"]),
            (2, "Noted", ["memory:a"]),
        ]
        assert [n.id for n in recorder.select_notifications(1, 10)] == [1, 2]
    finally:
        factory.close()


# 2. Differential property against the library's in-memory recorder --------------------------

TAGS = ("a", "b", "c", "d")
TYPES = ("T1", "T2", "T3")
item_st = st.builds(
    DCBQueryItem,
    types=st.lists(st.sampled_from(TYPES), max_size=2, unique=True),
    tags=st.lists(st.sampled_from(TAGS), max_size=3, unique=True),
)
query_st = st.builds(DCBQuery, items=st.lists(item_st, max_size=3))
event_st = st.builds(
    DCBEvent,
    type=st.sampled_from(TYPES),
    data=st.binary(max_size=8),
    tags=st.lists(st.sampled_from(TAGS), max_size=3, unique=True),
)
append_st = st.tuples(
    st.lists(event_st, min_size=1, max_size=3),
    st.one_of(
        st.none(),
        st.builds(
            DCBAppendCondition,
            fail_if_events_match=query_st,
            after=st.one_of(st.none(), st.integers(0, 12)),
        ),
    ),
)


def _outcome(recorder: DCBRecorder, events: list[DCBEvent], cond: Any) -> int | str:
    try:
        return recorder.append(events, cond)
    except IntegrityError:
        return "refused"


def _read(recorder: DCBRecorder, query: DCBQuery, after: int | None, limit: int | None) -> Any:
    response = recorder.read(query, after=after, limit=limit)
    events = [(e.position, e.event.type, e.event.data, sorted(e.event.tags)) for e in response]
    return events, response.head


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    appends=st.lists(append_st, max_size=10),
    reads=st.lists(
        st.tuples(
            query_st,
            st.one_of(st.none(), st.integers(0, 12)),
            st.one_of(st.none(), st.integers(0, 4)),
        ),
        max_size=6,
    ),
)
def test_conditions_and_reads_agree_with_the_reference_recorder(
    appends: list[tuple[list[DCBEvent], DCBAppendCondition | None]],
    reads: list[tuple[DCBQuery, int | None, int | None]],
) -> None:
    directory = tempfile.mkdtemp(prefix="lmdb_dcb_prop_")
    datastore = LMDBDatastore(directory, map_size=4 * 1024 * 1024, sync=False)
    try:
        ours, reference = LMDBDCBRecorder(datastore), InMemoryDCBRecorder()
        for events, condition in appends:
            assert _outcome(ours, events, condition) == _outcome(reference, events, condition)
        for query, after, limit in [*reads, (DCBQuery(), None, None)]:
            assert _read(ours, query, after, limit) == _read(reference, query, after, limit)
    finally:
        datastore.close()
        shutil.rmtree(directory, ignore_errors=True)


one_tag_query_st = st.builds(
    DCBQuery,
    items=st.lists(
        st.builds(DCBQueryItem, tags=st.lists(st.sampled_from(TAGS), min_size=1, max_size=1)),
        min_size=2,
        max_size=4,
    ),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    appends=st.lists(append_st, max_size=10),
    queries=st.lists(
        st.tuples(one_tag_query_st, st.one_of(st.none(), st.integers(0, 12))),
        min_size=1,
        max_size=4,
    ),
)
def test_reads_of_many_single_tags_agree_with_the_reference_recorder(
    appends: list[tuple[list[DCBEvent], DCBAppendCondition | None]],
    queries: list[tuple[DCBQuery, int | None]],
) -> None:
    """The one-cursor read of many single-tag items (a batch's decision) returns what the
    library's reference recorder returns: every match once, in position order."""
    directory = tempfile.mkdtemp(prefix="lmdb_dcb_tags_")
    datastore = LMDBDatastore(directory, map_size=4 * 1024 * 1024, sync=False)
    try:
        ours, reference = LMDBDCBRecorder(datastore), InMemoryDCBRecorder()
        for events, condition in appends:
            assert _outcome(ours, events, condition) == _outcome(reference, events, condition)
        for query, after in queries:
            assert _read(ours, query, after, None) == _read(reference, query, after, None)
    finally:
        datastore.close()
        shutil.rmtree(directory, ignore_errors=True)


# 3. Conditional insert_events ---------------------------------------------------------------


def test_refused_conditional_insert_writes_nothing_and_leaves_no_gap(tmp_path: Path) -> None:
    datastore = LMDBDatastore(str(tmp_path), map_size=4 * 1024 * 1024, sync=False)
    try:
        recorder = LMDBProcessRecorder(datastore)
        stream = uuid4()
        assert list(recorder.insert_events(_stored(2, stream), tags=[["k"], []]) or []) == [1, 2]
        selection = recorder.select_tagged(_query("k"))
        assert selection.head == 2
        assert [e.position for e in selection.events] == [1]
        assert recorder.tags_of(1) == ["k"] and recorder.tags_of(2) == []
        # A decision that read the log at head 0 is refused: record 1 carries its tag.
        later = [StoredEvent(stream, 3, TOPIC, b"three")]
        with pytest.raises(AppendConditionFailedError) as refused:
            recorder.insert_events(
                later,
                tags=[["k", "other"]],
                condition=DCBAppendCondition(_query("k"), after=0),
                tracking=Tracking("upstream", 7),
            )
        assert refused.value.position == 1
        assert isinstance(refused.value, IntegrityError)
        assert recorder.max_notification_id() == 2
        assert recorder.select_tagged(_query("other")).events == []
        assert recorder.max_tracking_id("upstream") is None
        # Read at head 2, nothing tagged "k" since: accepted, and the log has no gap.
        ids = recorder.insert_events(
            later,
            tags=[["k", "other"]],
            condition=DCBAppendCondition(_query("k"), after=selection.head),
            tracking=Tracking("upstream", 7),
        )
        assert list(ids or []) == [3]
        assert recorder.max_tracking_id("upstream") == 7
        assert [e.position for e in recorder.select_tagged(_query("k", "other")).events] == [3]
        assert recorder.select_tagged(_query("k"), after=1).events[0].stored_event == later[0]
    finally:
        datastore.close()
    reopened = LMDBDatastore(str(tmp_path), map_size=4 * 1024 * 1024, sync=False)
    try:
        recorder = LMDBApplicationRecorder(reopened)
        assert [e.position for e in recorder.select_tagged(_query("k")).events] == [1, 3]
    finally:
        reopened.close()


def test_bad_tags_are_refused_before_the_transaction(tmp_path: Path) -> None:
    datastore = LMDBDatastore(str(tmp_path), map_size=4 * 1024 * 1024, sync=False)
    try:
        recorder = LMDBApplicationRecorder(datastore)
        with pytest.raises(DataError, match="1 sequences for 2 events"):
            recorder.insert_events(_stored(2), tags=[["a"]])
        with pytest.raises(DataError, match="at most 400"):
            recorder.insert_events(_stored(1), tags=[["x" * 401]])
        assert recorder.max_notification_id() is None
    finally:
        datastore.close()


# 4. Two processes racing on one slot --------------------------------------------------------


@pytest.fixture
def children() -> Iterator[list[Child]]:
    started: list[Child] = []
    yield started
    for child in started:
        child.cleanup()


def test_two_processes_claiming_one_slot_after_the_same_read_land_one_claim(
    tmp_path: Path, children: list[Child]
) -> None:
    rounds = 25
    path = str(tmp_path / "store")
    LMDBDatastore(path, map_size=16 * 1024 * 1024, sync=False).close()
    racers = [Child("dcb_claimer", path, child, rounds) for child in (0, 1)]
    children.extend(racers)
    for racer in racers:
        racer.expect("ready")
    for number in range(rounds):
        for racer in racers:
            racer.go()
        for racer in racers:
            assert racer.expect("ack") == "read"  # both read the slot unclaimed
        for racer in racers:
            racer.go()
        outcomes = [racer.expect("ack") for racer in racers]
        assert sorted(o["won"] for o in outcomes) == [False, True], (number, outcomes)
    for racer in racers:
        racer.result()
    datastore = LMDBDatastore(path, map_size=16 * 1024 * 1024, sync=False)
    try:
        dcb = LMDBDCBRecorder(datastore)
        for number in range(rounds):
            assert len(list(dcb.read(_query(f"slot:{number}")))) == 1
        assert len(list(dcb.read())) == rounds
    finally:
        datastore.close()


# 5. Upgrading a format-1 store --------------------------------------------------------------


def _downgrade_to_format_1(path: str) -> None:
    """Make ``path`` look like a store written before the tag index: format 1, no tags."""
    datastore = LMDBDatastore(path, map_size=4 * 1024 * 1024, sync=False)
    try:
        env = datastore.env
        with env.begin(write=True) as txn:
            txn.put(b"format_version", b"1", db=datastore.db(b"meta"))
            txn.drop(datastore.db(b"tags"), delete=False)
            txn.drop(datastore.db(b"event_tags"), delete=False)
    finally:
        datastore.close()


def test_a_format_1_store_is_upgraded_by_build_tag_index(tmp_path: Path) -> None:
    path = str(tmp_path)
    datastore = LMDBDatastore(path, map_size=4 * 1024 * 1024, sync=False)
    stream = uuid4()
    try:
        LMDBApplicationRecorder(datastore).insert_events(_stored(3, stream))
    finally:
        datastore.close()
    _downgrade_to_format_1(path)
    datastore = LMDBDatastore(path, map_size=4 * 1024 * 1024, sync=False)
    try:
        recorder = LMDBApplicationRecorder(datastore)
        assert not recorder.tag_index_built()
        with pytest.raises(OperationalError, match="no tag index"):
            recorder.select_tagged(_query("v:1"))
        with pytest.raises(OperationalError, match="no tag index"):
            recorder.insert_events(
                [StoredEvent(stream, 4, TOPIC, b"4")], condition=DCBAppendCondition(_query("x"))
            )
        assert recorder.max_notification_id() == 3

        def tagger(stored: StoredEvent) -> list[str]:
            return [f"v:{stored.originator_version}"] if stored.originator_version != 2 else []

        assert recorder.build_tag_index(tagger) == 2
        assert recorder.build_tag_index(tagger) == 0  # done once
        assert recorder.tag_index_built()
        assert [e.position for e in recorder.select_tagged(_query("v:3")).events] == [3]
        with datastore.read() as txn:
            assert (
                txn.get(b"format_version", db=datastore.db(b"meta")) == str(FORMAT_VERSION).encode()
            )
    finally:
        datastore.close()


def test_the_engine_indexes_the_tags_of_a_store_written_before_the_tag_index(
    tmp_path: Path,
) -> None:
    from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor  # noqa: PLC0415
    from memory_ledger.ledger.events import MemoryActivated, MemorySuperseded  # noqa: PLC0415
    from memory_ledger.ledger.tags import event_tags, memory_tag  # noqa: PLC0415
    from tests.conftest import make_item  # noqa: PLC0415

    store = tmp_path / "store"
    ns = Namespace("acme", "alice", "upgrade")
    with MemoryEngine.open(store, sync=False) as engine:
        for sid, city in (("s1", "Lisbon"), ("s2", "Porto")):
            extractor = RecordedExtractor()
            session = engine.session(ns, sid, extractor=extractor)
            item = make_item(f"Alice lives in {city}.", predicate="lives_in", value=city)
            extractor.provide(1, [item])
            session.observe_final_transcript(1, f"user: I live in {city}")
            session.finish()
        memory_events = [
            (n.id, engine.mapper.to_domain_event(n))
            for n in engine.recorder.select_notifications(1, 1000)
            if n.topic.endswith(("MemoryActivated", "MemorySuperseded"))
        ]
        digests = engine.keyring.digests
        expected = {position: list(event_tags(e, digests)) for position, e in memory_events}  # type: ignore[arg-type]
    assert len(expected) == 3 and all(expected.values())
    _downgrade_to_format_1(str(store / "ledger"))
    with MemoryEngine.open(store, sync=False) as engine:
        recorder = engine.recorder
        assert isinstance(recorder, LMDBApplicationRecorder)
        assert recorder.tag_index_built()
        assert {p: recorder.tags_of(p) for p in expected} == expected
        lisbon = next(e for _, e in memory_events if isinstance(e, MemorySuperseded))
        tagged = recorder.select_tagged(_query(memory_tag(lisbon.originator_id)))
        decoded = [engine.mapper.to_domain_event(e.stored_event) for e in tagged.events]
        assert [type(e) for e in decoded] == [MemoryActivated, MemorySuperseded]
