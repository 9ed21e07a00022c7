"""Driver errors never reach a caller raw.

As ``eventsourcing``'s own recorders map ``sqlite3``/``psycopg`` errors onto the DB-API
classes of ``eventsourcing.persistence``, LMDB and DuckDB errors are translated into
classes that are both ``MemoryLedgerError`` and the library's class of the same meaning,
naming the store path, with the driver's error as ``__cause__``; httpx errors of the model
and embedding endpoints arrive as ``ModelOutputError`` / ``EmbeddingError``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from uuid import uuid4

import duckdb
import httpx
import lmdb
import pytest
from eventsourcing.persistence import (
    DatabaseError,
    DataError,
    IntegrityError,
    InternalError,
    NotSupportedError,
    OperationalError,
    ProgrammingError,
    StoredEvent,
)

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.commands.embeddings import OpenAIEmbeddingProvider
from memory_ledger.commands.embeddings.base import EmbeddingError
from memory_ledger.commands.extraction import ExtractionRequest, OpenAIChatExtractor
from memory_ledger.commands.extraction.openai import ModelOutputError
from memory_ledger.ledger.errors import (
    ForeignStoreError,
    LedgerDamagedError,
    LedgerDataError,
    LedgerDiskFullError,
    LedgerError,
    LedgerFormatError,
    LedgerIntegrityError,
    LedgerInternalError,
    LedgerOperationalError,
    LedgerProgrammingError,
    LedgerReadOnlyError,
    LedgerRecordError,
    LedgerSettingError,
    MemoryLedgerError,
)
from memory_ledger.ledger.lmdb import LMDBApplicationRecorder, LMDBDatastore, LMDBFactory
from memory_ledger.ledger.lmdb_errors import translate_lmdb_error
from memory_ledger.projections.errors import (
    ProjectionDataError,
    ProjectionError,
    ProjectionIntegrityError,
    ProjectionInternalError,
    ProjectionNotSupportedError,
    ProjectionOperationalError,
    ProjectionProgrammingError,
    translate_duckdb_error,
)
from memory_ledger.projections.runner import ProjectionRunner
from memory_ledger.projections.store import damage_marker
from tests.conftest import make_item

NS = Namespace("acme", "alice", "assistant")
TOPIC = "memory_ledger.ledger.events:SessionOpened"


# LMDB ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("driver", "typed", "library", "reason"),
    [
        (lmdb.KeyExistsError, LedgerIntegrityError, IntegrityError, "ledger_conflict"),
        (lmdb.BadValsizeError, LedgerDataError, DataError, "ledger_data"),
        (lmdb.CorruptedError, LedgerDamagedError, DatabaseError, "ledger_damaged"),
        (lmdb.PageNotFoundError, LedgerDamagedError, DatabaseError, "ledger_damaged"),
        (lmdb.PanicError, LedgerDamagedError, DatabaseError, "ledger_damaged"),
        (lmdb.InvalidError, ForeignStoreError, DatabaseError, "not_lmdb"),
        (lmdb.IncompatibleError, ForeignStoreError, DatabaseError, "foreign_lmdb"),
        (lmdb.VersionMismatchError, LedgerFormatError, DatabaseError, "lmdb_version_mismatch"),
        (lmdb.ReadonlyError, LedgerReadOnlyError, OperationalError, "ledger_read_only"),
        (lmdb.MapFullError, LedgerOperationalError, OperationalError, "ledger_full"),
        (lmdb.ReadersFullError, LedgerOperationalError, OperationalError, "ledger_full"),
        (lmdb.DiskError, LedgerOperationalError, OperationalError, "ledger_unavailable"),
        (lmdb.BadTxnError, LedgerInternalError, InternalError, "ledger_internal"),
        (lmdb.InvalidParameterError, LedgerProgrammingError, ProgrammingError, None),
    ],
)
def test_lmdb_errors_map_to_typed_errors_naming_the_path(
    driver: type[lmdb.Error], typed: type[LedgerError], library: type[Exception], reason: str | None
) -> None:
    translated = translate_lmdb_error(driver("mdb_txn_begin: boom"), "/stores/a/ledger", "read")
    assert type(translated) is typed
    assert isinstance(translated, MemoryLedgerError) and isinstance(translated, library)
    assert translated.path == "/stores/a/ledger"
    assert "/stores/a/ledger" in str(translated) and "boom" in str(translated)
    if reason is not None:
        assert translated.reason_code == reason


def test_no_space_left_is_a_disk_full_error_naming_the_folder() -> None:
    translated = translate_lmdb_error(
        lmdb.Error("/s/ledger: No space left on device"), "/s/ledger", "open"
    )
    assert type(translated) is LedgerDiskFullError and translated.reason_code == "disk_full"
    assert isinstance(translated, LedgerOperationalError)
    assert "no space left on device" in str(translated) and "/s/ledger" in str(translated)


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("/s/ledger: Permission denied", "permission_denied"),
        ("/s/ledger: Read-only file system", "read_only_file_system"),
        ("/s/ledger: something else", "ledger_unavailable"),
    ],
)
def test_an_errno_lmdb_error_is_operational_with_its_cause_as_reason(
    message: str, reason: str
) -> None:
    translated = translate_lmdb_error(lmdb.Error(message), "/s/ledger", "open")
    assert type(translated) is LedgerOperationalError
    assert translated.reason_code == reason


class _FailingEnv:
    """Stands in for an ``lmdb.Environment`` whose transactions cannot begin."""

    def __init__(self, real: Any, error: lmdb.Error) -> None:
        self.real, self.error = real, error

    def begin(self, **_: Any) -> Any:
        raise self.error

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@contextlib.contextmanager
def failing_env(datastore: LMDBDatastore, error: lmdb.Error) -> Iterator[None]:
    shared = datastore.shared
    real = shared.env
    shared.env = _FailingEnv(real, error)  # type: ignore[assignment]
    try:
        yield
    finally:
        shared.env = real


def test_a_failing_read_and_write_are_translated_naming_the_store(tmp_path: Path) -> None:
    datastore = LMDBDatastore(str(tmp_path / "ledger"), sync=False)
    try:
        recorder = LMDBApplicationRecorder(datastore)
        with failing_env(datastore, lmdb.ReadersFullError("mdb_txn_begin: MDB_READERS_FULL")):
            with pytest.raises(LedgerOperationalError) as read:
                recorder.max_notification_id()
            with pytest.raises(LedgerOperationalError) as write:
                recorder.insert_events([StoredEvent(uuid4(), 1, TOPIC, b"x")])
        for raised in (read, write):
            assert isinstance(raised.value.__cause__, lmdb.ReadersFullError)
            assert raised.value.reason_code == "ledger_full"
            assert str(tmp_path / "ledger") in str(raised.value)
        assert recorder.max_notification_id() is None, "nothing was written"
    finally:
        datastore.close()


def test_a_damaged_record_body_is_a_typed_error(tmp_path: Path) -> None:
    datastore = LMDBDatastore(str(tmp_path / "ledger"), sync=False)
    try:
        recorder = LMDBApplicationRecorder(datastore)
        recorder.insert_events([StoredEvent(uuid4(), 1, TOPIC, b"x")])
        log = datastore.db(b"log")
        datastore.write(lambda txn: txn.put((1).to_bytes(8, "big"), bytes(32) + b"\xc1", db=log))
        with pytest.raises(LedgerRecordError):
            recorder.select_notifications(1, 10)
        with pytest.raises(LedgerRecordError, match="ledger record 1") as raw:
            recorder.select_raw(0, 10)
        assert raw.value.path == str(tmp_path / "ledger")
        assert isinstance(raw.value, LedgerDamagedError) and isinstance(raw.value, ValueError)
    finally:
        datastore.close()


def test_duplicate_events_still_raise_the_librarys_integrity_error(tmp_path: Path) -> None:
    datastore = LMDBDatastore(str(tmp_path / "ledger"), sync=False)
    try:
        recorder = LMDBApplicationRecorder(datastore)
        event = StoredEvent(uuid4(), 1, TOPIC, b"x")
        recorder.insert_events([event])
        with pytest.raises(IntegrityError) as raised:
            recorder.insert_events([event])
        assert isinstance(raised.value, LedgerIntegrityError)
        assert raised.value.reason_code == "ledger_conflict"
    finally:
        datastore.close()


def test_bad_settings_are_typed_and_still_oserrors(tmp_path: Path) -> None:
    for env in (
        {"LMDB_PATH": ""},
        {"LMDB_PATH": str(tmp_path), "LMDB_POLL_INTERVAL": "nan"},
        {"LMDB_PATH": str(tmp_path), "LMDB_READONLY": "maybe"},
    ):
        with pytest.raises(LedgerSettingError) as raised:
            LMDBFactory(env)
        assert isinstance(raised.value, OSError)
        assert raised.value.reason_code == "invalid_setting"


# DuckDB -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("driver", "typed", "library"),
    [
        (duckdb.ConstraintException, ProjectionIntegrityError, IntegrityError),
        (duckdb.ConversionException, ProjectionDataError, DataError),
        (duckdb.OutOfMemoryException, ProjectionOperationalError, OperationalError),
        (duckdb.CatalogException, ProjectionProgrammingError, ProgrammingError),
        (duckdb.InternalException, ProjectionInternalError, InternalError),
        (duckdb.NotImplementedException, ProjectionNotSupportedError, NotSupportedError),
        (duckdb.InterruptException, ProjectionError, DatabaseError),
    ],
)
def test_duckdb_errors_map_like_the_library_maps_db_api_errors(
    driver: type[duckdb.Error], typed: type[ProjectionError], library: type[Exception]
) -> None:
    translated = translate_duckdb_error(driver("Catalog Error: boom"), "/s/slot-0.duckdb")
    assert type(translated) is typed
    assert isinstance(translated, MemoryLedgerError) and isinstance(translated, library)
    assert translated.path == "/s/slot-0.duckdb" and "/s/slot-0.duckdb" in str(translated)


def stored(path: Path) -> None:
    with MemoryEngine.open(path, sync=False) as engine:
        extractor = RecordedExtractor()
        session = engine.session(NS, "s1", extractor=extractor)
        extractor.provide(1, [make_item("Alice likes green tea.")])
        session.observe_final_transcript(1, "user: green tea please")
        session.finish()


def test_a_duckdb_error_in_a_read_model_query_names_the_projection_file(
    tmp_path: Path,
) -> None:
    stored(tmp_path / "store")
    with MemoryEngine.open(tmp_path / "store", sync=False) as engine:
        engine.catch_up()
        with engine.projections.lock:
            engine.projections.conn.execute("DROP VIEW IF EXISTS vocabulary")
        with pytest.raises(ProjectionError) as raised, engine.read_models() as live:
            live.conn.execute("SELECT * FROM vocabulary").fetchall()  # an SQL reader
        assert isinstance(raised.value.__cause__, duckdb.Error)
        assert isinstance(raised.value, ProgrammingError)
        assert engine.projections.path in str(raised.value)
        assert not damage_marker(Path(engine.projections.path)).exists(), "not damage"


def test_a_duckdb_error_during_catch_up_is_translated_not_raw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stored(tmp_path / "store")

    def interrupted(self: ProjectionRunner, to: int | None = None) -> int:
        raise duckdb.InterruptException("INTERRUPT Error: Interrupted!")

    with MemoryEngine.open(tmp_path / "store", sync=False) as engine:
        monkeypatch.setattr(ProjectionRunner, "catch_up", interrupted)
        assert engine.recall(NS, "green tea").results  # served from memory
        with pytest.raises(ProjectionError, match="slot-0.duckdb") as raised:
            engine.catch_up()  # a DuckDB reader meets the error
        assert type(raised.value) is ProjectionError
        assert isinstance(raised.value.__cause__, duckdb.InterruptException)


# httpx --------------------------------------------------------------------------------------


def _raising(error: Exception) -> httpx.MockTransport:
    def handler(request: httpx.Request) -> httpx.Response:
        raise error

    return httpx.MockTransport(handler)


@pytest.mark.parametrize(
    ("error", "extractor_reason"),
    [
        (httpx.ConnectError("refused"), "unreachable"),
        (httpx.ReadTimeout("slow"), "timeout"),
        (httpx.RemoteProtocolError("garbled"), "http_error"),
    ],
)
def test_httpx_errors_arrive_typed(error: Exception, extractor_reason: str) -> None:
    request = ExtractionRequest(session_id="s1", turn_id=1, transcript="user: hi")
    with OpenAIChatExtractor(
        "http://model.invalid/v1", "m", timeout=1, transport=_raising(error)
    ) as extractor:
        with pytest.raises(ModelOutputError) as raised:
            extractor.extract(request)
    assert raised.value.reason_code == extractor_reason
    assert isinstance(raised.value, MemoryLedgerError)
    assert isinstance(raised.value.__cause__, httpx.HTTPError)
    provider = OpenAIEmbeddingProvider(
        "http://model.invalid/v1", "e", 4, timeout=1, transport=_raising(error)
    )
    try:
        with pytest.raises(EmbeddingError) as embedding:
            provider.embed(["hello"])
    finally:
        provider.close()
    assert embedding.value.reason_code == "provider_failed"
    assert isinstance(embedding.value.__cause__, httpx.HTTPError)
