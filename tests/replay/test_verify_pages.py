"""A whole page of the LMDB ledger file overwritten (4096 bytes of 0xff, as a disk or a bad
copy leaves it): ``memory-ledger verify`` reports the damage (exit 1, ``damaged`` with the
reason named) or finds nothing wrong (a free or unused page: exit 0), never exits 2 with an
internal error. LMDB marks a read transaction failed after such a page, and the next read of
it raises ``MDB_BAD_TXN``: damage (``ledger_page_unreadable``), not an internal error.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import lmdb
import pytest
from typer.testing import CliRunner

from benchmarks.verify_flips import build_plain
from memory_ledger.ledger.errors import LedgerDamagedError, LedgerInternalError
from memory_ledger.ledger.lmdb_errors import PAGE_UNREADABLE, translate_lmdb_error
from memory_ledger.replay.cli.app import app

PAGE = 4096


def test_a_failed_read_transaction_is_damage_and_a_failed_write_is_internal() -> None:
    error = lmdb.BadTxnError("mdb_cursor_get", "MDB_BAD_TXN: Transaction must abort")
    read = translate_lmdb_error(error, "/store/ledger", "read", read_only=True)
    assert isinstance(read, LedgerDamagedError)
    assert read.reason_code == PAGE_UNREADABLE == "ledger_page_unreadable"
    assert "damaged page" in str(read) and "/store/ledger" in str(read)
    written = translate_lmdb_error(error, "/store/ledger", "write")
    assert isinstance(written, LedgerInternalError) and written.reason_code == "ledger_internal"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_plain(tmp_path_factory.mktemp("pages")).store


def test_every_page_overwritten_with_ff_is_reported_never_an_error(
    store: Path, tmp_path: Path
) -> None:
    data = (store / "ledger" / "data.mdb").read_bytes()
    outcomes: dict[int, str] = {}
    for page in range(len(data) // PAGE):
        copy = tmp_path / f"page-{page}"
        shutil.copytree(store, copy)
        with (copy / "ledger" / "data.mdb").open("r+b") as f:
            f.seek(page * PAGE)
            f.write(b"\xff" * PAGE)
        result = CliRunner().invoke(app, ["verify", "--store", str(copy), "--json"])
        assert result.exit_code in (0, 1), (page, result.output)
        assert "Traceback" not in result.output and "LedgerInternalError" not in result.output
        report = json.loads(result.stdout)
        if result.exit_code == 1:
            assert report["damaged"] and report["problem"], (page, report)
            outcomes[page] = report["problem"]
        else:
            assert report["ok"] and not report["damaged"]
        shutil.rmtree(copy)
    assert 0 in outcomes and 1 in outcomes  # both meta pages: LMDB refuses them
    assert len(outcomes) > 2  # pages of the B-trees too
    assert any(PAGE_UNREADABLE in problem for problem in outcomes.values()), outcomes


@pytest.mark.parametrize(
    ("last_page", "txnid"),
    [(0x00FFFFFFFFFFFF00, 0x0000FFFFFFFFFFFF), (1 << 40, 1 << 40)],
)
def test_a_meta_page_claiming_pages_past_the_file_is_damage_not_unavailable(
    store: Path, tmp_path: Path, last_page: int, txnid: int
) -> None:
    """The meta page LMDB opens by (the higher transaction id) claims a last page far past
    the file's end: LMDB fails to map it ("Cannot allocate memory"), which is a damaged
    ledger file (exit 1), not a store that cannot be opened (exit 2)."""
    from memory_ledger.replay.audit.verify_walk import _meta_damaged

    copy = tmp_path / "meta"
    shutil.copytree(store, copy)
    data = copy / "ledger" / "data.mdb"
    assert not _meta_damaged(data)  # a healthy file's meta pages are plausible
    with data.open("r+b") as f:
        f.seek(136)
        f.write(last_page.to_bytes(8, "little") + txnid.to_bytes(8, "little"))
    assert _meta_damaged(data)
    result = CliRunner().invoke(app, ["verify", "--store", str(copy), "--json"])
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["damaged"] and "meta pages" in report["problem"]
