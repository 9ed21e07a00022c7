"""The conformance kit's pytest plugin under its short name:
``pytest -p memory_ledger.conformance --store-factory mypkg:make_store``.

The kit lives in :mod:`memory_ledger.replay.conformance` (``docs/conformance.md``); this
module is its plugin, re-exported, so that ``-p`` loads the hooks and fixtures from here.
"""

from __future__ import annotations

from memory_ledger.replay.conformance.plugin import (
    conformance_bytes,
    conformance_examples,
    conformance_root,
    conformance_store,
    conformance_subject,
    pytest_addoption,
    pytest_collection_modifyitems,
    pytest_configure,
)

__all__ = [
    "conformance_bytes",
    "conformance_examples",
    "conformance_root",
    "conformance_store",
    "conformance_subject",
    "pytest_addoption",
    "pytest_collection_modifyitems",
    "pytest_configure",
]
