"""What the debugger writes to its log: an unexpected error's type, where it happened (the
route's pattern) and the code it was raised in; never its message.

The log (the ``memory_ledger.replay.ui`` logger) outlives a page and may be read by others
than the token's holder: an exception's message may quote a stored statement, a query, a
secret-shaped string or a path of the server, so it is left out, as are the values of the
request (a route is named by its pattern, ``/memory/{memory_id}``). ``memory-ledger ui``
shows the log on stderr (:func:`logged_to`); the CLI otherwise keeps the library's loggers
quiet (a ``NullHandler`` on ``memory_ledger``).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

__all__ = ["LOGGER", "log_failure", "logged_to"]

LOGGER = logging.getLogger("memory_ledger.replay.ui")
"""The debugger's logger (its modules' loggers are its children)."""

_FRAMES = 6
"""How many of the innermost frames :func:`log_failure` names."""


def log_failure(where: str, error: BaseException) -> None:
    """Log an unexpected error (level ERROR): its type (module-qualified), ``where`` (e.g.
    ``on /timetravel``) and the innermost frames it was raised in, as ``file:line
    function`` (file names only). Never the error's message, arguments or cause's text."""
    kind = type(error)
    name = kind.__qualname__
    if kind.__module__ != "builtins":
        name = f"{kind.__module__}.{name}"
    frames = traceback.extract_tb(error.__traceback__)[-_FRAMES:]
    raised = " < ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in reversed(frames))
    LOGGER.error("memory-ledger ui: internal error %s %s (raised at %s)", name, where, raised)


@contextmanager
def logged_to(stream: TextIO) -> Iterator[None]:
    """Write the debugger's log (WARNING and above) to ``stream`` while the block runs, one
    line a record (``memory-ledger ui`` passes stderr)."""
    handler = logging.StreamHandler(stream)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    level = LOGGER.level
    LOGGER.addHandler(handler)
    if LOGGER.getEffectiveLevel() > logging.WARNING:
        LOGGER.setLevel(logging.WARNING)
    try:
        yield
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(level)
