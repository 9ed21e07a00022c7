"""``verify`` answers damage of the LMDB file below the records with exit 1, never a crash
(issue 34 item 3, the newcomer's follow-up): a branch page whose header LMDB asserts on
(``Assertion 'IS_LEAF(mp)' failed``: SIGABRT before the fix), a log key that is not a
position (``struct.error`` before), a meta page LMDB refuses (misread as a foreign store
before). Each CLI case runs ``verify`` in a subprocess, so a C abort fails the test instead
of killing pytest.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest

import memory_ledger
from memory_ledger.replay import verify_path

_PAGE = 4096
_BRANCH = 0x01


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("damaged") / "store"
    with memory_ledger.open(folder) as engine:  # 200 records: branch pages in both trees
        for n in range(100):
            engine.remember(
                memory_ledger.Namespace("t", "u", "s"), f"Fact number {n} about the garden."
            )
    return folder


def _copy(store: Path, to: Path, offset: int, mask: int) -> Path:
    target = to / f"flip-{offset}-{mask}"
    shutil.copytree(store, target)
    data = target / "ledger" / "data.mdb"
    body = bytearray(data.read_bytes())
    body[offset] ^= mask
    data.write_bytes(bytes(body))
    return target


def _verify_cli(folder: Path) -> subprocess.CompletedProcess[str]:
    root = str(Path(memory_ledger.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": root, "NO_COLOR": "1", "COLUMNS": "400"}
    return subprocess.run(
        [sys.executable, "-m", "memory_ledger.replay", "verify", "--store", str(folder)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )


def test_damaged_log_root_page_is_reported_not_a_crash(store: Path, tmp_path: Path) -> None:
    data = (store / "ledger" / "data.mdb").read_bytes()
    root = _database_roots(data)["log"]
    assert struct.unpack_from("<H", data, root * _PAGE + 10)[0] & _BRANCH  # a branch page
    # Its header's lower bound (byte 12): LMDB reads its entries wrong and asserts
    # ("Assertion 'IS_LEAF(mp)' failed": SIGABRT, exit 134, before the fix).
    result = _verify_cli(_copy(store, tmp_path, root * _PAGE + 12, 4))
    assert result.returncode == 1, (result.returncode, result.stderr[-500:])
    assert "damaged" in result.stderr, result.stderr
    assert "data.mdb" in result.stderr
    assert "Traceback" not in result.stderr


def test_damaged_meta_page_is_damage_not_a_foreign_store(store: Path, tmp_path: Path) -> None:
    result = _verify_cli(_copy(store, tmp_path, 16, 1))  # meta page 0's magic number
    assert result.returncode == 1, result.stderr
    assert "damaged" in result.stderr
    assert "data.mdb" in result.stderr


def test_log_key_that_is_not_a_position_is_named(store: Path, tmp_path: Path) -> None:
    folder = tmp_path / "store"
    shutil.copytree(store, folder)
    env = lmdb.open(str(folder / "ledger"), max_dbs=16)
    try:
        log = env.open_db(b"log", create=False)
        with env.begin(write=True) as txn:
            txn.put(b"abc", b"x", db=log)  # sorts after every 8-byte big-endian position
    finally:
        env.close()
    report = verify_path(folder)
    assert not report.ok
    assert report.first_bad_position == report.checked + 1
    assert "not a position" in (report.problem or "")


def _database_roots(data: bytes) -> dict[str, int]:
    """``{name: root page}`` of the named databases, read from the main database's leaf page
    (LMDB's layout: meta pages 0 and 1, the newer has the larger transaction id)."""
    meta = max((0, _PAGE), key=lambda at: struct.unpack_from("<Q", data, at + 16 + 128)[0])
    main_root = struct.unpack_from("<Q", data, meta + 16 + 24 + 48 + 40)[0]
    page = main_root * _PAGE
    lower = struct.unpack_from("<H", data, page + 12)[0]
    roots = {}
    for i in range((lower - 16) // 2):
        node = page + struct.unpack_from("<H", data, page + 16 + 2 * i)[0]
        ksize = struct.unpack_from("<H", data, node + 6)[0]
        name = data[node + 8 : node + 8 + ksize].decode()
        roots[name] = struct.unpack_from("<Q", data, node + 8 + ksize + 40)[0]
    return roots


def test_damage_outside_the_log_is_named(store: Path, tmp_path: Path) -> None:
    roots = _database_roots((store / "ledger" / "data.mdb").read_bytes())
    assert {"log", "index"} <= set(roots)
    # The stream index's root page: every record is intact, yet the engine cannot open the
    # store (before, verify said ok).
    result = _verify_cli(_copy(store, tmp_path, roots["index"] * _PAGE + 12, 4))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "'index' database" in result.stderr, result.stderr
