"""The docs pages that describe the code stay true to it: ``docs/errors.md`` names every
error class under ``MemoryLedgerError`` with its reason code, ``docs/design.md`` every event
class of the catalog."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

import memory_ledger
from memory_ledger.ledger.errors import MemoryLedgerError
from memory_ledger.ledger.events import EVENT_CLASSES

DOCS = Path(__file__).resolve().parents[2] / "docs"


def error_classes() -> set[type[MemoryLedgerError]]:
    found: set[type[MemoryLedgerError]] = set()
    for top in ("ledger", "projections", "commands", "replay"):
        package = importlib.import_module(f"memory_ledger.{top}")
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if info.name.endswith("__main__"):
                continue
            module = importlib.import_module(info.name)
            for value in vars(module).values():
                if (
                    inspect.isclass(value)
                    and issubclass(value, MemoryLedgerError)
                    and value.__module__ == module.__name__
                ):
                    found.add(value)
    return found


def test_the_error_page_names_every_error_and_its_reason_code() -> None:
    page = (DOCS / "errors.md").read_text(encoding="utf-8")
    classes = error_classes()
    assert len(classes) > 50 and memory_ledger.MemoryLedgerError in classes
    for cls in classes:
        assert f"{cls.__name__}  [{cls.reason_code}]" in page, cls


def test_the_design_page_lists_every_event_of_the_catalog() -> None:
    page = (DOCS / "design.md").read_text(encoding="utf-8")
    for cls in EVENT_CLASSES:
        assert f"| `{cls.__name__}` |" in page, cls
