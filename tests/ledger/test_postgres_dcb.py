"""The dynamic consistency boundary on the PostgreSQL ledger (the tags table and the
``tags=``/``condition=`` of ``insert_events``, ``ledger/postgres_dcb.py``).

- The library's own DCB recorder test cases (``eventsourcing/dcb/tests.py``) on
  ``PostgresLedgerDCBRecorder``: on a fresh ledger, with text originator ids, and on a ledger
  whose log already holds application records (the DCB interface reads the same log).
- Random appends with random tags and conditions, and random queries, give the same
  positions, refusals and results as the library's in-memory reference recorder.
- A refused conditional ``insert_events`` writes nothing (no record, no tag) and the next
  append continues the log without a gap.
- A ledger written before the tag index refuses conditional appends and tagged reads until
  ``build_tag_index`` upgrades it.
"""

from __future__ import annotations

import random
from typing import Any
from uuid import uuid4

import pytest
from eventsourcing.dcb.api import DCBAppendCondition, DCBEvent, DCBQuery, DCBQueryItem
from eventsourcing.dcb.popo import InMemoryDCBRecorder
from eventsourcing.dcb.tests import DCBRecorderTestCase
from eventsourcing.persistence import IntegrityError, OperationalError, StoredEvent

from memory_ledger.ledger.postgres import PostgresLedgerApplicationRecorder
from memory_ledger.ledger.postgres_dcb import PostgresLedgerDCBRecorder
from memory_ledger.ledger.tag_index import AppendConditionFailedError
from tests.ledger.test_postgres_conformance import _datastore
from tests.pg import create_schema, drop_schema, require_postgres

TOPIC = "tests.dcb:Recorded"


def _stored(n: int, stream: Any) -> list[StoredEvent]:
    return [StoredEvent(stream, v, TOPIC, f"state {v}".encode()) for v in range(1, n + 1)]


class _DCBLedger(DCBRecorderTestCase):
    originator_id_type: Any = "uuid"
    prior_records = 0

    def setUp(self) -> None:
        require_postgres()
        self.schema = create_schema()
        self.datastore = _datastore(self.schema, self.originator_id_type)
        self.recorder = PostgresLedgerApplicationRecorder(self.datastore)
        self.recorder.create_table()
        if self.prior_records:
            stream = uuid4() if self.originator_id_type == "uuid" else str(uuid4())
            self.recorder.insert_events(
                _stored(self.prior_records, stream),
                tags=[[f"app:{n}"] for n in range(self.prior_records)],
            )

    def tearDown(self) -> None:
        self.datastore.close()
        drop_schema(self.schema)

    def test_append_read(self) -> None:
        self._test_append_read(PostgresLedgerDCBRecorder(self.recorder), self.prior_records)

    def test_append_subscribe(self) -> None:
        self._test_append_subscribe(PostgresLedgerDCBRecorder(self.recorder), self.prior_records)


class TestPostgresLedgerDCBRecorder(_DCBLedger):
    pass


class TestPostgresLedgerDCBRecorderTextIds(_DCBLedger):
    originator_id_type: Any = "text"


class TestPostgresLedgerDCBRecorderAfterApplicationRecords(_DCBLedger):
    prior_records = 5


del DCBRecorderTestCase


@pytest.fixture
def recorder() -> Any:
    require_postgres()
    schema = create_schema()
    datastore = _datastore(schema, "uuid")
    try:
        recorder = PostgresLedgerApplicationRecorder(datastore)
        recorder.create_table()
        yield recorder
    finally:
        datastore.close()
        drop_schema(schema)


def _random_query(rng: random.Random, tags: list[str], types: list[str]) -> DCBQuery:
    items = []
    for _ in range(rng.randint(0, 2)):
        items.append(
            DCBQueryItem(
                types=rng.sample(types, rng.randint(0, 1)),
                tags=rng.sample(tags, rng.randint(0, 2)),
            )
        )
    return DCBQuery(items=items)


def test_conditions_and_reads_agree_with_the_reference_recorder(
    recorder: PostgresLedgerApplicationRecorder,
) -> None:
    ours = PostgresLedgerDCBRecorder(recorder)
    reference = InMemoryDCBRecorder()
    rng = random.Random(13)
    tags, types = ["a", "b", "c", "d"], ["t1", "t2"]
    for _ in range(60):
        events = [
            DCBEvent(type=rng.choice(types), data=b"x", tags=rng.sample(tags, rng.randint(0, 3)))
            for _ in range(rng.randint(1, 3))
        ]
        condition = None
        if rng.random() < 0.7:
            head = reference.read().head or 0
            condition = DCBAppendCondition(
                fail_if_events_match=_random_query(rng, tags, types),
                after=rng.randint(max(0, head - 4), head),
            )
        outcomes = []
        for r in (ours, reference):
            try:
                outcomes.append(r.append(events, condition))
            except IntegrityError:
                outcomes.append("refused")
        assert outcomes[0] == outcomes[1], (events, condition)
        query = _random_query(rng, tags, types)
        after = rng.randint(0, reference.read().head or 0)
        got = [(e.position, sorted(e.event.tags)) for e in ours.read(query, after=after)]
        want = [(e.position, sorted(e.event.tags)) for e in reference.read(query, after=after)]
        assert got == want, (query, after)


def test_refused_conditional_insert_writes_nothing_and_leaves_no_gap(
    recorder: PostgresLedgerApplicationRecorder,
) -> None:
    stream = uuid4()
    recorder.insert_events(_stored(2, stream), tags=[["k"], []])
    condition = DCBAppendCondition(
        fail_if_events_match=DCBQuery(items=[DCBQueryItem(tags=["k"])]), after=0
    )
    other = uuid4()
    with pytest.raises(AppendConditionFailedError) as info:
        recorder.insert_events(_stored(1, other), tags=[["k"]], condition=condition)
    assert info.value.position == 1
    assert recorder.max_notification_id() == 2
    assert recorder.select_events(other) == []
    assert recorder.tags_at([1, 2, 3]) == {1: ["k"]}
    ok = DCBAppendCondition(fail_if_events_match=condition.fail_if_events_match, after=2)
    assert list(recorder.insert_events(_stored(1, other), tags=[["k"]], condition=ok) or []) == [3]
    selection = recorder.select_tagged(condition.fail_if_events_match)
    assert selection.head == 3
    assert [e.position for e in selection.events] == [1, 3]


def test_a_ledger_without_tag_index_is_upgraded_by_build_tag_index(
    recorder: PostgresLedgerApplicationRecorder,
) -> None:
    stream = uuid4()
    recorder.insert_events(_stored(3, stream))
    entries = list(recorder.iter_log())
    # A verbatim copy (migration) carries no tags: it reads as format 1 until indexed.
    schema2 = create_schema()
    datastore2 = _datastore(schema2, "uuid")
    try:
        copy = PostgresLedgerApplicationRecorder(datastore2)
        copy.create_table()
        assert copy.tag_index_built()
        copy.append_log(entries)
        assert not copy.tag_index_built()
        query = DCBQuery(items=[DCBQueryItem(tags=["v2"])])
        with pytest.raises(OperationalError):
            copy.select_tagged(query)
        with pytest.raises(OperationalError):
            copy.insert_events(
                _stored(1, uuid4()), tags=[[]], condition=DCBAppendCondition(query, after=0)
            )
        assert copy.max_notification_id() == 3
        tagged = copy.build_tag_index(lambda s: [f"v{s.originator_version}"])
        assert tagged == 3 and copy.tag_index_built()
        assert copy.build_tag_index(lambda s: ["again"]) == 0
        assert [e.position for e in copy.select_tagged(query).events] == [2]
    finally:
        datastore2.close()
        drop_schema(schema2)
