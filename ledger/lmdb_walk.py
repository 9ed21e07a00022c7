"""Read every page of an LMDB ledger file, database by database (what ``verify`` does after
the log's hash chain: damage in the stream index, the tag index or the identity records
stops the engine from opening the store, though every record is intact).

:func:`walk_databases` reads every key and value of the main database and of every named
database it lists, in one read-only transaction each. LMDB refuses some damaged pages with an
error (raised here typed) and asserts on others (the process aborts: run this in a child,
as ``memory_ledger.replay.audit.verify_walk`` does).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import lmdb

from memory_ledger.ledger.lmdb_errors import translate_lmdb_error
from memory_ledger.ledger.lmdb_meta import check_data_length

__all__ = ["walk_databases"]

_MAX_DBS = 1024
"""Named databases the walk can open (a ledger has a handful)."""


def walk_databases(folder: str | Path, visit: Callable[[str], None]) -> int:
    """Read every entry of every database of the LMDB environment in ``folder`` (the
    ``ledger`` folder of a store), read-only; call ``visit(name)`` before each database
    (``"main"`` first). Returns how many databases were read.

    :raises LedgerDamagedError: the file is shorter than its meta page needs
        (``ledger_truncated``), or LMDB refused a page (``MDB_CORRUPTED``, ``MDB_PAGE_NOTFOUND``);
        the message names the path, and the last ``visit`` the database.
    :raises LedgerError: another typed LMDB error (see ``lmdb_errors``).
    """
    path = str(folder)
    check_data_length(path)  # a cut-short file: LMDB's first read past its end is SIGBUS
    lock = os.access(Path(path) / "lock.mdb", os.W_OK) and os.access(path, os.W_OK)
    try:
        env = lmdb.open(path, readonly=True, lock=lock, max_dbs=_MAX_DBS, create=False)
    except lmdb.Error as e:
        raise translate_lmdb_error(e, path, "open") from e
    try:
        visit("main")
        with env.begin(buffers=False) as txn:
            names = [bytes(key) for key, _ in txn.cursor()]
        read = 1
        for name in names:
            try:
                db = env.open_db(name, create=False)
            except lmdb.IncompatibleError:
                continue  # a plain key of the main database, not a database's name
            visit(name.decode("utf-8", "replace"))
            with env.begin(db=db, buffers=True) as txn:
                for _entry in txn.cursor():
                    pass
            read += 1
        return read
    except lmdb.Error as e:
        raise translate_lmdb_error(e, path, "read", read_only=True) from e
    finally:
        env.close()
