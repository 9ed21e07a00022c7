"""A conformance kit for memory stores: contract and guarantee tests any LangGraph
``BaseStore`` can be run against (the ``memory-ledger[conformance]`` extra).

Run it as a pytest plugin on a store a factory makes (``docs/conformance.md``)::

    pytest -p memory_ledger.conformance --store-factory mypkg.stores:make_store \\
        [--store-bytes DIR | --store-dsn postgresql://...]

The kit uses the ``BaseStore`` interface only (no module of the engine), so it holds any
store to the same bar. :mod:`.mutants` holds the deliberately broken stores its own tests
run it on. The names below are imported on first use (see
:mod:`memory_ledger.ledger.lazy_exports`); importing this package imports neither pytest nor
LangGraph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.replay.conformance.catalog import PROPERTIES, PropertyResult, summarize
    from memory_ledger.replay.conformance.factory import (
        FactoryTraits,
        StoreFactory,
        load_factory,
        open_store,
        store_factory,
    )
    from memory_ledger.replay.conformance.places import StoreBytes, find_in_bytes
    from memory_ledger.replay.conformance.runner import KitRun, run_kit

__all__ = [
    "FactoryTraits",
    "KitRun",
    "PROPERTIES",
    "PropertyResult",
    "StoreBytes",
    "StoreFactory",
    "find_in_bytes",
    "load_factory",
    "open_store",
    "run_kit",
    "store_factory",
    "summarize",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "PROPERTIES": "memory_ledger.replay.conformance.catalog",
        "FactoryTraits": "memory_ledger.replay.conformance.factory",
        "KitRun": "memory_ledger.replay.conformance.runner",
        "PropertyResult": "memory_ledger.replay.conformance.catalog",
        "StoreBytes": "memory_ledger.replay.conformance.places",
        "StoreFactory": "memory_ledger.replay.conformance.factory",
        "find_in_bytes": "memory_ledger.replay.conformance.places",
        "load_factory": "memory_ledger.replay.conformance.factory",
        "open_store": "memory_ledger.replay.conformance.factory",
        "run_kit": "memory_ledger.replay.conformance.runner",
        "store_factory": "memory_ledger.replay.conformance.factory",
        "summarize": "memory_ledger.replay.conformance.catalog",
    },
)
