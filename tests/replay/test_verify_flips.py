"""Every one-byte change of any ledger record is named by ``verify`` (issue 34 item 3).

A change in a record's stored hash, in its body's msgpack header or in its payload; of a
live record, an erased one, the ``NamespaceErased`` record or the last record; with and
without the master key: ``verify`` answers "not ok" naming the record's position (the CLI:
exit 1), and ``export``, ``as-of`` and ``explain`` answer or raise a typed error naming it.
The long profile is ``python -m benchmarks verify_flips``.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from uuid import UUID

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import memory_ledger
from benchmarks.verify_flips import (
    Flip,
    Ledger,
    audit_problems,
    build_encrypted,
    build_plain,
    flipped_copy,
    part_of,
    verify_problems,
)
from memory_ledger.ledger.errors import LedgerTamperedError
from memory_ledger.ledger.records import HASH_SIZE, decode_body
from memory_ledger.replay import explain


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Ledger]]:
    folder = tmp_path_factory.mktemp("flips")
    yield {"plain": build_plain(folder), "encrypted": build_encrypted(folder)}


@st.composite
def flips(draw: st.DrawFn, ledger: Ledger) -> Flip:
    position = draw(st.sampled_from(sorted(ledger.records)))
    value = ledger.records[position]
    start = len(value) - len(decode_body(value[HASH_SIZE:])[3])
    offset = draw(
        st.one_of(
            st.integers(0, HASH_SIZE - 1),  # the stored hash
            st.integers(HASH_SIZE, start - 1),  # the body's header
            st.integers(start, len(value) - 1),  # the payload
        )
    )
    return Flip(position, offset, draw(st.integers(1, 255)))


@settings(max_examples=40, deadline=None)
@given(data=st.data(), which=st.sampled_from(["plain", "encrypted"]))
def test_verify_names_every_flipped_byte(
    ledgers: dict[str, Ledger], data: st.DataObject, which: str
) -> None:
    ledger = ledgers[which]
    flip = data.draw(flips(ledger))
    with tempfile.TemporaryDirectory() as tmp:
        store = flipped_copy(ledger, flip, Path(tmp))
        assert verify_problems(ledger, flip, store, cli=False) == []


@settings(max_examples=6, deadline=None)
@given(data=st.data(), which=st.sampled_from(["plain", "encrypted"]))
def test_the_cli_exits_1_naming_every_flipped_byte(
    ledgers: dict[str, Ledger], data: st.DataObject, which: str
) -> None:
    ledger = ledgers[which]
    flip = data.draw(flips(ledger))
    with tempfile.TemporaryDirectory() as tmp:
        store = flipped_copy(ledger, flip, Path(tmp))
        assert verify_problems(ledger, flip, store, cli=True) == []


def _header_flip(ledger: Ledger, kind: str) -> Flip:
    """A change of the second byte of the body (the id's msgpack header) of the first record
    of ``kind`` (``last``: the head)."""
    if kind == "last":
        position = max(ledger.records)
    else:
        position = min(p for p, k in ledger.kinds.items() if k == kind)
    flip = Flip(position, HASH_SIZE + 1, 0x01)
    assert part_of(ledger.records[position], flip.offset) == "header"
    return flip


@pytest.mark.parametrize(
    ("which", "kind"),
    [
        ("plain", "live"),
        ("plain", "last"),
        ("encrypted", "live"),
        ("encrypted", "erased"),
        ("encrypted", "NamespaceErased"),
        ("encrypted", "last"),
    ],
)
def test_a_damaged_header_is_named_by_verify_and_the_audit_tools(
    ledgers: dict[str, Ledger], tmp_path: Path, which: str, kind: str
) -> None:
    """The issue's case: it made every command fail with an untyped ``LedgerRecordError``
    naming no position (the store's open decoded the first records' topics)."""
    ledger = ledgers[which]
    flip = _header_flip(ledger, kind)
    store = flipped_copy(ledger, flip, tmp_path)
    assert verify_problems(ledger, flip, store, cli=True) == []
    assert audit_problems(ledger, flip, store) == []


@pytest.mark.parametrize("target", ["payload", "previous hash"])
def test_explain_refuses_a_changed_record_it_reads(
    ledgers: dict[str, Ledger], tmp_path: Path, target: str
) -> None:
    """explain checks the links of the records it shows: a changed payload of the memory's
    first record, or a changed stored hash of the record before it, is named there."""
    ledger = ledgers["plain"]
    first = min(
        position
        for position, value in ledger.records.items()
        if decode_body(value[HASH_SIZE:])[0] == UUID(ledger.memory_id)
    )
    value = ledger.records[first]
    flip = Flip(first, len(value) - 3, 0x01) if target == "payload" else Flip(first - 1, 5, 0x01)
    store = flipped_copy(ledger, flip, tmp_path)
    with memory_ledger.open(store, create=False) as engine:
        with pytest.raises(LedgerTamperedError) as raised:
            explain(engine, ledger.memory_id)
    assert raised.value.position == flip.position
    assert raised.value.reason_code == "ledger_tampered"
    assert f"record {flip.position} " in str(raised.value)
