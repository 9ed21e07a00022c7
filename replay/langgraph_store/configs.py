"""The checks of LangGraph's ``IndexConfig`` and ``TTLConfig`` as a store is opened: a
setting the store could not use is refused there with a typed error naming it, never
accepted and then failing the first put with a builtin ``TypeError`` or ``AttributeError``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NoReturn

from memory_ledger.ledger.errors import InvalidArgumentError, InvalidArgumentTypeError
from memory_ledger.replay.langgraph_store.records import checked_ttl

__all__ = ["INVALID_INDEX", "INVALID_TTL", "check_index", "check_ttl"]

INVALID_INDEX = "invalid_index_config"
"""Reason code of an ``index`` the store cannot use (``parameter`` ``index``)."""
INVALID_TTL = "invalid_ttl_config"
"""Reason code of a ``ttl`` the store cannot use (``parameter`` ``ttl``)."""


def _refuse(parameter: str, reason: str, message: str, *, typed: bool = True) -> NoReturn:
    kind = InvalidArgumentTypeError if typed else InvalidArgumentError
    raise kind(message, parameter=parameter, reason_code=reason)


def check_index(index: object) -> None:
    """Check ``index`` (LangGraph's ``IndexConfig``: None, or a mapping whose ``fields`` is
    None or a list of path strings, ``dims`` a positive integer, ``embed`` an
    ``Embeddings``, a function of texts or a ``provider:model`` string).

    :raises InvalidArgumentTypeError: a setting of the wrong type (``invalid_index_config``,
        ``parameter`` ``index``; the message names the setting).
    :raises InvalidArgumentError: ``fields`` holding an empty path, or ``dims`` below 1
        (``invalid_index_config``).
    """
    if index is None:
        return
    if not isinstance(index, Mapping):
        _refuse("index", INVALID_INDEX, f"index must be a dict, got {type(index).__name__}")
    fields = index.get("fields")
    if fields is not None:
        if not isinstance(fields, (list, tuple)):
            msg = f"index fields must be a list of field paths, got {type(fields).__name__}"
            _refuse("index", INVALID_INDEX, msg)
        for path in fields:
            if not isinstance(path, str):
                msg = f"index fields must be field paths (strings), got {type(path).__name__}"
                _refuse("index", INVALID_INDEX, msg)
            if not path.strip():
                _refuse("index", INVALID_INDEX, "index fields hold an empty path", typed=False)
    dims = index.get("dims")
    if dims is not None and (not isinstance(dims, int) or isinstance(dims, bool) or dims < 1):
        msg = f"index dims must be a positive integer, got {dims!r:.40}"
        _refuse("index", INVALID_INDEX, msg, typed=not isinstance(dims, int))
    embed: Any = index.get("embed")
    if embed is not None and not (
        isinstance(embed, str) or callable(embed) or _is_embeddings(embed)
    ):
        kind = type(embed).__name__
        msg = f"index embed must be Embeddings, a function or a provider string, got {kind}"
        _refuse("index", INVALID_INDEX, msg)


def _is_embeddings(embed: object) -> bool:
    """Whether ``embed`` has LangChain ``Embeddings``' two methods."""
    return callable(getattr(embed, "embed_documents", None)) and callable(
        getattr(embed, "embed_query", None)
    )


def check_ttl(ttl: object) -> None:
    """Check ``ttl`` (LangGraph's ``TTLConfig``: None, or a mapping whose ``default_ttl``
    is None or minutes as :func:`~memory_ledger.replay.langgraph_store.records.checked_ttl`
    takes them, ``sweep_interval_minutes`` None or a positive number of minutes,
    ``refresh_on_read`` and ``omit_expired`` booleans).

    :raises InvalidArgumentTypeError: a setting of the wrong type (``invalid_ttl_config``,
        ``parameter`` ``ttl``).
    :raises InvalidArgumentError: a number out of range (``invalid_ttl_config``).
    """
    if ttl is None:
        return
    if not isinstance(ttl, Mapping):
        _refuse("ttl", INVALID_TTL, f"ttl must be a dict (TTLConfig), got {type(ttl).__name__}")
    try:
        checked_ttl(ttl.get("default_ttl"))
    except InvalidArgumentError as e:
        raise type(e)(f"ttl default_ttl: {e}", parameter="ttl", reason_code=INVALID_TTL) from None
    every = ttl.get("sweep_interval_minutes")
    if every is not None:
        if isinstance(every, bool) or not isinstance(every, (int, float)):
            msg = f"ttl sweep_interval_minutes must be a number, got {type(every).__name__}"
            _refuse("ttl", INVALID_TTL, msg)
        elif not (math.isfinite(every) and every > 0):
            msg = f"ttl sweep_interval_minutes must be above 0, got {every!r}"
            _refuse("ttl", INVALID_TTL, msg, typed=False)
    for flag in ("refresh_on_read", "omit_expired"):
        if flag in ttl and not isinstance(ttl[flag], bool):
            msg = f"ttl {flag} must be True or False, got {type(ttl[flag]).__name__}"
            _refuse("ttl", INVALID_TTL, msg)
