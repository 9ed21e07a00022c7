"""Convert LoCoMo conversations into memory-ledger session scripts.

LoCoMo ("Evaluating Very Long-Term Conversational Memory of LLM Agents", Maharana et al.,
ACL 2024) ships each conversation as one JSON object.  This module turns one such sample into
a *session script*: a list of steps, written as JSON Lines, that a replay driver feeds to the
engine::

    {"op":"open","session":"conv-26/session_1","namespace":{...}}
    {"op":"turn","session":"conv-26/session_1","turn":1,"occurred_at":"...","transcript":"...",
     "extracted":[ITEM, ...]}
    {"op":"finish","session":"conv-26/session_1"}

Choices made here (all deterministic, so the same input gives byte-identical output):

* One namespace per conversation: tenant ``"locomo"``, principal = the sample id, scope id
  ``"conversation"``.
* One memory session per LoCoMo ``session_N`` that has dialogue turns, in ascending numeric
  ``N``.  ``session_N_date_time`` keys without a matching ``session_N`` list (conv-26 has
  dates for sessions 20-35 but no turns) are ignored.
* Every turn of a session carries the session's start time as ``occurred_at``: LoCoMo only
  dates sessions, not turns, and gives no time zone, so the wall-clock time is read as UTC.
* A turn's transcript is ``"speaker: text"``.  When the turn shares an image, LoCoMo gives a
  BLIP caption of it; the caption is the only textual trace of the image, so it is appended as
  ``" [shares a photo: <caption>]"``.  ``img_url`` and the image search ``query`` are dropped.
* Each observation fact becomes one recorded ``semantic`` item attached to the turn of its
  first dia_id; its evidence is every dia_id it cites.  When the first dia_id is not a turn of
  the observation's own session, the fact is still emitted (never dropped) and the case is
  reported in :attr:`ConvertStats.fallbacks`; see :func:`convert_sample`.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import IO, Any, Final, Literal, cast

import msgspec

from memory_ledger.ledger.arguments import NESTED_TOO_DEEP
from memory_ledger.ledger.errors import MemoryLedgerError

__all__ = [
    "DEFAULT_LOCOMO_PATH",
    "FACT_CONFIDENCE",
    "FACT_IMPORTANCE",
    "FACT_REASON",
    "ConvertStats",
    "ConvertedScript",
    "Fallback",
    "FallbackReason",
    "LocomoFileError",
    "LocomoFormatError",
    "SampleNotFoundError",
    "convert_sample",
    "encode_jsonl",
    "find_sample",
    "load_samples",
    "main",
    "parse_session_datetime",
    "split_dia_ids",
    "write_jsonl",
]

DEFAULT_LOCOMO_PATH: Final = "../shared/data/locomo/locomo7.json"
"""Where the evaluation copy of LoCoMo lives when ``LOCOMO_PATH`` is not set: beside the
checkout, relative to the working directory (the README's commands run from the checkout)."""

TENANT: Final = "locomo"
SCOPE_ID: Final = "conversation"
FACT_REASON: Final = "LoCoMo observation (Maharana et al., ACL 2024)"
"""The fixed ``reason`` recorded on every item derived from a LoCoMo observation."""
FACT_IMPORTANCE: Final = 0.8
"""Importance given to every observation fact."""
FACT_CONFIDENCE: Final = 0.9
"""Confidence given to every observation fact."""

FallbackReason = Literal["malformed-id", "other-session", "unknown-id", "no-id", "unknown-evidence"]
"""Why a fact was reported as a fallback.

* ``malformed-id``: the first dia_id was malformed (e.g. ``"D:11:26"``) but, once normalised,
  names a turn of the fact's own session; the fact is attached to that turn.
* ``other-session``: the first dia_id names a turn of another session; the fact is attached
  to the last turn of its own session.
* ``unknown-id``: the first dia_id names no turn at all; attached to the last turn.
* ``no-id``: the fact cites no dia_id; attached to the last turn, evidence is empty.
* ``unknown-evidence``: the fact is attached normally, but a later dia_id in its evidence
  names no turn of the conversation.
"""

_SESSION_KEY = re.compile(r"session_(\d+)")
_OBSERVATION_KEY = re.compile(r"session_(\d+)_observation")
_DIA_ID_SEPARATORS = re.compile(r"[,;\s]+")
_MALFORMED_DIA_ID = re.compile(r"[Dd]\s*:?\s*(\d+)\s*:\s*(\d+)")
_DATE_TIME = re.compile(
    r"""
    ^\s*
    (?P<hour>\d{1,2})\s*[:.]\s*(?P<minute>\d{2})\s*
    (?:(?P<meridiem>[ap])\.?\s*m\.?)?\s*
    (?:on\s+)?
    (?P<day>\d{1,2})(?:st|nd|rd|th)?\s+
    (?P<month>[a-z]+)\.?\s*,?\s*
    (?P<year>\d{4})
    \s*$
    """,
    re.IGNORECASE | re.VERBOSE,
)
_MONTHS: Final[dict[str, int]] = {
    name: number
    for number, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ),
        start=1,
    )
    for name in names
}


class LocomoFormatError(MemoryLedgerError, ValueError):
    """A LoCoMo sample does not have the expected shape (or a value cannot be parsed).

    ``sample_id``, ``key`` and ``value`` name the offending sample, key and value.
    """

    reason_code = "bad_locomo_sample"

    def __init__(self, sample_id: str, key: str, value: object, problem: str) -> None:
        self.sample_id = sample_id
        self.key = key
        self.value = value
        self.problem = problem
        super().__init__(f"LoCoMo sample {sample_id!r}, key {key!r}: {problem} (value: {value!r})")


class LocomoFileError(MemoryLedgerError, ValueError):
    """A LoCoMo file cannot be read or is not JSON (or not UTF-8 JSON); ``path`` names it,
    the message says why (the operating system's reason, or where the decoder stopped)."""

    reason_code = "bad_locomo_file"

    def __init__(self, path: str, problem: str, *, unreadable: bool = False) -> None:
        self.path = path
        if unreadable:
            super().__init__(f"the LoCoMo file {path!r} cannot be read: {problem}")
        else:
            super().__init__(f"{path!r} is not a LoCoMo JSON file: {problem}")


class SampleNotFoundError(MemoryLedgerError, KeyError):
    """No sample with the requested id; ``available`` lists the ids that exist."""

    reason_code = "sample_not_found"

    def __init__(self, sample_id: str, available: Sequence[str]) -> None:
        self.sample_id = sample_id
        self.available = list(available)
        super().__init__(sample_id)

    def __str__(self) -> str:
        listed = ", ".join(self.available) if self.available else "(none)"
        return f"no LoCoMo sample {self.sample_id!r}; available: {listed}"


class Fallback(msgspec.Struct, frozen=True, kw_only=True):
    """One observation fact that could not be attached to the turn of its first dia_id."""

    session: str
    """Memory session the fact was emitted in (the session its observation belongs to)."""
    speaker: str
    statement: str
    dia_ids: list[str]
    """The fact's dia_ids after splitting (its evidence)."""
    attached_to: str
    """dia_id of the turn the fact was attached to."""
    turn: int
    """Turn number (1-based, within ``session``) the fact was attached to."""
    reason: FallbackReason


class ConvertStats(msgspec.Struct, kw_only=True):
    """Counts for one converted sample."""

    sessions: int = 0
    turns: int = 0
    facts: int = 0
    fallbacks: list[Fallback] = msgspec.field(default_factory=list)


class ConvertedScript(msgspec.Struct, kw_only=True):
    """The session script for one LoCoMo sample, plus conversion statistics."""

    sample_id: str
    steps: list[dict[str, Any]]
    stats: ConvertStats


def split_dia_ids(raw: str | Sequence[str]) -> list[str]:
    """Split dia_ids given as a string or a list of strings.

    A string may hold several ids separated by ``,``, ``;`` or whitespace.  The result keeps
    first-seen order and drops empty pieces and duplicates.
    """
    pieces = [raw] if isinstance(raw, str) else list(raw)
    seen: dict[str, None] = {}
    for piece in pieces:
        for dia_id in _DIA_ID_SEPARATORS.split(piece):
            if dia_id:
                seen.setdefault(dia_id, None)
    return list(seen)


def parse_session_datetime(value: str, *, sample_id: str = "?", key: str = "?") -> str:
    """Parse a LoCoMo session date like ``"1:56 pm on 8 May, 2023"`` to ISO 8601 UTC.

    Returns e.g. ``"2023-05-08T13:56:00Z"``.  Tolerates extra or missing spaces, upper case,
    ``a.m.``/``p.m.``, abbreviated or full month names, ordinal days and a missing comma or
    ``on``.  Without ``am``/``pm`` the hour is read on a 24-hour clock.  LoCoMo gives no time
    zone; the wall-clock time is taken as UTC.

    Raises :class:`LocomoFormatError` naming ``sample_id``, ``key`` and ``value`` when the
    value cannot be parsed or names an impossible date or time.
    """
    if not isinstance(value, str):
        raise LocomoFormatError(sample_id, key, value, "session date is not a string")
    match = _DATE_TIME.match(value)
    if match is None:
        raise LocomoFormatError(sample_id, key, value, "unparseable session date")
    month = _MONTHS.get(match["month"].lower())
    if month is None:
        raise LocomoFormatError(sample_id, key, value, f"unknown month {match['month']!r}")
    hour = int(match["hour"])
    meridiem = match["meridiem"]
    if meridiem is not None:
        if not 1 <= hour <= 12:
            raise LocomoFormatError(sample_id, key, value, "hour out of range for a 12-hour clock")
        hour = hour % 12 + (12 if meridiem.lower() == "p" else 0)
    try:
        moment = datetime(
            int(match["year"]), month, int(match["day"]), hour, int(match["minute"]), tzinfo=UTC
        )
    except ValueError as exc:
        raise LocomoFormatError(sample_id, key, value, f"invalid date or time: {exc}") from exc
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def load_samples(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Read a LoCoMo JSON file (a list of samples) and return the samples.

    :raises LocomoFileError: the file cannot be read (missing, a folder, no permission) or
        is not JSON.
    :raises LocomoFormatError: it is JSON but not a list of sample objects.
    """
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as e:
        problem = e.strerror or type(e).__name__
        raise LocomoFileError(os.fspath(path), problem, unreadable=True) from None
    try:
        data = msgspec.json.decode(raw)
    except msgspec.DecodeError as e:
        raise LocomoFileError(os.fspath(path), str(e)) from None
    except RecursionError:
        raise LocomoFileError(os.fspath(path), NESTED_TOO_DEEP) from None
    if not isinstance(data, list) or not all(isinstance(item, dict) for item in data):
        raise LocomoFormatError(
            "?", os.fspath(path), type(data).__name__, "expected a JSON list of sample objects"
        )
    return cast(list[dict[str, Any]], data)


def find_sample(samples: Iterable[Mapping[str, Any]], sample_id: str) -> Mapping[str, Any]:
    """Return the sample whose ``sample_id`` is ``sample_id``.

    Raises :class:`SampleNotFoundError` (a ``KeyError``) listing the available ids otherwise.
    """
    available: list[str] = []
    for sample in samples:
        current = sample.get("sample_id")
        if current == sample_id:
            return sample
        available.append(str(current))
    raise SampleNotFoundError(sample_id, available)


def _normalise_dia_id(dia_id: str) -> str | None:
    """Repair a malformed dia_id such as ``"D:11:26"`` or ``"d3 : 4"`` to ``"D11:26"``."""
    match = _MALFORMED_DIA_ID.fullmatch(dia_id.strip())
    if match is None:
        return None
    return f"D{int(match[1])}:{int(match[2])}"


def _transcript(sample_id: str, key: str, turn: object) -> tuple[str, str]:
    """Return ``(dia_id, transcript)`` for one dialogue turn."""
    if not isinstance(turn, Mapping):
        raise LocomoFormatError(sample_id, key, turn, "dialogue turn is not an object")
    speaker, dia_id, text = turn.get("speaker"), turn.get("dia_id"), turn.get("text")
    if not isinstance(speaker, str) or not isinstance(dia_id, str) or not isinstance(text, str):
        raise LocomoFormatError(
            sample_id, key, turn, "dialogue turn needs string speaker, dia_id and text"
        )
    transcript = f"{speaker}: {text}"
    caption = turn.get("blip_caption")
    if isinstance(caption, str) and caption.strip():
        transcript += f" [shares a photo: {caption.strip()}]"
    return dia_id, transcript


def _fact_item(speaker: str, statement: str, evidence: list[str]) -> dict[str, Any]:
    """The recorded item for one observation fact (key order is part of the output)."""
    return {
        "kind": "semantic",
        "subject": speaker,
        "predicate": None,
        "value": None,
        "statement": statement,
        "source": "fact",
        "scope": "user",
        "reason": FACT_REASON,
        "importance": FACT_IMPORTANCE,
        "confidence": FACT_CONFIDENCE,
        "tags": [],
        "supersedes": None,
        "conflicts_with": [],
        "evidence": evidence,
    }


def _attach(
    evidence: Sequence[str], index: Mapping[str, int], turn_home: Mapping[str, int], n_turns: int
) -> tuple[int, FallbackReason | None]:
    """Pick the turn (position in the session) for a fact; say why if it is a fallback.

    ``index`` maps the dia_ids of the fact's own session to positions; ``turn_home`` maps every
    dia_id of the conversation to its session number; the session has ``n_turns`` turns.
    """
    last = n_turns - 1
    if not evidence:
        return last, "no-id"
    first = evidence[0]
    if first in index:
        if any(dia_id not in turn_home for dia_id in evidence):
            return index[first], "unknown-evidence"
        return index[first], None
    repaired = _normalise_dia_id(first)
    if repaired is not None and repaired in index:
        return index[repaired], "malformed-id"
    if first in turn_home or (repaired is not None and repaired in turn_home):
        return last, "other-session"
    return last, "unknown-id"


def _numbered_keys(mapping: Mapping[str, Any], pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    """``(N, key)`` for every key matching ``pattern``, sorted by the numeric N."""
    found: list[tuple[int, str]] = []
    for key in mapping:
        match = pattern.fullmatch(key)
        if match is not None:
            found.append((int(match[1]), key))
    return sorted(found)


def convert_sample(sample: Mapping[str, Any]) -> ConvertedScript:
    """Convert one LoCoMo sample into a session script.

    Each ``session_N`` with dialogue turns becomes ``open``, one ``turn`` per dialogue turn
    (numbered from 1) and ``finish``.  Each fact of ``observation["session_N_observation"]``
    becomes one item in the ``extracted`` list of the turn whose dia_id is the fact's first
    dia_id.  When that turn is not in session N:

    * a malformed id that normalises to a turn of session N (``"D:11:26"`` -> ``"D11:26"``)
      is attached there;
    * otherwise (the id names a turn of another session, or no turn at all, or the fact has
      no id) the fact is attached to the last turn of session N.

    Every such case is recorded in ``stats.fallbacks``, as is a fact attached normally whose
    evidence also cites an id that is no turn of the conversation.  No fact is dropped.

    Raises :class:`LocomoFormatError` when the sample is malformed: no ``sample_id``, a
    session without a parseable date, an observation for a session without turns, etc.
    """
    raw_id = sample.get("sample_id")
    if not isinstance(raw_id, str) or not raw_id:
        raise LocomoFormatError("?", "sample_id", raw_id, "missing or not a string")
    sample_id = raw_id
    conversation = sample.get("conversation")
    if not isinstance(conversation, Mapping):
        raise LocomoFormatError(sample_id, "conversation", conversation, "not an object")
    observation = sample.get("observation", {})
    if not isinstance(observation, Mapping):
        raise LocomoFormatError(sample_id, "observation", observation, "not an object")

    namespace = {"tenant": TENANT, "principal": sample_id, "scope_id": SCOPE_ID}
    stats = ConvertStats()

    # Pass 1: sessions, their turns and dates, and where every dia_id lives.
    sessions: dict[int, tuple[str, str, list[tuple[str, str]]]] = {}
    turn_home: dict[str, int] = {}  # dia_id -> session number (first occurrence wins)
    for number, key in _numbered_keys(conversation, _SESSION_KEY):
        turns_raw = conversation[key]
        if not isinstance(turns_raw, list):
            raise LocomoFormatError(sample_id, key, turns_raw, "session is not a list of turns")
        if not turns_raw:
            continue
        date_key = f"{key}_date_time"
        if date_key not in conversation:
            raise LocomoFormatError(sample_id, date_key, None, "session has no date")
        occurred_at = parse_session_datetime(
            conversation[date_key], sample_id=sample_id, key=date_key
        )
        turns = [_transcript(sample_id, key, turn) for turn in turns_raw]
        for dia_id, _ in turns:
            turn_home.setdefault(dia_id, number)
        sessions[number] = (f"{sample_id}/{key}", occurred_at, turns)

    # Pass 2: attach every observation fact to a turn of its own session.
    extracted: dict[int, list[list[dict[str, Any]]]] = {
        number: [[] for _ in turns] for number, (_, _, turns) in sessions.items()
    }
    for number, key in _numbered_keys(observation, _OBSERVATION_KEY):
        by_speaker = observation[key]
        if not isinstance(by_speaker, Mapping):
            raise LocomoFormatError(sample_id, key, by_speaker, "observation is not an object")
        if number not in sessions:
            if any(by_speaker.values()):
                raise LocomoFormatError(
                    sample_id, key, f"session_{number}", "observation for a session without turns"
                )
            continue
        session_id, _, turns = sessions[number]
        index: dict[str, int] = {}
        for position, (dia_id, _) in enumerate(turns):
            index.setdefault(dia_id, position)
        for speaker, facts in by_speaker.items():
            if not isinstance(facts, list):
                raise LocomoFormatError(sample_id, key, facts, f"facts of {speaker!r} not a list")
            for fact in facts:
                if (
                    not isinstance(fact, list | tuple)
                    or len(fact) != 2
                    or not isinstance(fact[0], str)
                    or not (
                        isinstance(fact[1], str)
                        or (
                            isinstance(fact[1], list)
                            and all(isinstance(item, str) for item in fact[1])
                        )
                    )
                ):
                    raise LocomoFormatError(
                        sample_id, key, fact, "fact is not [text, dia_id or [dia_ids]]"
                    )
                statement = fact[0]
                evidence = split_dia_ids(fact[1])
                position, reason = _attach(evidence, index, turn_home, len(turns))
                extracted[number][position].append(_fact_item(speaker, statement, evidence))
                stats.facts += 1
                if reason is not None:
                    stats.fallbacks.append(
                        Fallback(
                            session=session_id,
                            speaker=speaker,
                            statement=statement,
                            dia_ids=list(evidence),
                            attached_to=turns[position][0],
                            turn=position + 1,
                            reason=reason,
                        )
                    )

    # Pass 3: emit the steps.
    steps: list[dict[str, Any]] = []
    for number, (session_id, occurred_at, turns) in sessions.items():
        steps.append({"op": "open", "session": session_id, "namespace": dict(namespace)})
        for position, (_, transcript) in enumerate(turns):
            steps.append(
                {
                    "op": "turn",
                    "session": session_id,
                    "turn": position + 1,
                    "occurred_at": occurred_at,
                    "transcript": transcript,
                    "extracted": extracted[number][position],
                }
            )
        steps.append({"op": "finish", "session": session_id})
        stats.sessions += 1
        stats.turns += len(turns)
    return ConvertedScript(sample_id=sample_id, steps=steps, stats=stats)


def encode_jsonl(steps: Iterable[Mapping[str, Any]]) -> bytes:
    """Encode steps as JSON Lines: compact JSON, one step per line, each ending in ``\\n``."""
    return b"".join(msgspec.json.encode(step) + b"\n" for step in steps)


def write_jsonl(steps: Iterable[Mapping[str, Any]], stream: IO[bytes] | IO[str]) -> int:
    """Write steps to ``stream`` as JSON Lines (binary or text stream); return the line count."""
    count = 0
    text = isinstance(stream, io.TextIOBase)
    for step in steps:
        line = msgspec.json.encode(step) + b"\n"
        if text:
            cast(IO[str], stream).write(line.decode("utf-8"))
        else:
            cast(IO[bytes], stream).write(line)
        count += 1
    return count


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: ``python -m memory_ledger.replay.scripts.locomo SAMPLE_ID [--data PATH]
    [--out FILE]``."""
    parser = argparse.ArgumentParser(
        prog="python -m memory_ledger.replay.scripts.locomo",
        description="Convert a LoCoMo sample to a session script.",
    )
    parser.add_argument("sample_id", help="e.g. conv-26")
    parser.add_argument(
        "--data",
        default=os.environ.get("LOCOMO_PATH", DEFAULT_LOCOMO_PATH),
        help="LoCoMo JSON file (default: $LOCOMO_PATH or %(default)s)",
    )
    parser.add_argument("--out", help="output .jsonl file (default: stdout)")
    args = parser.parse_args(argv)
    try:
        script = convert_sample(find_sample(load_samples(args.data), args.sample_id))
    except (OSError, msgspec.DecodeError, LocomoFormatError, SampleNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out:
        with open(args.out, "wb") as handle:
            write_jsonl(script.steps, handle)
    else:
        write_jsonl(script.steps, sys.stdout.buffer)
    stats = script.stats
    print(
        f"{script.sample_id}: sessions={stats.sessions} turns={stats.turns} "
        f"facts={stats.facts} fallbacks={len(stats.fallbacks)}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
