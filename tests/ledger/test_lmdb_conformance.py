"""The `eventsourcing` library's own abstract recorder test cases on `memory_ledger.ledger.lmdb`.

Each case gets a fresh store directory; UUID and text originator ids are both covered.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any
from uuid import uuid4

from eventsourcing.persistence import (
    AggregateRecorder,
    ApplicationRecorder,
    ProcessRecorder,
    TrackingRecorder,
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

from memory_ledger.ledger.lmdb import (
    LMDBAggregateRecorder,
    LMDBApplicationRecorder,
    LMDBDatastore,
    LMDBFactory,
    LMDBProcessRecorder,
    LMDBTrackingRecorder,
)


class _StoreDir:
    """Mixin: a fresh LMDB store directory and datastore per test."""

    originator_id_type: Any = "uuid"

    def setUp(self) -> None:
        self.tmpdir = tempfile.mkdtemp(prefix="lmdb_conf_")
        self.datastore = LMDBDatastore(
            self.tmpdir, map_size=64 * 1024 * 1024, originator_id_type=self.originator_id_type
        )
        super().setUp()  # type: ignore[misc]

    def tearDown(self) -> None:
        super().tearDown()  # type: ignore[misc]
        self.datastore.close()
        shutil.rmtree(self.tmpdir, ignore_errors=True)


class _TextIds:
    originator_id_type: Any = "text"

    def new_originator_id(self) -> str:
        return str(uuid4())


class TestLMDBAggregateRecorder(_StoreDir, AggregateRecorderTestCase):
    def create_recorder(self) -> AggregateRecorder:
        recorder = LMDBAggregateRecorder(self.datastore)
        recorder.create_table()
        return recorder


class TestLMDBAggregateRecorderTextIds(_TextIds, TestLMDBAggregateRecorder):
    pass


class TestLMDBApplicationRecorder(_StoreDir, ApplicationRecorderTestCase[LMDBApplicationRecorder]):
    def create_recorder(self) -> LMDBApplicationRecorder:
        return LMDBApplicationRecorder(self.datastore)

    def test_insert_subscribe(self) -> None:
        self.optional_test_insert_subscribe()


class TestLMDBApplicationRecorderTextIds(_TextIds, TestLMDBApplicationRecorder):
    pass


class TestLMDBTrackingRecorder(_StoreDir, TrackingRecorderTestCase):
    def create_recorder(self) -> TrackingRecorder:
        return LMDBTrackingRecorder(self.datastore)


class TestLMDBProcessRecorder(_StoreDir, ProcessRecorderTestCase):
    def create_recorder(self) -> ProcessRecorder:
        return LMDBProcessRecorder(self.datastore)


class TestLMDBProcessRecorderTextIds(_TextIds, TestLMDBProcessRecorder):
    pass


class TestLMDBNonInterleavingNotificationIDs(_StoreDir, NonInterleavingNotificationIDsBaseCase):
    def create_recorder(self) -> ApplicationRecorder:
        return LMDBApplicationRecorder(self.datastore)


class TestLMDBNonInterleavingTextIds(_TextIds, TestLMDBNonInterleavingNotificationIDs):
    pass


class TestLMDBInfrastructureFactory(InfrastructureFactoryTestCase[LMDBFactory]):
    def expected_factory_class(self) -> type[LMDBFactory]:
        return LMDBFactory

    def expected_aggregate_recorder_class(self) -> type[AggregateRecorder]:
        return LMDBAggregateRecorder

    def expected_application_recorder_class(self) -> type[ApplicationRecorder]:
        return LMDBApplicationRecorder

    def expected_tracking_recorder_class(self) -> type[TrackingRecorder]:
        return LMDBTrackingRecorder

    def tracking_recorder_subclass(self) -> type[TrackingRecorder]:
        return _CustomTrackingRecorder

    def expected_process_recorder_class(self) -> type[ProcessRecorder]:
        return LMDBProcessRecorder

    def setUp(self) -> None:
        self.tmpdir = tempfile.mkdtemp(prefix="lmdb_factory_")
        self.env = Environment("TestCase")
        self.env[LMDBFactory.PERSISTENCE_MODULE] = "memory_ledger.ledger.lmdb"
        self.env[LMDBFactory.LMDB_PATH] = self.tmpdir
        super().setUp()

    def tearDown(self) -> None:
        super().tearDown()
        shutil.rmtree(self.tmpdir, ignore_errors=True)


class _CustomTrackingRecorder(LMDBTrackingRecorder):
    pass


del AggregateRecorderTestCase
del ApplicationRecorderTestCase
del TrackingRecorderTestCase
del ProcessRecorderTestCase
del NonInterleavingNotificationIDsBaseCase
del InfrastructureFactoryTestCase
