"""Where a store's bytes live, and reading all of them: a folder's files, or a dump of a
PostgreSQL database.

The ``delete`` property greps these bytes for a value it deleted. A folder is read file by
file (every file under it, whatever its format: LMDB, SQLite and its ``-wal``, DuckDB, JSON).
A database is read through ``pg_dump`` (a logical dump: live rows only; dead tuples a
``VACUUM`` has not yet reclaimed are on disk but not in a dump, so a PostgreSQL result says
what a dump, a backup or a replica would carry, not what the cluster's files hold).
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["StoreBytes", "find_in_bytes"]


@dataclass(frozen=True)
class StoreBytes:
    """The store's bytes: a ``folder``, or a PostgreSQL ``dsn`` (a ``postgresql://`` URL)."""

    folder: Path | None = None
    dsn: str | None = None

    @property
    def known(self) -> bool:
        """Whether the kit was told where the bytes are."""
        return self.folder is not None or self.dsn is not None

    def describe(self) -> str:
        """The place, for messages (a DSN's password, if any, is not shown)."""
        if self.folder is not None:
            return f"folder {self.folder}"
        if self.dsn is not None:
            head, at, tail = self.dsn.rpartition("@")
            return f"database {tail if at else self.dsn}"
        return "nowhere"


def find_in_bytes(place: StoreBytes, needles: list[bytes]) -> list[str]:
    """Where any of ``needles`` occurs in the store's bytes: ``"path: needle"`` lines for a
    folder, ``"dump: needle"`` for a database; empty when none does.

    :raises RuntimeError: the database cannot be dumped (no ``pg_dump``, or it failed; the
        message holds its first error line, never the DSN).
    """
    hits: list[str] = []
    if place.folder is not None:
        for path in sorted(p for p in place.folder.rglob("*") if p.is_file()):
            try:
                data = path.read_bytes()
            except OSError:
                continue  # a socket or a file removed while we walk
            hits += [f"{path}: {n.decode(errors='replace')}" for n in needles if n in data]
    if place.dsn is not None:
        data = _dump(place.dsn)
        hits += [f"dump: {n.decode(errors='replace')}" for n in needles if n in data]
    return hits


def _dump(dsn: str) -> bytes:
    pg_dump = shutil.which("pg_dump")
    if pg_dump is None:
        msg = "pg_dump is not on PATH: the database's bytes cannot be read"
        raise RuntimeError(msg)
    done = subprocess.run(
        [pg_dump, "--data-only", "--no-owner", f"--dbname={dsn}"],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        first = (done.stderr.decode(errors="replace").strip().splitlines() or ["?"])[0]
        msg = f"pg_dump failed ({done.returncode}): {first.split('@')[-1]}"
        raise RuntimeError(msg)
    return done.stdout
