"""Event dispatch tables: per consumer, one table from event class to handler.

A consumer of ledger events (the projection fold, the session-state fold, the memory-stream
fold, a renderer) builds ONE :class:`EventDispatch` when its module is imported: the event
classes it handles, each with its handler, and the classes of the catalog it ignores on
purpose. Every table registers itself here (:func:`dispatch_tables`), and one test checks
each against the catalog (:data:`memory_ledger.ledger.events.EVENT_CLASSES`): a new event
type that a consumer neither handles nor ignores fails the suite instead of being skipped
silently.

Lookups are plain dict lookups by ``type(event)`` (the projection fold is a hot path). A
class the table does not name, such as a newer version of an event class that subclasses the
recorded one (upcasting), resolves through its bases to the nearest named class, and the
answer is cached. A class with no named base resolves to None, like an ignored one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar

from memory_ledger.ledger.events import EVENT_CLASSES, LedgerEvent

__all__ = ["EventDispatch", "dispatch_tables"]

H = TypeVar("H")

_TABLES: list[EventDispatch[Any]] = []


class EventDispatch(dict[type[LedgerEvent], H | None], Generic[H]):
    """``table[type(event)]`` is the consumer's handler for that event, or None when the
    consumer ignores it.

    :param consumer: who dispatches with this table (named in coverage failures).
    :param handlers: event class -> handler, for the classes the consumer acts on.
    :param ignores: the classes the consumer leaves alone on purpose.
    :raises ValueError: a class is both handled and ignored, or is not a LedgerEvent class.
    """

    def __init__(
        self,
        consumer: str,
        handlers: Mapping[type[LedgerEvent], H],
        *,
        ignores: Iterable[type[LedgerEvent]] = (),
    ) -> None:
        super().__init__(handlers)
        self.consumer = consumer
        self.handled: tuple[type[LedgerEvent], ...] = tuple(handlers)
        """The classes with a handler, in the order given."""
        self.ignored: frozenset[type[LedgerEvent]] = frozenset(ignores)
        """The classes the consumer ignores on purpose."""
        both = self.ignored & set(self.handled)
        if both:
            names = ", ".join(sorted(cls.__name__ for cls in both))
            msg = f"{consumer}: {names} both handled and ignored"
            raise ValueError(msg)
        for cls in (*self.handled, *self.ignored):
            if not (isinstance(cls, type) and issubclass(cls, LedgerEvent)):
                msg = f"{consumer}: {cls!r} is not an event class"
                raise ValueError(msg)
        for cls in self.ignored:
            self[cls] = None
        _TABLES.append(self)

    def __missing__(self, cls: type[LedgerEvent]) -> H | None:
        """Resolve a class the table does not name through its bases; cache the answer."""
        found: H | None = None
        for base in cls.__mro__[1:]:
            if base in self:
                found = dict.__getitem__(self, base)
                break
        self[cls] = found
        return found

    def uncovered(
        self, catalog: Iterable[type[LedgerEvent]] = EVENT_CLASSES
    ) -> list[type[LedgerEvent]]:
        """The classes of ``catalog`` this table neither handles nor ignores."""
        covered = set(self.handled) | self.ignored
        return [cls for cls in catalog if cls not in covered]

    def __repr__(self) -> str:
        return f"EventDispatch({self.consumer!r}, {len(self.handled)} handled)"


def dispatch_tables() -> list[EventDispatch[Any]]:
    """Every dispatch table built so far in this process (the consumers imported)."""
    return list(_TABLES)
