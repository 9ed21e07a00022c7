"""Tests for replay.scripts.locomo, the LoCoMo -> session script converter.

The data is never copied into the repository: it is read from ``$LOCOMO_PATH`` or
``../shared/data/locomo/locomo7.json`` beside the checkout (``tests/conftest.py``); tests that
need it are skipped, saying so, when it is absent.
Expected figures are counted here from the raw JSON (stdlib ``json``), independently of the
converter.
"""

from __future__ import annotations

import copy
import io
import json
import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from benchmarks.locomo import source as locomo_source
from memory_ledger.replay.cli.app import app
from memory_ledger.replay.scripts.locomo import (
    FACT_REASON,
    ConvertedScript,
    LocomoFileError,
    LocomoFormatError,
    SampleNotFoundError,
    convert_sample,
    encode_jsonl,
    find_sample,
    load_samples,
    parse_session_datetime,
    split_dia_ids,
    write_jsonl,
)
from tests.conftest import locomo_path, skip_without_locomo

ALL_SAMPLE_IDS = ["conv-26", "conv-30", "conv-41", "conv-42", "conv-43", "conv-44", "conv-47"]
ITEM_KEYS = [
    "kind",
    "subject",
    "predicate",
    "value",
    "statement",
    "source",
    "scope",
    "reason",
    "importance",
    "confidence",
    "tags",
    "supersedes",
    "conflicts_with",
    "evidence",
]

needs_data = pytest.mark.skipif(locomo_path() is None, reason=locomo_source.missing())


# --------------------------------------------------------------------------- helpers


def raw_sessions(sample: dict[str, Any]) -> list[tuple[int, list[dict[str, Any]]]]:
    """(N, turns) for every session_N list, numeric order."""
    conv = sample["conversation"]
    found = [(int(m.group(1)), conv[k]) for k in conv if (m := re.fullmatch(r"session_(\d+)", k))]
    return sorted(found, key=lambda pair: pair[0])


def raw_facts(sample: dict[str, Any]) -> list[tuple[str, str, str, tuple[str, ...]]]:
    """(session id, speaker, fact text, dia_ids) for every observation fact in the raw JSON."""
    facts = []
    for key, by_speaker in sample["observation"].items():
        number = int(re.fullmatch(r"session_(\d+)_observation", key).group(1))  # type: ignore[union-attr]
        for speaker, items in by_speaker.items():
            for text, ids in items:
                pieces = [ids] if isinstance(ids, str) else ids
                split = [x for p in pieces for x in re.split(r"[,;\s]+", p) if x]
                facts.append(
                    (
                        f"{sample['sample_id']}/session_{number}",
                        speaker,
                        text,
                        tuple(dict.fromkeys(split)),
                    )
                )
    return facts


def output_items(script: ConvertedScript) -> list[tuple[str, int, dict[str, Any]]]:
    """(session id, turn number, item) for every extracted item of the script."""
    return [
        (step["session"], step["turn"], item)
        for step in script.steps
        if step["op"] == "turn"
        for item in step["extracted"]
    ]


@pytest.fixture(scope="module")
def raw() -> list[dict[str, Any]]:
    with skip_without_locomo().open(encoding="utf-8") as handle:
        data: list[dict[str, Any]] = json.load(handle)
    return data


@pytest.fixture(scope="module")
def conv26_raw(raw: list[dict[str, Any]]) -> dict[str, Any]:
    return next(s for s in raw if s["sample_id"] == "conv-26")


@pytest.fixture(scope="module")
def conv26(conv26_raw: dict[str, Any]) -> ConvertedScript:
    return convert_sample(find_sample(load_samples(skip_without_locomo()), "conv-26"))


# --------------------------------------------------------------------------- conv-26


@needs_data
def test_first_line_is_open_with_conversation_namespace(conv26: ConvertedScript) -> None:
    first = json.loads(encode_jsonl(conv26.steps).splitlines()[0])
    assert first == {
        "op": "open",
        "session": "conv-26/session_1",
        "namespace": {"tenant": "locomo", "principal": "conv-26", "scope_id": "conversation"},
    }
    namespaces = {json.dumps(s["namespace"]) for s in conv26.steps if s["op"] == "open"}
    assert len(namespaces) == 1


@needs_data
def test_session_structure(conv26_raw: dict[str, Any], conv26: ConvertedScript) -> None:
    sessions = raw_sessions(conv26_raw)
    expected_ids = [f"conv-26/session_{n}" for n, _ in sessions]
    # numeric order: session_10 comes after session_9, not after session_1
    assert [n for n, _ in sessions] == list(range(1, 20))
    assert [s["session"] for s in conv26.steps if s["op"] == "open"] == expected_ids
    # each session: open, turns 1..n, finish, contiguous
    at = 0
    for (_, turns), session_id in zip(sessions, expected_ids, strict=True):
        block = conv26.steps[at : at + len(turns) + 2]
        assert block[0] == {"op": "open", "session": session_id, "namespace": block[0]["namespace"]}
        assert block[-1] == {"op": "finish", "session": session_id}
        assert [s["op"] for s in block[1:-1]] == ["turn"] * len(turns)
        assert [s["turn"] for s in block[1:-1]] == list(range(1, len(turns) + 1))
        assert all(s["session"] == session_id for s in block)
        at += len(turns) + 2
    assert at == len(conv26.steps)


@needs_data
def test_turn_count_matches_dialogue(conv26_raw: dict[str, Any], conv26: ConvertedScript) -> None:
    expected = sum(len(turns) for _, turns in raw_sessions(conv26_raw))
    assert sum(1 for s in conv26.steps if s["op"] == "turn") == expected
    assert conv26.stats.turns == expected
    assert conv26.stats.sessions == 19


@needs_data
def test_transcripts(conv26_raw: dict[str, Any], conv26: ConvertedScript) -> None:
    turns = [s for s in conv26.steps if s["op"] == "turn"]
    raw_turns = [t for _, ts in raw_sessions(conv26_raw) for t in ts]
    for step, turn in zip(turns, raw_turns, strict=True):
        expected = f"{turn['speaker']}: {turn['text']}"
        if turn.get("blip_caption"):
            expected += f" [shares a photo: {turn['blip_caption']}]"
        assert step["transcript"] == expected
    assert turns[0]["transcript"] == "Caroline: Hey Mel! Good to see you! How have you been?"
    assert sum("[shares a photo: " in s["transcript"] for s in turns) == sum(
        1 for t in raw_turns if t.get("blip_caption")
    )


@needs_data
def test_item_count_equals_observation_facts(
    conv26_raw: dict[str, Any], conv26: ConvertedScript
) -> None:
    expected = sum(
        len(facts) for obs in conv26_raw["observation"].values() for facts in obs.values()
    )
    assert expected == 184
    assert len(output_items(conv26)) == expected
    assert conv26.stats.facts == expected


@needs_data
def test_item_shape(conv26: ConvertedScript) -> None:
    for _, _, item in output_items(conv26):
        assert list(item) == ITEM_KEYS
        assert item["kind"] == "semantic"
        assert item["subject"] in {"Caroline", "Melanie"}
        assert item["predicate"] is None and item["value"] is None
        assert item["source"] == "fact" and item["scope"] == "user"
        assert item["reason"] == FACT_REASON and "LoCoMo" in item["reason"]
        assert item["importance"] == 0.8 and item["confidence"] == 0.9
        assert item["tags"] == [] and item["conflicts_with"] == []
        assert item["supersedes"] is None
        assert isinstance(item["statement"], str) and item["statement"]


@needs_data
def test_evidence_is_real_or_reported(conv26_raw: dict[str, Any], conv26: ConvertedScript) -> None:
    real_ids = {t["dia_id"] for _, turns in raw_sessions(conv26_raw) for t in turns}
    reported = {(f.session, f.statement) for f in conv26.stats.fallbacks}
    for session_id, _, item in output_items(conv26):
        assert item["evidence"], item
        assert len(item["evidence"]) == len(set(item["evidence"]))
        for dia_id in item["evidence"]:
            assert dia_id in real_ids or (session_id, item["statement"]) in reported


@needs_data
def test_items_attached_to_turn_of_first_dia_id(
    conv26_raw: dict[str, Any], conv26: ConvertedScript
) -> None:
    dia_of = {
        (f"conv-26/session_{n}", i + 1): t["dia_id"]
        for n, turns in raw_sessions(conv26_raw)
        for i, t in enumerate(turns)
    }
    reported = {(f.session, f.statement) for f in conv26.stats.fallbacks}
    for session_id, turn, item in output_items(conv26):
        if (session_id, item["statement"]) not in reported:
            assert dia_of[(session_id, turn)] == item["evidence"][0]


@needs_data
def test_lgbtq_support_group_fact_on_turn_d1_3(
    conv26_raw: dict[str, Any], conv26: ConvertedScript
) -> None:
    session_1 = dict(raw_sessions(conv26_raw))[1]
    turn_of_d1_3 = next(i + 1 for i, t in enumerate(session_1) if t["dia_id"] == "D1:3")
    matches = [
        (session_id, turn, item)
        for session_id, turn, item in output_items(conv26)
        if item["subject"] == "Caroline"
        and "LGBTQ support group" in item["statement"]
        and item["evidence"] == ["D1:3"]
    ]
    assert len(matches) == 1
    session_id, turn, _ = matches[0]
    assert (session_id, turn) == ("conv-26/session_1", turn_of_d1_3)
    step = next(
        s
        for s in conv26.steps
        if s["op"] == "turn" and s["session"] == session_id and s["turn"] == turn
    )
    assert step["transcript"].startswith("Caroline: I went to a LGBTQ support group")


@needs_data
def test_occurred_at(conv26_raw: dict[str, Any], conv26: ConvertedScript) -> None:
    turns = [s for s in conv26.steps if s["op"] == "turn"]
    assert turns[0]["occurred_at"] == "2023-05-08T13:56:00Z"
    by_session: dict[str, set[str]] = {}
    for s in turns:
        by_session.setdefault(s["session"], set()).add(s["occurred_at"])
    assert all(len(v) == 1 for v in by_session.values())
    conv = conv26_raw["conversation"]
    for n, _ in raw_sessions(conv26_raw):
        moment = datetime.strptime(conv[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
        assert by_session[f"conv-26/session_{n}"] == {moment.strftime("%Y-%m-%dT%H:%M:00Z")}


@needs_data
def test_output_is_byte_identical(conv26_raw: dict[str, Any]) -> None:
    first = encode_jsonl(convert_sample(conv26_raw).steps)
    second = encode_jsonl(convert_sample(copy.deepcopy(conv26_raw)).steps)
    third = encode_jsonl(
        convert_sample(find_sample(load_samples(skip_without_locomo()), "conv-26")).steps
    )
    assert first == second == third
    binary = io.BytesIO()
    text = io.StringIO()
    lines = write_jsonl(convert_sample(conv26_raw).steps, binary)
    write_jsonl(convert_sample(conv26_raw).steps, text)
    assert binary.getvalue() == first == text.getvalue().encode("utf-8")
    assert lines == first.count(b"\n") == len(first.splitlines())
    # compact JSON, one step per line
    assert b'", "' not in first.splitlines()[0]
    assert all(json.loads(line) for line in first.splitlines())


@needs_data
def test_converter_does_not_mutate_input(conv26_raw: dict[str, Any]) -> None:
    before = copy.deepcopy(conv26_raw)
    convert_sample(conv26_raw)
    assert conv26_raw == before


# --------------------------------------------------------------------------- all samples


@needs_data
def test_all_samples_every_fact_exactly_once(raw: list[dict[str, Any]]) -> None:
    assert sorted(s["sample_id"] for s in raw) == ALL_SAMPLE_IDS
    for sample in raw:
        script = convert_sample(sample)
        expected = Counter(raw_facts(sample))
        got = Counter(
            (session_id, item["subject"], item["statement"], tuple(item["evidence"]))
            for session_id, _, item in output_items(script)
        )
        assert got == expected, sample["sample_id"]
        assert script.stats.facts == sum(expected.values())
        assert script.stats.turns == sum(len(t) for _, t in raw_sessions(sample))
        assert script.stats.sessions == len(raw_sessions(sample))
        assert script.steps[0]["op"] == "open"
        all_ids = {t["dia_id"] for _, turns in raw_sessions(sample) for t in turns}
        reported = {(f.session, f.statement) for f in script.stats.fallbacks}
        for session_id, _, item in output_items(script):
            assert item["evidence"]
            assert all(
                d in all_ids or (session_id, item["statement"]) in reported
                for d in item["evidence"]
            )


# --------------------------------------------------------------------------- dates


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1:56 pm on 8 May, 2023", "2023-05-08T13:56:00Z"),
        ("10:37 am on 27 June, 2023", "2023-06-27T10:37:00Z"),
        ("12:06 am on 11 November, 2022", "2022-11-11T00:06:00Z"),
        ("12:30 pm on 1 January, 2024", "2024-01-01T12:30:00Z"),
        ("  1:56   pm  on   8  May ,  2023  ", "2023-05-08T13:56:00Z"),
        ("1:56pm on 8 May 2023", "2023-05-08T13:56:00Z"),
        ("1:56 PM on 8 MAY, 2023", "2023-05-08T13:56:00Z"),
        ("1:56 p.m. on 8 May, 2023", "2023-05-08T13:56:00Z"),
        ("9:02 am on 22 Sept, 2023", "2023-09-22T09:02:00Z"),
        ("9:02 am on 22 sep, 2023", "2023-09-22T09:02:00Z"),
        ("9:02 am on 22nd September, 2023", "2023-09-22T09:02:00Z"),
        ("11:59 pm on 29 February, 2024", "2024-02-29T23:59:00Z"),
        ("13:56 on 8 May, 2023", "2023-05-08T13:56:00Z"),
    ],
)
def test_parse_session_datetime(value: str, expected: str) -> None:
    assert parse_session_datetime(value) == expected


@pytest.mark.parametrize(
    "value",
    [
        "",
        "yesterday",
        "1:56 pm on 8 Mayo, 2023",
        "1:56 pm on 31 February, 2023",
        "11:59 pm on 29 February, 2023",
        "13:56 pm on 8 May, 2023",
        "0:10 am on 8 May, 2023",
        "1:61 pm on 8 May, 2023",
        "1:56 pm on 8 May",
        "8 May, 2023",
        "1:56 pm on 8 May, 2023 extra",
    ],
)
def test_parse_session_datetime_rejects(value: str) -> None:
    with pytest.raises(LocomoFormatError) as info:
        parse_session_datetime(value, sample_id="conv-x", key="session_3_date_time")
    assert isinstance(info.value, ValueError)
    message = str(info.value)
    assert "conv-x" in message and "session_3_date_time" in message and repr(value) in message
    assert (info.value.sample_id, info.value.key, info.value.value) == (
        "conv-x",
        "session_3_date_time",
        value,
    )


@given(st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2999, 12, 31)))
def test_parse_session_datetime_roundtrip(moment: datetime) -> None:
    hour = moment.hour % 12 or 12
    meridiem = "am" if moment.hour < 12 else "pm"
    text = f"{hour}:{moment.minute:02d} {meridiem} on {moment.day} {moment:%B}, {moment.year}"
    expected = moment.replace(second=0, microsecond=0, tzinfo=UTC)
    assert parse_session_datetime(text) == expected.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_unparseable_date_in_sample_names_sample_key_value() -> None:
    sample = synthetic_sample()
    sample["conversation"]["session_2_date_time"] = "sometime in May"
    with pytest.raises(LocomoFormatError, match=r"conv-test.*session_2_date_time.*sometime"):
        convert_sample(sample)


def test_missing_date_is_a_format_error() -> None:
    sample = synthetic_sample()
    del sample["conversation"]["session_1_date_time"]
    with pytest.raises(LocomoFormatError, match="session_1_date_time"):
        convert_sample(sample)


# --------------------------------------------------------------------------- dia_ids


@pytest.mark.parametrize(
    ("raw_ids", "expected"),
    [
        ("D1:3", ["D1:3"]),
        ("D1:3; D1:5,D2:1", ["D1:3", "D1:5", "D2:1"]),
        ("D26:14, D26:34, D26:42", ["D26:14", "D26:34", "D26:42"]),
        ("D1:3 D1:5\tD1:7", ["D1:3", "D1:5", "D1:7"]),
        ("D1:3;;D1:3 , D1:4", ["D1:3", "D1:4"]),
        (["D15:3", "D15:5"], ["D15:3", "D15:5"]),
        (["D1:3; D1:5", "D1:5", "D2:1"], ["D1:3", "D1:5", "D2:1"]),
        ("", []),
        ([], []),
    ],
)
def test_split_dia_ids(raw_ids: str | list[str], expected: list[str]) -> None:
    assert split_dia_ids(raw_ids) == expected


# --------------------------------------------------------------------------- fallbacks


def synthetic_sample() -> dict[str, Any]:
    """A two-session sample exercising every fallback path."""

    def turns(n: int, count: int) -> list[dict[str, str]]:
        speakers = ["Ann", "Bob"]
        return [
            {"speaker": speakers[i % 2], "dia_id": f"D{n}:{i + 1}", "text": f"s{n} t{i + 1}"}
            for i in range(count)
        ]

    session_2 = turns(2, 4)
    session_2[1]["blip_caption"] = "a photo of a dog"
    session_2[1]["img_url"] = "https://example.invalid/dog.jpg"
    return {
        "sample_id": "conv-test",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_10_date_time": "9:00 am on 3 March, 2023",
            "session_10": turns(10, 2),
            "session_2_date_time": "10:37 am on 27 June, 2023",
            "session_2": session_2,
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": turns(1, 3),
            "session_3_date_time": "1:00 pm on 1 July, 2023",  # date without turns: ignored
        },
        "observation": {
            "session_2_observation": {
                "Ann": [
                    ["plain", "D2:3"],
                    ["malformed", "D:2:2"],
                    ["other session", "D1:1"],
                    ["unknown", "D9:99"],
                    ["no id", ""],
                    ["unknown later evidence", ["D2:1", "D7:7"]],
                    ["list", ["D2:4", "D2:1; D2:4"]],
                ],
                "Bob": [["bob fact", "D2:2; D2:1"]],
            },
            "session_1_observation": {"Bob": [["first session", "D1:2"]]},
        },
        "qa": [],
    }


def test_synthetic_fallbacks() -> None:
    script = convert_sample(synthetic_sample())
    assert script.stats.sessions == 3
    assert script.stats.turns == 9
    assert script.stats.facts == 9
    assert [s["session"] for s in script.steps if s["op"] == "open"] == [
        "conv-test/session_1",
        "conv-test/session_2",
        "conv-test/session_10",
    ]
    placed = {item["statement"]: (sid, turn) for sid, turn, item in output_items(script)}
    s2 = "conv-test/session_2"
    assert placed == {
        "first session": ("conv-test/session_1", 2),
        "plain": (s2, 3),
        "malformed": (s2, 2),
        "other session": (s2, 4),
        "unknown": (s2, 4),
        "no id": (s2, 4),
        "unknown later evidence": (s2, 1),
        "list": (s2, 4),
        "bob fact": (s2, 2),
    }
    reasons = {f.statement: (f.reason, f.attached_to, f.turn) for f in script.stats.fallbacks}
    assert reasons == {
        "malformed": ("malformed-id", "D2:2", 2),
        "other session": ("other-session", "D2:4", 4),
        "unknown": ("unknown-id", "D2:4", 4),
        "no id": ("no-id", "D2:4", 4),
        "unknown later evidence": ("unknown-evidence", "D2:1", 1),
    }
    evidence = {item["statement"]: item["evidence"] for _, _, item in output_items(script)}
    assert evidence["list"] == ["D2:4", "D2:1"]
    assert evidence["malformed"] == ["D:2:2"]
    assert evidence["no id"] == []
    turn_2 = next(
        s for s in script.steps if s["op"] == "turn" and s["session"] == s2 and s["turn"] == 2
    )
    assert turn_2["transcript"] == "Bob: s2 t2 [shares a photo: a photo of a dog]"
    assert turn_2["occurred_at"] == "2023-06-27T10:37:00Z"
    # items within a turn keep the data's order
    assert [i["statement"] for i in turn_2["extracted"]] == ["malformed", "bob fact"]
    # stats serialise cleanly
    assert msgspec.json.decode(msgspec.json.encode(script.stats))["facts"] == 9


def test_observation_for_session_without_turns_is_an_error() -> None:
    sample = synthetic_sample()
    sample["observation"]["session_3_observation"] = {"Ann": [["orphan", "D3:1"]]}
    with pytest.raises(LocomoFormatError, match="session_3_observation"):
        convert_sample(sample)


def test_malformed_fact_is_an_error() -> None:
    sample = synthetic_sample()
    sample["observation"]["session_1_observation"]["Bob"].append(["no ids"])
    with pytest.raises(LocomoFormatError, match="conv-test"):
        convert_sample(sample)


def test_missing_sample_id_is_an_error() -> None:
    sample = synthetic_sample()
    del sample["sample_id"]
    with pytest.raises(LocomoFormatError, match="sample_id"):
        convert_sample(sample)


# --------------------------------------------------------------------------- loading


def test_find_sample() -> None:
    samples = [{"sample_id": "conv-1"}, {"sample_id": "conv-2"}]
    assert find_sample(samples, "conv-2") is samples[1]
    with pytest.raises(SampleNotFoundError) as info:
        find_sample(samples, "conv-9")
    assert isinstance(info.value, KeyError)
    assert info.value.available == ["conv-1", "conv-2"]
    assert "conv-9" in str(info.value) and "conv-1, conv-2" in str(info.value)


def test_an_unreadable_file_is_a_typed_error_naming_it(tmp_path: Path) -> None:
    for path in (tmp_path / "missing.json", tmp_path):  # absent; a folder
        with pytest.raises(LocomoFileError) as info:
            load_samples(path)
        assert info.value.reason_code == "bad_locomo_file" and info.value.path == str(path)
        assert f"the LoCoMo file {str(path)!r} cannot be read: " in str(info.value)
    missing = str(tmp_path / "missing.json")
    result = CliRunner().invoke(app, ["convert-locomo", missing, "--sample", "conv-26"])
    assert result.exit_code == 2 and "LocomoFileError" in result.output


def test_load_samples_rejects_non_list(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"sample_id": "conv-1"}', encoding="utf-8")
    with pytest.raises(LocomoFormatError):
        load_samples(path)


@needs_data
def test_load_samples_and_find_all(raw: list[dict[str, Any]]) -> None:
    samples = load_samples(skip_without_locomo())
    assert samples == raw
    for sample_id in ALL_SAMPLE_IDS:
        assert find_sample(samples, sample_id)["sample_id"] == sample_id
    with pytest.raises(SampleNotFoundError, match="conv-26"):
        find_sample(samples, "conv-99")
