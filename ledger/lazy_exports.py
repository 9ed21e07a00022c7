"""Lazy re-exports for the packages' ``__init__`` modules (PEP 562).

A package's public names are importable from the package (``from memory_ledger.commands
import MemoryEngine``) without importing every module behind them when the package is
imported: a short-lived process such as ``memory-ledger --help`` then pays only for what it
uses. The first access of a name imports its module and caches the object in the package's
namespace, so later accesses are plain attribute reads and ``isinstance`` checks see the one
class object of the defining module.

Usage, in a package ``__init__`` (the ``TYPE_CHECKING`` imports keep type checkers and
editors seeing the real names)::

    if TYPE_CHECKING:
        from memory_ledger.commands.engine.memory_engine import MemoryEngine

    __getattr__, __dir__ = lazy_exports(__name__, {"MemoryEngine":
    "memory_ledger.commands.engine.memory_engine"})
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """The module ``__getattr__`` and ``__dir__`` of ``package`` for ``exports`` (public name
    -> the module defining it, imported on first access)."""
    table = dict(exports)

    def __getattr__(name: str) -> object:
        origin = table.get(name)
        if origin is None:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(origin), name)
        setattr(sys.modules[package], name, value)  # later reads skip __getattr__
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(table))

    return __getattr__, __dir__
