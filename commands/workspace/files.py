"""Reading workspace files without ever leaving the root the host named.

A :class:`WorkspaceRoot` holds an open descriptor of the root folder. Every read walks the
relative path one component at a time from that descriptor with ``O_NOFOLLOW`` (folders
with ``O_DIRECTORY`` too), so a symbolic link anywhere on the path, a ``..`` component or
an absolute path is refused, and a folder renamed or replaced by a link after the scan
cannot redirect a read outside the root. A file that grew over the size limit since the
scan is refused as well.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import threading
from pathlib import Path

from memory_ledger.ledger.errors import MemoryLedgerError

__all__ = ["OutsideRootError", "WorkspaceFileError", "WorkspaceRoot", "file_digest"]

_DIR_FLAGS = (
    os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)
_FILE_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


class WorkspaceFileError(MemoryLedgerError, OSError):
    """A workspace file cannot be read: the root is closed, the path is not a regular file
    or it is over the size limit (``errno`` ``EFBIG``)."""

    reason_code = "workspace_file_unreadable"


class OutsideRootError(WorkspaceFileError):
    """A relative path names nothing readable under the root: an absolute path, a ``..``
    or empty component, or a symbolic link on the way."""

    reason_code = "outside_workspace_root"


def file_digest(data: bytes) -> str:
    """The SHA-256 hex digest of a file's full content (what every chunk records)."""
    return hashlib.sha256(data).hexdigest()


class WorkspaceRoot:
    """An open root folder; reads relative paths under it (thread-safe).

    :param path: the folder; resolved once (a link *to* the root is followed here, never a
        link inside it).
    :raises OSError: ``path`` is not an openable folder.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(os.path.realpath(path))
        self._fd: int | None = os.open(self.path, _DIR_FLAGS)
        self._lock = threading.Lock()

    def read(self, relative: str, max_bytes: int) -> bytes:
        """The bytes of ``relative`` (``/``-separated, under the root).

        :raises OutsideRootError: the path is absolute, has an empty, ``.`` or ``..``
            component, or crosses a symbolic link.
        :raises OSError: the file is missing, unreadable, not a regular file, or larger
            than ``max_bytes`` (``EFBIG``).
        """
        parts = relative.split("/")
        if relative.startswith("/") or any(p in ("", ".", "..") for p in parts):
            msg = f"not a path under the workspace root: {relative!r}"
            raise OutsideRootError(msg)
        with self._lock:
            if self._fd is None:
                msg = "workspace root is closed"
                raise WorkspaceFileError(msg)
            parent = os.dup(self._fd)
        try:
            for part in parts[:-1]:
                try:
                    child = os.open(part, _DIR_FLAGS, dir_fd=parent)
                except OSError as e:
                    if e.errno in (errno.ELOOP, errno.ENOTDIR):
                        raise OutsideRootError(f"not a folder under the root: {part!r}") from e
                    raise
                os.close(parent)
                parent = child
            try:
                fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=parent)
            except OSError as e:
                if e.errno == errno.ELOOP:
                    raise OutsideRootError(f"a symbolic link: {relative!r}") from e
                raise
        finally:
            os.close(parent)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                msg = f"not a regular file: {relative!r}"
                raise WorkspaceFileError(msg)
            if info.st_size > max_bytes:
                raise WorkspaceFileError(errno.EFBIG, f"file over {max_bytes} bytes: {relative!r}")
            chunks = []
            remaining = max_bytes + 1
            while remaining > 0:
                chunk = os.read(fd, min(remaining, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                remaining -= len(chunk)
        finally:
            os.close(fd)
        data = b"".join(chunks)
        if len(data) > max_bytes:
            raise WorkspaceFileError(errno.EFBIG, f"file over {max_bytes} bytes: {relative!r}")
        return data

    def close(self) -> None:
        """Close the root descriptor; later reads raise ``OSError``."""
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
