"""Round trips of every event class through the msgspec mapper, and upcasting."""

from __future__ import annotations

import dataclasses
import types
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal, Union, get_args, get_origin, get_type_hints
from uuid import UUID, uuid4

import msgspec
import pytest
from eventsourcing.compressor import ZlibCompressor
from eventsourcing.persistence import JSONTranscoder, MapperDeserialisationError, StoredEvent
from eventsourcing.utils import get_topic
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_ledger.ledger import mapper as mapper_module
from memory_ledger.ledger.events import EVENT_CLASSES, ErasedPayload, LedgerEvent
from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.mapper import MsgspecMapper, UnsupportedEventError

aware_datetimes = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)
texts = st.text(max_size=40)


def strategy_for(tp: Any) -> st.SearchStrategy[Any]:
    """A hypothesis strategy for the field type ``tp`` of an event Struct."""
    origin = get_origin(tp)
    if tp is str:
        return texts
    if tp is int:
        return st.integers(min_value=-(2**63), max_value=2**63 - 1)
    if tp is float:
        return st.floats(allow_nan=False)
    if tp is bool:
        return st.booleans()
    if tp is UUID:
        return st.uuids()
    if tp is datetime:
        return aware_datetimes
    if tp is type(None):
        return st.none()
    if origin is Literal:
        return st.sampled_from(get_args(tp))
    if origin in (Union, types.UnionType):
        return st.one_of(*(strategy_for(a) for a in get_args(tp)))
    if origin is tuple:
        args = get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return st.lists(strategy_for(args[0]), max_size=4).map(tuple)
        return st.tuples(*(strategy_for(a) for a in args))
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        return struct_strategy(tp)
    raise NotImplementedError(tp)


def struct_strategy(cls: type[msgspec.Struct]) -> st.SearchStrategy[Any]:
    hints = get_type_hints(cls)
    return st.builds(
        cls, **{f.name: strategy_for(hints[f.name]) for f in msgspec.structs.fields(cls)}
    )


STORED_CLASSES = tuple(cls for cls in EVENT_CLASSES if cls is not ErasedPayload)
"""Every class the mapper stores (an ErasedPayload is only ever read, never stored)."""
any_event = st.one_of(*(struct_strategy(cls) for cls in STORED_CLASSES))


@settings(max_examples=300)
@given(any_event)
def test_every_event_class_round_trips(event: LedgerEvent) -> None:
    mapper = MsgspecMapper(transcoder=JSONTranscoder())
    stored = mapper.to_stored_event(event)
    assert stored.topic == get_topic(type(event))
    assert stored.originator_id == event.originator_id
    assert stored.originator_version == event.originator_version
    assert stored.state[0] == type(event).class_version
    assert mapper.to_domain_event(stored) == event


@settings(max_examples=50)
@given(any_event)
def test_round_trip_with_compressor(event: LedgerEvent) -> None:
    mapper = MsgspecMapper(transcoder=JSONTranscoder(), compressor=ZlibCompressor())
    assert mapper.to_domain_event(mapper.to_stored_event(event)) == event


@settings(max_examples=200)
@given(any_event, st.sampled_from([0, 1, 127, 128, 4095, 4096, 70_000, 2**40]))
def test_the_fast_encoding_stores_the_bytes_of_the_general_one(
    event: LedgerEvent, version: int
) -> None:
    """The envelope left out at fixed offsets (fewer than 16 fields, version < 4096) gives
    the state the general path (header parsed, envelope compared) gives: stores written
    before read the same, and the bytes of an event do not depend on the path taken."""
    event = msgspec.structs.replace(event, originator_version=version)
    mapper = MsgspecMapper(transcoder=JSONTranscoder())
    full = msgspec.msgpack.Encoder(uuid_format="bytes").encode(event)
    general = MsgspecMapper._state(event, mapper_module._codec(type(event)), full)
    stored = mapper.to_stored_event(event)
    assert stored.state == general
    assert mapper.to_domain_event(stored) == event


def test_stored_events_are_plain_stored_events() -> None:
    """The mapper makes its ``StoredEvent`` without the dataclass constructor: it must be
    one in every respect (equal, hashed and frozen alike)."""
    event = NoteTaken(
        originator_id=uuid4(),
        originator_version=1,
        recorded_at=datetime(2024, 1, 1, tzinfo=UTC),
        namespace=Namespace("t", "p", "s"),
        text="hello",
    )
    stored = MsgspecMapper(transcoder=JSONTranscoder()).to_stored_event(event)
    built = StoredEvent(stored.originator_id, stored.originator_version, stored.topic, stored.state)
    assert type(stored) is StoredEvent and stored == built and hash(stored) == hash(built)
    assert vars(stored) == vars(built)
    with pytest.raises(dataclasses.FrozenInstanceError):
        stored.topic = "other"  # type: ignore[misc]


def test_all_catalog_classes_are_covered() -> None:
    names = {cls.__name__ for cls in EVENT_CLASSES}
    required = {
        "SessionOpened",
        "TranscriptObserved",
        "CandidateExtracted",
        "CandidateRejected",
        "MemoryActivated",
        "MemoryReinforced",
        "SessionSealed",
        "SessionReconciled",
    }
    assert required <= names


class NoteTaken(LedgerEvent, frozen=True, kw_only=True):
    """Version 1 of a test event."""

    text: str


class NoteTakenV2(LedgerEvent, frozen=True, kw_only=True):
    """Version 2: gained ``language``; the upcaster fills it for old records."""

    class_version: ClassVar[int] = 2
    text: str
    language: str

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["language"] = "und"


def test_upcasting_old_class_version() -> None:
    mapper = MsgspecMapper(transcoder=JSONTranscoder())
    old = NoteTaken(
        originator_id=uuid4(),
        originator_version=1,
        recorded_at=datetime(2024, 1, 1, tzinfo=UTC),
        namespace=Namespace("t", "p", "s"),
        text="hello",
    )
    stored = mapper.to_stored_event(old)
    assert stored.state[0] == 1
    # The class evolved: the stored topic now resolves to version 2.
    stored_as_v2 = type(stored)(
        originator_id=stored.originator_id,
        originator_version=stored.originator_version,
        topic=get_topic(NoteTakenV2),
        state=stored.state,
    )
    upcast = mapper.to_domain_event(stored_as_v2)
    assert isinstance(upcast, NoteTakenV2)
    assert upcast.text == "hello"
    assert upcast.language == "und"
    assert upcast.recorded_at == old.recorded_at


def test_newer_class_version_is_refused() -> None:
    mapper = MsgspecMapper(transcoder=JSONTranscoder())
    new = NoteTakenV2(
        originator_id=uuid4(),
        originator_version=1,
        recorded_at=datetime(2024, 1, 1, tzinfo=UTC),
        namespace=Namespace("t", "p", "s"),
        text="x",
        language="en",
    )
    stored = mapper.to_stored_event(new)
    downgraded = type(stored)(stored.originator_id, 1, get_topic(NoteTaken), stored.state)
    with pytest.raises(MapperDeserialisationError, match="newer"):
        mapper.to_domain_event(downgraded)


def test_malformed_payload_gets_typed_error() -> None:
    mapper = MsgspecMapper(transcoder=JSONTranscoder())
    good = mapper.to_stored_event(
        NoteTaken(
            originator_id=uuid4(),
            originator_version=1,
            recorded_at=datetime(2024, 1, 1, tzinfo=UTC),
            namespace=Namespace("t", "p", "s"),
            text="x",
        )
    )
    for state in (b"", b"\x01\xc1", b"\x01" + msgspec.msgpack.encode({"text": 3})):
        bad = type(good)(good.originator_id, 1, good.topic, state)
        with pytest.raises(MapperDeserialisationError):
            mapper.to_domain_event(bad)


def test_non_struct_event_is_refused() -> None:
    mapper = MsgspecMapper(transcoder=JSONTranscoder())
    with pytest.raises(UnsupportedEventError):
        mapper.to_stored_event(object())  # type: ignore[arg-type]


@given(struct_strategy(ErasedPayload))
def test_an_erased_payload_is_never_stored(event: ErasedPayload) -> None:
    with pytest.raises(UnsupportedEventError):
        MsgspecMapper(transcoder=JSONTranscoder()).to_stored_event(event)
