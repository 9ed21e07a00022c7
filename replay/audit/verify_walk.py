"""The ledger walk of ``memory-ledger verify`` run in a child process, so that damage LMDB
meets with a C assertion (``mdb.c: Assertion 'IS_LEAF(mp)' failed``: a branch or leaf page
whose type flags were changed) kills the child, not the caller.

LMDB checks some of its B-tree invariants with ``assert``, which aborts the process
(``SIGABRT``); no Python code can catch that. :func:`walk_ledger` runs
:func:`~memory_ledger.replay.audit.verify.verify_ledger` in ``python -m
memory_ledger.replay.audit.verify ROOT``; the child streams the last verified position while
it walks and ends with its report (or the typed error it met, pickled). When the child dies
by a signal, the ledger file is reported damaged below the record level, naming the file and
the positions verified before the child stopped. Only the audit (``verify``) pays for the
child (about the start of one interpreter); the engine's readers read in process.

:func:`open_failure_report`: a ledger file that LMDB refuses as "not an LMDB file" in a folder
that is a memory-ledger store (a ``projections`` or ``keys`` folder beside ``ledger``, or an
LMDB magic number still in one of the two meta pages) is reported damaged, not foreign.
"""

from __future__ import annotations

import base64
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import msgspec

from memory_ledger.commands.errors import StoreUnavailableError
from memory_ledger.ledger.errors import ForeignStoreError, LedgerInternalError
from memory_ledger.ledger.lmdb_meta import has_lmdb_magic, read_meta

__all__ = ["PROGRESS_EVERY", "open_failure_report", "walk_ledger"]

PROGRESS_EVERY = 64
"""The child reports its position after every this many records."""


def walk_ledger(root: Path) -> dict[str, Any]:
    """The fields of the :class:`~memory_ledger.replay.audit.verify.VerifyReport` of the LMDB
    ledger of store folder ``root``, walked without the master key in a child process
    (``python -m memory_ledger.replay.audit.verify ROOT``).

    :returns: the child's report; when the child died by a signal, a report (not ok) naming
        the file, the signal and the positions verified before it stopped.
    :raises MemoryLedgerError: the typed error the child met opening the ledger (e.g.
        ``StoreUnavailableError``, ``ForeignStoreError``), re-raised here.
    :raises LedgerInternalError: the child failed in another way (its last line is named).
    """
    package_parent = str(Path(__file__).absolute().parents[2])  # the folder holding memory_ledger
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    child = subprocess.run(
        [sys.executable, "-m", "memory_ledger.replay.audit.verify", str(root)],
        capture_output=True,
        env=env,
        check=False,
    )
    last, database = 0, ""
    for line in child.stdout.decode("ascii", "replace").splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "P":
            last = int(rest)
        elif kind == "D":
            database = rest
        elif kind == "R" and child.returncode == 0:
            return cast(dict[str, Any], msgspec.json.decode(rest))
        elif kind == "E" and child.returncode == 0:
            error = pickle.loads(base64.b64decode(rest))  # noqa: S301 (our own child's bytes)
            raise error
    if child.returncode < 0:
        name = signal.Signals(-child.returncode).name
        verified = f"positions 1..{last} verified" if last else "no position verified"
        where = f"{database!r} database" if database else "B-tree"
        return dict(
            ok=False,
            checked=last,
            head=last,
            first_bad_position=None if database else last + 1,
            problem=(
                f"the ledger file {str(root / 'ledger' / 'data.mdb')!r} is damaged: LMDB's "
                f"{where} is damaged below the record level (the reader stopped on {name} "
                f"after {verified})"
            ),
            opened=False,
            damaged=True,
        )
    tail = child.stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
    msg = f"the ledger walk of `verify` failed (exit {child.returncode}): {tail[0]}"
    raise LedgerInternalError(msg, path=str(root))


def open_failure_report(
    root: Path, error: ForeignStoreError | StoreUnavailableError
) -> dict[str, Any] | None:
    """A damage report (not ok) when ``error``, met opening the ledger of store folder
    ``root``, is a damaged ledger file of a memory-ledger store: LMDB refused it as not an
    LMDB file (``not_lmdb``), or could not open it (``ledger_unavailable``: e.g. "Cannot
    allocate memory" when the meta page it reads claims a last page far past the file's end)
    and that meta page is indeed implausible (:func:`_meta_damaged`). None when the folder is
    not recognisably such a file (the error stands: a missing or locked store is not damage).
    """
    data = root / "ledger" / "data.mdb"
    if error.reason_code == "ledger_unavailable":
        if not _meta_damaged(data):
            return None
    elif error.reason_code != "not_lmdb":
        return None
    engine_made = (root / "projections").is_dir() or (root / "keys").is_dir()
    if not (engine_made or has_lmdb_magic(data)):
        return None
    return dict(
        ok=False,
        checked=0,
        head=0,
        first_bad_position=None,
        problem=(
            f"the ledger file {str(data)!r} is damaged: LMDB refuses its meta pages ({error}); "
            "restore it from a backup"
        ),
        opened=False,
        damaged=True,
    )


def _meta_damaged(data: Path) -> bool:
    """Whether the meta page LMDB opens ``data`` by (of the two with LMDB's magic, the one
    with the higher transaction id) claims a last page past the end of the file: LMDB then
    maps far more than the file holds and fails to open it. False when the file cannot be
    read or no meta page has the magic (nothing here says the file is a damaged ledger)."""
    meta = read_meta(data)
    try:
        return meta is not None and meta.needed_bytes > data.stat().st_size
    except OSError:
        return False
