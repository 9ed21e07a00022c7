"""Recognising a full disk behind a driver's error (LMDB or DuckDB), to name it in one line.

A write that fails for want of space arrives as ``ENOSPC`` ("No space left on device") or
``EDQUOT``, but also, depending on the file system and where the write failed, as ``EIO``
("Input/output error", LMDB's ``DiskError``) or as a DuckDB ``IOException``. An
input/output error counts as a full disk when the file system holding the folder has (almost)
no space left for this user (:data:`LOW_SPACE` bytes), measured when the error is met.
"""

from __future__ import annotations

import errno
import os

__all__ = ["LOW_SPACE", "disk_full_message", "free_bytes", "is_disk_full", "says_no_space"]

LOW_SPACE = 1024 * 1024
"""Bytes available below which an input/output error is taken for a full disk."""

_NO_SPACE = ("no space left", "disk quota", "not enough space", "disk is full")
_IO_ERROR = ("input/output error", "i/o error", "io error", "ioexception", "diskerror")


def free_bytes(folder: str | os.PathLike[str]) -> int | None:
    """Bytes available to this user on the file system of ``folder`` (the nearest existing
    parent), or None when it cannot be measured."""
    path = os.path.abspath(folder)
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    try:
        st = os.statvfs(path)
    except OSError:
        return None
    return st.f_bavail * st.f_frsize


def says_no_space(error: BaseException) -> bool:
    """Whether ``error`` itself says no space is left (``ENOSPC``/``EDQUOT``, by errno or
    message), whatever the space free now."""
    if getattr(error, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = f"{type(error).__name__} {error}".lower()
    return any(fragment in text for fragment in _NO_SPACE)


def is_disk_full(error: BaseException, folder: str | os.PathLike[str]) -> bool:
    """Whether ``error`` (a driver's error met writing under ``folder``) means the disk is
    full: ``ENOSPC``/``EDQUOT`` (by errno or message), or an input/output error while the
    file system has less than :data:`LOW_SPACE` bytes free."""
    if says_no_space(error):
        return True
    code = getattr(error, "errno", None)
    text = f"{type(error).__name__} {error}".lower()
    if code == errno.EIO or any(fragment in text for fragment in _IO_ERROR):
        free = free_bytes(folder)
        return free is not None and free < LOW_SPACE
    return False


def disk_full_message(what: str, folder: str | os.PathLike[str], detail: str) -> str:
    """One line naming the cause and the folder: ``what`` (e.g. ``"the LMDB ledger"``)
    cannot be written in ``folder``; ``detail`` is the driver's first line."""
    free = free_bytes(folder)
    left = f", {free} bytes free" if free is not None else ""
    first = detail.splitlines()[0] if detail else ""
    return (
        f"no space left on device: {what} in {str(folder)!r} cannot be written{left} "
        f"({first}); nothing stored was lost: free space there and retry"
    )
