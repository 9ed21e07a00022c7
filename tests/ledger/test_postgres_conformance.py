"""The `eventsourcing` library's own abstract recorder test cases on
`memory_ledger.ledger.postgres`, against the machine's PostgreSQL server.

Each case gets a fresh schema (dropped after); UUID and text originator ids are both covered.
Notification ids are expected contiguous (``EXPECT_CONTIGUOUS_NOTIFICATION_IDS``): unlike the
library's own PostgreSQL recorder, ours assigns them under the table lock, without gaps.
"""

from __future__ import annotations

from typing import Any
from uuid import uuid4

from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    ProcessRecorder,
    TrackingRecorder,
)
from eventsourcing.postgres import (
    PostgresAggregateRecorder,
    PostgresDatastore,
    PostgresTrackingRecorder,
)
from eventsourcing.tests.persistence import (
    AggregateRecorderTestCase,
    ApplicationRecorderTestCase,
    InfrastructureFactoryTestCase,
    NonInterleavingNotificationIDsBaseCase,
    ProcessRecorderTestCase,
    TrackingRecorderTestCase,
)
from eventsourcing.utils import Environment

from memory_ledger.ledger.postgres import (
    PostgresLedgerApplicationRecorder,
    PostgresLedgerFactory,
    PostgresLedgerProcessRecorder,
    parse_ledger_url,
)
from tests.pg import BASE_URL, create_schema, drop_schema, require_postgres


def _datastore(schema: str, originator_id_type: Any) -> PostgresDatastore:
    url = parse_ledger_url(BASE_URL)
    return PostgresDatastore(
        dbname=url.dbname,
        host=url.host,
        port=url.port,
        user=url.user,
        password=url.password,
        schema=schema,
        pool_size=4,
        max_overflow=12,
        originator_id_type=originator_id_type,
    )


class _Schema:
    """Mixin: a fresh schema and datastore per test."""

    originator_id_type: Any = "uuid"

    def setUp(self) -> None:
        require_postgres()
        self.schema = create_schema()
        self.datastore = _datastore(self.schema, self.originator_id_type)
        super().setUp()  # type: ignore[misc]

    def tearDown(self) -> None:
        super().tearDown()  # type: ignore[misc]
        self.datastore.close()
        drop_schema(self.schema)


class _TextIds:
    originator_id_type: Any = "text"

    def new_originator_id(self) -> str:
        return str(uuid4())


class TestPostgresAggregateRecorder(_Schema, AggregateRecorderTestCase):
    def create_recorder(self) -> AggregateRecorder:
        recorder = PostgresAggregateRecorder(self.datastore, events_table_name="snapshots")
        recorder.create_table()
        return recorder


class TestPostgresLedgerApplicationRecorder(
    _Schema, ApplicationRecorderTestCase[PostgresLedgerApplicationRecorder]
):
    def create_recorder(self) -> PostgresLedgerApplicationRecorder:
        recorder = PostgresLedgerApplicationRecorder(self.datastore)
        recorder.create_table()
        return recorder

    def test_insert_subscribe(self) -> None:
        self.optional_test_insert_subscribe()

    def test_concurrent_throughput(self) -> None:
        pass  # a timing printout; benchmarks/append.py measures throughput


class TestPostgresLedgerApplicationRecorderTextIds(_TextIds, TestPostgresLedgerApplicationRecorder):
    def test_concurrent_no_conflicts(self, initial_position: int = 0) -> None:
        pass  # covered with UUID ids above; 10,000 events per id type is CI time for nothing


class TestPostgresTrackingRecorder(_Schema, TrackingRecorderTestCase):
    def create_recorder(self) -> TrackingRecorder:
        recorder = PostgresTrackingRecorder(self.datastore)
        recorder.create_table()
        return recorder


class TestPostgresLedgerProcessRecorder(_Schema, ProcessRecorderTestCase):
    def create_recorder(self) -> ProcessRecorder:
        recorder = PostgresLedgerProcessRecorder(self.datastore)
        recorder.create_table()
        return recorder


class TestPostgresLedgerProcessRecorderTextIds(_TextIds, TestPostgresLedgerProcessRecorder):
    pass


class TestPostgresLedgerNonInterleavingNotificationIDs(
    _Schema, NonInterleavingNotificationIDsBaseCase
):
    def create_recorder(self) -> ApplicationRecorder:
        recorder = PostgresLedgerApplicationRecorder(self.datastore)
        recorder.create_table()
        return recorder


class TestPostgresLedgerInfrastructureFactory(InfrastructureFactoryTestCase[PostgresLedgerFactory]):
    def expected_factory_class(self) -> type[PostgresLedgerFactory]:
        return PostgresLedgerFactory

    def expected_aggregate_recorder_class(self) -> type[AggregateRecorder]:
        return PostgresAggregateRecorder

    def expected_application_recorder_class(self) -> type[ApplicationRecorder]:
        return PostgresLedgerApplicationRecorder

    def expected_tracking_recorder_class(self) -> type[TrackingRecorder]:
        return PostgresTrackingRecorder

    def tracking_recorder_subclass(self) -> type[TrackingRecorder]:
        return _CustomTrackingRecorder

    def expected_process_recorder_class(self) -> type[ProcessRecorder]:
        return PostgresLedgerProcessRecorder

    def setUp(self) -> None:
        require_postgres()
        self.schema = create_schema()
        url = parse_ledger_url(BASE_URL)
        self.env = Environment("TestCase")
        self.env[PostgresLedgerFactory.PERSISTENCE_MODULE] = "memory_ledger.ledger.postgres"
        self.env[PostgresLedgerFactory.POSTGRES_DBNAME] = url.dbname
        self.env[PostgresLedgerFactory.POSTGRES_HOST] = url.host
        self.env[PostgresLedgerFactory.POSTGRES_PORT] = str(url.port)
        self.env[PostgresLedgerFactory.POSTGRES_USER] = url.user
        self.env[PostgresLedgerFactory.POSTGRES_PASSWORD] = url.password
        self.env[PostgresLedgerFactory.POSTGRES_SCHEMA] = self.schema
        super().setUp()

    def tearDown(self) -> None:
        super().tearDown()
        drop_schema(self.schema)


class _CustomTrackingRecorder(PostgresTrackingRecorder):
    pass


del AggregateRecorderTestCase
del ApplicationRecorderTestCase
del TrackingRecorderTestCase
del ProcessRecorderTestCase
del NonInterleavingNotificationIDsBaseCase
del InfrastructureFactoryTestCase
