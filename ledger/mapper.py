"""A msgspec (msgpack) mapper for the ``eventsourcing`` library.

Selected the library's way: ``MAPPER_TOPIC=ledger.mapper:MsgspecMapper`` in the ``env`` given
to the infrastructure factory. Stored state is one byte of class version followed by the
msgpack encoding of the event's fields except ``originator_id`` and ``originator_version``
(those live in the stored event itself). The class version stays outside the typed payload
so an upcaster sees it (the library's ``upcast_vN_vN+1`` convention on the event class).

Decoding is typed: the payload decodes straight into a msgspec Struct derived from the event
class, so a malformed payload fails with
:class:`~eventsourcing.persistence.MapperDeserialisationError` instead of yielding a
half-built event. The library's optional compressor and cipher are applied as in its
own ``Mapper`` (compress, then encrypt). No JSON on this path.
"""

from __future__ import annotations

from functools import cache
from typing import Any, cast, get_type_hints
from uuid import UUID

import msgspec
from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import Mapper, MapperDeserialisationError, StoredEvent
from eventsourcing.utils import get_topic, resolve_topic

__all__ = ["MsgspecMapper", "UnsupportedEventError"]

_ENVELOPE_FIELDS = ("originator_id", "originator_version")
_encoder = msgspec.msgpack.Encoder(uuid_format="bytes")
_untyped_decoder = msgspec.msgpack.Decoder()


class UnsupportedEventError(TypeError):
    """The object given to the mapper is not a msgspec Struct event."""


class _Codec:
    """Payload type, field names and decoder derived once per event class."""

    def __init__(self, cls: type[msgspec.Struct]) -> None:
        hints = get_type_hints(cls)
        fields = [f for f in msgspec.structs.fields(cls) if f.name not in _ENVELOPE_FIELDS]
        self.names = tuple(f.name for f in fields)
        spec: list[tuple[str, Any, Any]] = []
        for f in fields:
            if f.default is not msgspec.NODEFAULT:
                spec.append((f.name, hints[f.name], f.default))
            elif f.default_factory is not msgspec.NODEFAULT:
                spec.append(
                    (f.name, hints[f.name], msgspec.field(default_factory=f.default_factory))
                )
            else:
                spec.append((f.name, hints[f.name], msgspec.NODEFAULT))
        required = [s[:2] for s in spec if s[2] is msgspec.NODEFAULT]
        optional = [s for s in spec if s[2] is not msgspec.NODEFAULT]
        self.payload_type = msgspec.defstruct(
            f"{cls.__name__}Payload", [*required, *optional], kw_only=True, frozen=True
        )
        self.decoder = msgspec.msgpack.Decoder(self.payload_type)
        self.class_version = int(getattr(cls, "class_version", 1))


@cache
def _codec(cls: type[msgspec.Struct]) -> _Codec:
    return _Codec(cls)


class MsgspecMapper(Mapper[UUID]):
    """Converts msgspec Struct events to and from ``StoredEvent`` (msgpack, typed decoding).

    :raises UnsupportedEventError: on encoding an object that is not a msgspec Struct.
    :raises MapperDeserialisationError: on decoding a state that is not a valid payload of
        the topic's class, or whose class version is newer than the class.
    """

    def to_stored_event(self, domain_event: DomainEventProtocol[UUID]) -> StoredEvent:
        cls = type(domain_event)
        if not isinstance(domain_event, msgspec.Struct):
            msg = f"{cls.__qualname__} is not a msgspec Struct event"
            raise UnsupportedEventError(msg)
        codec = _codec(cls)
        payload = {name: getattr(domain_event, name) for name in codec.names}
        state = bytes((codec.class_version,)) + _encoder.encode(payload)
        if self.compressor:
            state = self.compressor.compress(state)
        if self.cipher:
            state = self.cipher.encrypt(state)
        return StoredEvent(
            originator_id=domain_event.originator_id,
            originator_version=domain_event.originator_version,
            topic=get_topic(cls),
            state=state,
        )

    def to_domain_event(self, stored_event: StoredEvent) -> DomainEventProtocol[UUID]:
        try:
            cls = resolve_topic(stored_event.topic)
            state = stored_event.state
            if self.cipher:
                state = self.cipher.decrypt(state)
            if self.compressor:
                state = self.compressor.decompress(state)
            codec = _codec(cls)
            if not state:
                msg = "empty state"
                raise ValueError(msg)
            from_version = state[0]
            if from_version > codec.class_version:
                msg = (
                    f"stored class version {from_version} is newer than "
                    f"{cls.__qualname__}.class_version {codec.class_version}"
                )
                raise ValueError(msg)
            if from_version == codec.class_version:
                payload = codec.decoder.decode(state[1:])
            else:
                raw = _untyped_decoder.decode(state[1:])
                if not isinstance(raw, dict):
                    msg = "payload is not a map"
                    raise ValueError(msg)
                while from_version < codec.class_version:
                    getattr(cls, f"upcast_v{from_version}_v{from_version + 1}")(raw)
                    from_version += 1
                payload = msgspec.convert(raw, codec.payload_type, from_attributes=False)
            originator_id = stored_event.originator_id
            if not isinstance(originator_id, UUID):
                originator_id = UUID(originator_id)
            values = {name: getattr(payload, name) for name in codec.names}
            event = cls(
                originator_id=originator_id,
                originator_version=stored_event.originator_version,
                **values,
            )
        except Exception as e:
            msg = (
                f"Failed to deserialise state of stored event with topic "
                f"'{stored_event.topic}', originator_id '{stored_event.originator_id}' and "
                f"originator_version {stored_event.originator_version}: {e}"
            )
            raise MapperDeserialisationError(msg) from e
        return cast(DomainEventProtocol[UUID], event)
