"""Dates named in a recall query and the temporal boost of the fusion."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from memory_ledger.commands.recall import HybridFusion
from memory_ledger.commands.recall.fusion import (
    DEFAULT_FUSION,
    LEGACY_FUSION,
    TUNED_TEMPORAL_BOOST,
    FusionError,
    fusion_for,
)
from memory_ledger.commands.recall.temporal import (
    DAYS_AFTER,
    DAYS_BEFORE,
    DateRange,
    occurred_in,
    query_dates,
)


def day(y: int, m: int, d: int) -> DateRange:
    return DateRange(date(y, m, d), date(y, m, d))


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What did Gina find for her store on 1 February, 2023?", (day(2023, 2, 1),)),
        ("What did she do on the 3rd of May 2023?", (day(2023, 5, 3),)),
        ("Who did Maria have dinner with on May 3, 2023?", (day(2023, 5, 3),)),
        ("What happened on Sept. 9th, 2022?", (day(2022, 9, 9),)),
        ("What painting did she show on october 13 2023?", (day(2023, 10, 13),)),
        (
            "What is John doing as a volunteer in August 2023?",
            (DateRange(date(2023, 8, 1), date(2023, 8, 31)),),
        ),
        ("In Feb, 2024 what changed?", (DateRange(date(2024, 2, 1), date(2024, 2, 29)),)),
        ("How many times has Melanie gone to the beach in 2023?", ()),  # a bare year
        ("What did she do last week?", ()),  # relative: no anchor in the query
        ("Where does Maya work?", ()),
        ("What happened on 31 February, 2023?", ()),  # no such day, and not read as a month
        ("May I ask what Bob likes?", ()),  # "May" without a year is not a date
    ],
)
def test_query_dates_reads_explicit_days_and_months(
    query: str, expected: tuple[DateRange, ...]
) -> None:
    assert query_dates(query) == expected


def test_query_dates_keeps_each_date_once_days_before_months() -> None:
    found = query_dates("Between 2 March 2023, March 2, 2023 and December 2023?")
    assert found == (day(2023, 3, 2), DateRange(date(2023, 12, 1), date(2023, 12, 31)))


def test_occurred_in_widens_each_range_by_the_days_before_and_after() -> None:
    ranges = (day(2023, 2, 1),)

    def at(y: int, m: int, d: int) -> datetime:
        return datetime(y, m, d, 13, 56, tzinfo=UTC)

    assert occurred_in(at(2023, 2, 1), ranges)
    assert DAYS_BEFORE == 1 and DAYS_AFTER == 7
    assert occurred_in(at(2023, 1, 31), ranges)  # told a day before
    assert not occurred_in(at(2023, 1, 30), ranges)
    assert occurred_in(at(2023, 2, 8), ranges)  # told within the week after
    assert not occurred_in(at(2023, 2, 9), ranges)
    assert not occurred_in(None, ranges)
    assert not occurred_in(at(2023, 2, 1), ())


def test_boost_dated_lifts_dated_memories_and_breaks_ties_by_position() -> None:
    fusion = HybridFusion(alpha=0.5, temporal_boost=0.3)
    fused = [("a", 0.9), ("b", 0.7), ("c", 0.5), ("d", 0.6)]
    positions = {"a": 1, "b": 2, "c": 3, "d": 4}
    lifted = fusion.boost_dated(fused, {"c", "d"}.__contains__, positions.__getitem__)
    assert [d for d, _ in lifted] == ["a", "d", "c", "b"]
    assert [s for _, s in lifted] == pytest.approx([0.9, 0.9, 0.8, 0.7])
    # a: 0.9 and d: 0.9 tie; "a" has the lower position
    off = HybridFusion(alpha=0.5)
    assert off.boost_dated(fused, {"c"}.__contains__, positions.__getitem__) == fused


@pytest.mark.parametrize("boost", [-0.1, 1.5, float("nan"), True, "0.3"])
def test_a_temporal_boost_outside_the_unit_interval_is_refused(boost: object) -> None:
    with pytest.raises(FusionError) as caught:
        HybridFusion(temporal_boost=boost)  # type: ignore[arg-type]
    assert caught.value.parameter == "temporal_boost"


def test_the_default_boosts_dates_and_the_legacy_fusion_does_not() -> None:
    assert DEFAULT_FUSION.temporal_boost > 0
    assert LEGACY_FUSION.temporal_boost == 0

    class Descriptor:
        model_id = "all-MiniLM-L6-v2@abc"

    assert fusion_for(Descriptor()).temporal_boost == TUNED_TEMPORAL_BOOST["all-MiniLM-L6-v2"]
