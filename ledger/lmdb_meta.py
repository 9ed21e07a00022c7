"""LMDB's two meta pages, read from ``data.mdb`` as bytes (before LMDB maps the file).

An LMDB file starts with two meta pages; each names the environment's last used page
(``mm_last_pg``) and the transaction that wrote it (``mm_txnid``); LMDB opens the file by the
newer of the two. Reading a page past the end of the file through LMDB's memory map kills the
process with ``SIGBUS``, which no Python code can catch, so a file cut short (a full disk
during a copy, a partial restore) must be refused before LMDB maps it:
:func:`check_data_length` does, for every open of an LMDB ledger
(:class:`~memory_ledger.ledger.lmdb.LMDBDatastore`, and the walk of ``verify``).

Layout read here (64-bit LMDB, little-endian): a 16-byte page header (page flags at 10,
``P_META`` = 0x08), then ``mm_magic`` (``0xBEEFC0DE``) at 16, ``mm_version`` at 20, the map
address and size, the free and main databases' records (48 bytes each: the free database's
``md_pad`` at 40 holds the page size), ``mm_last_pg`` at 136 and ``mm_txnid`` at 144. The
second meta page starts one page in (at the page size the first names).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from memory_ledger.ledger.errors import LedgerDamagedError

__all__ = ["LMDB_MAGIC", "MetaPage", "check_data_length", "has_lmdb_magic", "read_meta"]

LMDB_MAGIC = 0xBEEFC0DE
"""LMDB's magic number (``mm_magic``), 16 bytes into each meta page."""

_MAGIC_AT = 16
_PAGE_SIZE_AT = 40
"""``mm_dbs[FREE_DBI].md_pad``: LMDB stores the environment's page size there."""
_LAST_PAGE_AT = 136
_TXNID_AT = 144
_META_END = _TXNID_AT + 8
_DEFAULT_PAGE = 4096
_MIN_PAGE, _MAX_PAGE = 256, 1 << 16
"""Page sizes LMDB accepts (``MIN_PAGESIZE``, ``MAX_PAGESIZE``): a meta page naming another
page size is not a meta page LMDB would open by."""

_DATA_FILE = "data.mdb"


@dataclass(frozen=True)
class MetaPage:
    """One LMDB meta page: ``page_size`` in bytes, ``last_page`` (the last used page
    number, 0-based) and ``txnid`` (the transaction that wrote it)."""

    page_size: int
    last_page: int
    txnid: int

    @property
    def needed_bytes(self) -> int:
        """The least length in bytes of a file holding every page this meta page uses."""
        return (self.last_page + 1) * self.page_size


def _meta_at(head: bytes, at: int) -> MetaPage | None:
    """The meta page at byte ``at`` of ``head``, None when ``head`` is too short there or the
    page lacks LMDB's magic or names a page size LMDB does not use."""
    if len(head) < at + _META_END:
        return None
    if struct.unpack_from("<I", head, at + _MAGIC_AT)[0] != LMDB_MAGIC:
        return None
    page_size = struct.unpack_from("<I", head, at + _PAGE_SIZE_AT)[0]
    if not _MIN_PAGE <= page_size <= _MAX_PAGE or page_size & (page_size - 1):
        return None
    last_page, txnid = struct.unpack_from("<QQ", head, at + _LAST_PAGE_AT)
    return MetaPage(page_size=int(page_size), last_page=int(last_page), txnid=int(txnid))


def _read_metas(data: Path) -> list[MetaPage]:
    """The meta pages of ``data`` that carry LMDB's magic (none when it cannot be read)."""
    try:
        with data.open("rb") as f:
            head = f.read(_MAX_PAGE + _META_END)
    except OSError:
        return []
    first = _meta_at(head, 0)
    second_at = first.page_size if first is not None else _DEFAULT_PAGE
    return [meta for meta in (first, _meta_at(head, second_at)) if meta is not None]


def read_meta(data: str | os.PathLike[str]) -> MetaPage | None:
    """The meta page LMDB opens the file ``data`` by: of the two that carry LMDB's magic, the
    one with the higher transaction id. None when the file cannot be read or neither meta
    page carries the magic (LMDB then refuses the file itself: not an LMDB file)."""
    metas = _read_metas(Path(data))
    return max(metas, key=lambda meta: meta.txnid) if metas else None


def has_lmdb_magic(data: str | os.PathLike[str]) -> bool:
    """Whether one of the two meta pages of the file ``data`` still carries LMDB's magic."""
    return bool(_read_metas(Path(data)))


def check_data_length(folder: str | os.PathLike[str]) -> None:
    """Refuse the LMDB environment in ``folder`` when its ``data.mdb`` is shorter than its
    meta page's last used page needs: LMDB would map pages past the end of the file, and the
    first read of one kills the process (``SIGBUS``). Call it before LMDB opens the folder.

    The meta page is read before the file's length: a writer writes a transaction's pages
    before the meta page naming them, so a store written meanwhile is never refused. Nothing
    is checked when ``data.mdb`` is absent, unreadable or carries no LMDB magic (LMDB reports
    those itself, translated).

    :raises LedgerDamagedError: ``reason_code`` ``"ledger_truncated"``; a one-line message
        naming the file, its length and the bytes missing.
    """
    data = Path(folder) / _DATA_FILE
    meta = read_meta(data)
    if meta is None:
        return
    try:
        size = data.stat().st_size
    except OSError:
        return
    needed = meta.needed_bytes
    if size >= needed:
        return
    msg = (
        f"the ledger file {str(data)!r} is damaged: it is cut short ({size} bytes, but its "
        f"meta pages name {meta.last_page + 1} pages of {meta.page_size} bytes, {needed} "
        f"bytes: {needed - size} bytes missing); restore it from a backup"
    )
    raise LedgerDamagedError(msg, path=str(folder), reason_code="ledger_truncated")
