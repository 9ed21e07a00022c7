"""Chunking strategies: typed objects, UTF-8-safe ranges that cover the bytes and progress."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_ledger.commands.workspace import ByteWindows, LineWindows, RecursiveSeparators
from memory_ledger.commands.workspace.chunking import (
    ChunkingStrategy,
    check_strategy,
    line_number,
    split_ranges,
    strategy_key,
)

TEXT = st.text(
    alphabet=st.one_of(
        st.sampled_from("ab \n\n\t.;"),
        st.characters(min_codepoint=0x80, max_codepoint=0x7FF),  # 2-byte
        st.characters(min_codepoint=0x800, max_codepoint=0xFFFF, exclude_categories=("Cs",)),
        st.characters(min_codepoint=0x10000, max_codepoint=0x10FFFF),  # 4-byte
    ),
    max_size=400,
)

STRATEGIES: st.SearchStrategy[ChunkingStrategy] = st.one_of(
    st.builds(LineWindows, lines=st.integers(1, 6), max_bytes=st.integers(1, 64)),
    st.builds(ByteWindows, size=st.integers(1, 64)),
    st.builds(
        RecursiveSeparators,
        max_bytes=st.integers(1, 64),
        separators=st.lists(st.sampled_from(["\n\n", "\n", " ", ".", "é", "😀"]), max_size=3).map(
            tuple
        ),
    ),
)


def limit_of(strategy: ChunkingStrategy) -> int:
    if isinstance(strategy, LineWindows):
        return strategy.max_bytes
    if isinstance(strategy, ByteWindows):
        return strategy.size
    return strategy.max_bytes


@settings(max_examples=400)
@given(text=TEXT, strategy=STRATEGIES)
def test_ranges_cover_the_bytes_on_character_boundaries_and_progress(
    text: str, strategy: ChunkingStrategy
) -> None:
    data = text.encode("utf-8")
    ranges = split_ranges(strategy, data)
    at = 0
    for start, end in ranges:
        assert start == at  # contiguous: no gap, no overlap
        assert end > start  # every step makes progress
        piece = data[start:end].decode("utf-8")  # never splits a character
        assert end - start <= limit_of(strategy) or len(piece) == 1
        at = end
    assert at == len(data)  # the last range ends at the end: every byte covered
    assert b"".join(data[s:e] for s, e in ranges) == data


def test_line_windows_take_whole_lines() -> None:
    data = b"".join(f"line {i}\n".encode() for i in range(1, 11))
    ranges = split_ranges(LineWindows(lines=4), data)
    assert [line_number(data, s) for s, _ in ranges] == [1, 5, 9]
    assert data[ranges[0][0] : ranges[0][1]] == b"line 1\nline 2\nline 3\nline 4\n"


def test_byte_windows_cut_before_a_multibyte_character() -> None:
    data = "aé😀".encode()  # 1 + 2 + 4 bytes
    assert split_ranges(ByteWindows(size=2), data) == [(0, 1), (1, 3), (3, 7)]


def test_recursive_separators_prefer_paragraphs_then_lines() -> None:
    text = "alpha beta\ngamma\n\n" + "delta epsilon\n" * 3
    data = text.encode()
    ranges = split_ranges(RecursiveSeparators(max_bytes=30), data)
    pieces = [data[s:e].decode() for s, e in ranges]
    assert pieces[0] == "alpha beta\ngamma\n\n"
    assert all(len(p.encode()) <= 30 for p in pieces)


def test_an_empty_file_has_no_chunks() -> None:
    assert split_ranges(LineWindows(), b"") == []


@pytest.mark.parametrize("name", ["lines", "bytes", "recursive", None, 40])
def test_primitive_strategy_names_are_refused(name: object) -> None:
    with pytest.raises(TypeError, match="LineWindows, ByteWindows or RecursiveSeparators"):
        check_strategy(name)
    with pytest.raises(TypeError):
        split_ranges(name, b"text")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "build",
    [
        lambda: LineWindows(lines=0),
        lambda: LineWindows(max_bytes=-1),
        lambda: ByteWindows(size=0),
        lambda: RecursiveSeparators(max_bytes=0),
        lambda: RecursiveSeparators(separators=("",)),
        lambda: ByteWindows(size=True),
    ],
)
def test_bad_limits_are_refused(build: object) -> None:
    with pytest.raises(ValueError):
        build()  # type: ignore[operator]


def test_strategy_keys_name_the_parameters() -> None:
    assert strategy_key(LineWindows(lines=10, max_bytes=100)) == "lines/10/100"
    assert strategy_key(ByteWindows(size=5)) == "bytes/5"
    assert strategy_key(RecursiveSeparators()) != strategy_key(RecursiveSeparators(max_bytes=9))
