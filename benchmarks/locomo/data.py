"""LoCoMo as the retrieval benchmarks read it: conversations, their session scripts, their
observation facts, their dialogue turns (with dia_ids) and their questions.

Reads ``../shared/data/locomo/locomo7.json`` (or ``$LOCOMO_PATH``) through
``replay.scripts.locomo`` (the same converter ``memory-ledger convert-locomo`` uses).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory_ledger.replay.scripts.locomo import convert_sample, load_samples, split_dia_ids

CATEGORIES = (1, 2, 3, 4)
"""Categories of the observation-fact metric (5 is adversarial: unanswerable by design)."""
ALL_CATEGORIES = (1, 2, 3, 4, 5)
CATEGORY_NAMES = {
    1: "multi-hop",
    2: "temporal",
    3: "open-domain",
    4: "single-hop",
    5: "adversarial",
}

_SESSION = re.compile(r"^session_(\d+)$")


@dataclass
class Question:
    """One LoCoMo question: its conversation, text, category and evidence dia_ids."""

    sample_id: str
    text: str
    category: int
    evidence: frozenset[str]


@dataclass
class Turn:
    """One dialogue turn: its dia_id, session number and transcript (``speaker: text``)."""

    dia_id: str
    session: int
    transcript: str


@dataclass
class Conversation:
    """One conversation: its session script, facts (statement, evidence), turns and
    questions."""

    sample_id: str
    steps: list[dict[str, Any]]
    facts: list[tuple[str, tuple[str, ...]]]
    turns: list[Turn] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)
    """Questions of categories 1-4 (the observation-fact metric)."""
    all_questions: list[Question] = field(default_factory=list)
    """Questions of every category (the turn-level metric counts them all, as MemPalace)."""


def _turns(sample: dict[str, Any], steps: list[dict[str, Any]]) -> list[Turn]:
    """Dialogue turns in script order, each with its dia_id from the raw sample."""
    conversation = sample["conversation"]
    raw: list[tuple[str, int]] = []
    numbered = sorted(
        (int(m.group(1)), key)
        for key in conversation
        if (m := _SESSION.match(key)) and isinstance(conversation[key], list)
    )
    for number, key in numbered:
        raw.extend((str(turn.get("dia_id", "")), number) for turn in conversation[key])
    transcripts = [str(step["transcript"]) for step in steps if step["op"] == "turn"]
    if len(raw) != len(transcripts):
        msg = f"{sample['sample_id']}: {len(raw)} dialogue turns, {len(transcripts)} in the script"
        raise ValueError(msg)
    return [
        Turn(dia_id=dia_id, session=session, transcript=text)
        for (dia_id, session), text in zip(raw, transcripts, strict=True)
    ]


def load(path: Path | str, samples: Sequence[str], max_questions: int) -> list[Conversation]:
    """The conversations of ``path`` (only ``samples`` when given), each with at most
    ``max_questions`` questions (0: all)."""
    out = []
    for sample in load_samples(path):
        if samples and sample["sample_id"] not in samples:
            continue
        converted = convert_sample(sample)
        facts = [
            (str(item["statement"]), tuple(item["evidence"]))
            for step in converted.steps
            if step["op"] == "turn"
            for item in step["extracted"]
        ]
        conversation = Conversation(
            converted.sample_id, converted.steps, facts, _turns(sample, converted.steps)
        )
        for qa in sample.get("qa", []):
            category = qa.get("category")
            if category not in ALL_CATEGORIES:
                continue
            evidence = frozenset(split_dia_ids(qa.get("evidence") or []))
            question = Question(converted.sample_id, str(qa["question"]), int(category), evidence)
            conversation.all_questions.append(question)
            if category in CATEGORIES:
                conversation.questions.append(question)
        if max_questions:
            conversation.questions = conversation.questions[:max_questions]
            conversation.all_questions = conversation.all_questions[:max_questions]
        out.append(conversation)
    return out
