"""The instrumentation scope's version: the installed distribution's, read once."""

from __future__ import annotations

from functools import cache

__all__ = ["version"]


@cache
def version() -> str:
    """The installed ``memory-ledger`` version ("" when run from a source tree)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("memory-ledger")
    except PackageNotFoundError:
        return ""
