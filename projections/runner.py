"""Paged, exactly-once catch-up of every read model from the ledger.

Each page of notifications is decoded once (only events some read model uses), folded
(``projections.fold``) and committed with the new tracking position in ONE DuckDB
transaction. A crash at any point leaves the file at the last committed page; the next
catch-up resumes there, so no event is applied twice or skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, cast

from eventsourcing.persistence import ApplicationRecorder, Mapper, Notification
from eventsourcing.utils import get_topic

from ledger.events import LedgerEvent
from projections.fold import PROJECTED_EVENTS, fold_page
from projections.store import ProjectionStore

__all__ = ["PROJECTION_VERSION", "ProjectionRunner"]

PROJECTION_VERSION = 1
"""Version of the read models' shape and fold; bump it to rebuild every projection file."""

_TOPICS = frozenset(get_topic(cls) for cls in PROJECTED_EVENTS)


class ProjectionRunner:
    """Keeps a :class:`ProjectionStore` in step with the ledger.

    :param store: the projection file.
    :param recorder: the ledger's application recorder.
    :param mapper: decodes stored events.
    :param page_size: notifications per DuckDB transaction.
    :param on_page: optional callback ``(last position applied)`` after each commit
        (progress bars, fault injection in tests).
    """

    def __init__(
        self,
        store: ProjectionStore,
        recorder: ApplicationRecorder,
        mapper: Mapper[Any],
        *,
        page_size: int = 10_000,
        on_page: Callable[[int], None] | None = None,
    ) -> None:
        self.store = store
        self.recorder = recorder
        self.mapper = mapper
        self.page_size = page_size
        self.on_page = on_page

    @property
    def position(self) -> int:
        """The last ledger position applied (0 when none)."""
        return self.store.position()

    def catch_up(self, to: int | None = None) -> int:
        """Apply every notification after the tracked position up to ``to`` (or the head).

        Returns the new position.
        """
        position = self.position
        while to is None or position < to:
            notifications = self.recorder.select_notifications(
                start=position, limit=self.page_size, stop=to, inclusive_of_start=False
            )
            if not notifications:
                break
            self.apply_page(notifications, previous=position)
            position = notifications[-1].id
            if self.on_page is not None:
                self.on_page(position)
        return position

    def decode(self, notifications: Sequence[Notification]) -> list[tuple[int, LedgerEvent]]:
        """``(position, event)`` of the notifications some read model uses."""
        to_event = self.mapper.to_domain_event
        return [(n.id, cast(LedgerEvent, to_event(n))) for n in notifications if n.topic in _TOPICS]

    def apply_page(self, notifications: Sequence[Notification], *, previous: int) -> None:
        """Fold one page and commit rows + tracking in one transaction.

        If the file's position is no longer ``previous`` (another applier committed this
        page first), nothing is applied: applying it again would count events twice.
        """
        events = self.decode(notifications)
        conn = self.store.conn
        conn.execute("BEGIN TRANSACTION")
        try:
            if self.store.position() != previous:
                conn.execute("ROLLBACK")
                return
            fold_page(conn, events)
            self.store.set_position(notifications[-1].id)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
