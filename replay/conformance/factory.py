"""How the kit names, describes and opens the store under test.

A *factory* is any callable ``factory()`` that returns a LangGraph ``BaseStore``, or a
context manager that yields one (``PostgresStore.from_conn_string(...)`` is one). The kit
calls it once per test (and once in each child process); each test then works under a
namespace root of its own, so one store may serve every test. A factory that needs a place
(a folder, a database) reads it from its own configuration, not from the kit.

What the factory promises is said with :func:`store_factory`; a plain callable (even the
``InMemoryStore`` class) promises nothing, and the properties that need a promise skip,
saying which.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from langgraph.store.base import BaseStore

__all__ = ["FactoryTraits", "StoreFactory", "load_factory", "open_store", "store_factory"]

StoreFactory = Callable[[], "BaseStore | AbstractContextManager[BaseStore]"]
"""``factory()`` returns a store, or a context manager yielding one."""

F = TypeVar("F", bound=Callable[..., Any])

TRAITS_ATTRIBUTE = "conformance_traits"


@dataclass(frozen=True)
class FactoryTraits:
    """What a factory promises about the stores it opens.

    :param persistent: a store closed (or its process killed) and opened again by another
        call of the factory, in this process or another, holds the same items. Enables the
        ``durability`` property and the close-and-reopen steps.
    :param processes: several processes may each call the factory and use their stores at
        the same time, on one shared store. Enables the process half of ``concurrency``.
    """

    persistent: bool = False
    processes: bool = False


def store_factory(*, persistent: bool = False, processes: bool = False) -> Callable[[F], F]:
    """Decorate a factory with its :class:`FactoryTraits` (see there); returns it unchanged
    but for the ``conformance_traits`` attribute."""

    def mark(factory: F) -> F:
        setattr(factory, TRAITS_ATTRIBUTE, FactoryTraits(persistent, processes))
        return factory

    return mark


def load_factory(spec: str) -> tuple[StoreFactory, FactoryTraits]:
    """The factory named ``module:attribute`` (the attribute may be dotted) and its traits.

    :raises ValueError: ``spec`` has no ``:``.
    :raises ImportError, AttributeError: the module or attribute does not exist.
    :raises TypeError: the attribute is not callable.
    """
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        msg = f"a store factory is named module:function, got {spec!r}"
        raise ValueError(msg)
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    if not callable(target):
        msg = f"{spec} is not callable"
        raise TypeError(msg)
    traits = getattr(target, TRAITS_ATTRIBUTE, None)
    return target, traits if isinstance(traits, FactoryTraits) else FactoryTraits()


@contextmanager
def open_store(factory: StoreFactory) -> Iterator[BaseStore]:
    """Call ``factory`` and yield its store; on exit, leave its context manager, or call the
    store's ``close()`` when it has one (closing is what makes a persistent store's bytes
    final before the kit reads them).

    :raises TypeError: the factory made neither a ``BaseStore`` nor a context manager.
    """
    made = factory()
    if isinstance(made, BaseStore):
        try:
            yield made
        finally:
            close = getattr(made, "close", None)
            if callable(close):
                close()
        return
    if isinstance(made, AbstractContextManager):
        with made as store:
            if not isinstance(store, BaseStore):
                msg = f"the factory's context manager yielded {type(store).__name__}"
                raise TypeError(msg)
            yield store
        return
    msg = f"the factory made {type(made).__name__}, not a BaseStore"
    raise TypeError(msg)
