"""Adding an event type cannot be silently missed by a consumer.

Every consumer of events dispatches through one ``EventDispatch`` table
(``memory_ledger.ledger.dispatch``). This test imports every module of the package, then
checks that the catalog lists every event class, and that each table handles or explicitly
ignores every class of the catalog.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import memory_ledger
from memory_ledger.ledger import events
from memory_ledger.ledger.dispatch import dispatch_tables
from memory_ledger.ledger.events import EVENT_CLASSES, LedgerEvent

# The consumers known today (a table removed by mistake would otherwise pass unnoticed).
CONSUMERS = {
    "projection fold: rows to load before a page",
    "projection fold: apply an event to the read models",
    "projection runner: events that change what a recall can return",
    "columnar path: events that change existing canonical rows",
    "session state: fold of a session stream",
    "fold_memory_stream: state of one memory stream",
    "describe_event: one-line summaries",
    "explain: history entries of a memory stream",
}


def test_every_dispatch_table_covers_the_event_catalog() -> None:
    for module in pkgutil.walk_packages(memory_ledger.__path__, "memory_ledger."):
        if not module.name.endswith("__main__"):  # __main__ runs the CLI
            importlib.import_module(module.name)
    declared = {
        cls
        for _, cls in inspect.getmembers(events, inspect.isclass)
        if issubclass(cls, LedgerEvent) and cls is not LedgerEvent
    }
    assert declared == set(EVENT_CLASSES), "EVENT_CLASSES must list every event class"

    tables = dispatch_tables()
    assert CONSUMERS <= {table.consumer for table in tables}
    problems = []
    for table in tables:
        missing = [cls.__name__ for cls in table.uncovered()]
        if missing:
            problems.append(f"{table.consumer}: neither handles nor ignores {missing}")
        strangers = [
            cls.__name__ for cls in (*table.handled, *table.ignored) if cls not in EVENT_CLASSES
        ]
        if strangers:
            problems.append(f"{table.consumer}: names classes outside the catalog {strangers}")
    assert not problems, "\n".join(problems)
