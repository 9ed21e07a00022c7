"""The task goal that compaction never loses: pinning it, and putting it back in a summary.

Seed 002 ("Compaction"): before summarizing, the goal is pinned outside the model: the most
recent ``## Goal`` section of a user message (for example from an earlier summary),
otherwise the first user turn. If the new summary omits or rewrites that section, the
pinned goal is put back, so rolling compactions keep the original paths and constraints.

Here a ``## Goal`` section is a line ``## Goal`` (any case, up to three leading spaces)
and the lines after it up to the next level-1 or level-2 heading; its text is stripped of
surrounding whitespace. A summary message this engine writes starts with a marker line
that states how many lines its goal has (:func:`render_summary`), so the goal is read back
whole even when it holds headings of its own (a first user turn often does). Lines are
split on ``\\n`` only.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import msgspec

from memory_ledger.commands.context.chat_messages import ChatMessage

__all__ = [
    "GOAL_HEADING",
    "GoalSource",
    "PinnedGoal",
    "goal_sections",
    "pin_goal",
    "render_summary",
    "split_summary",
    "strip_goal",
]

GOAL_HEADING = "## Goal"
"""The heading of the goal section."""

GoalSource = Literal["goal_section", "summary", "first_user_turn", "none"]

_GOAL_LINE = re.compile(r" {0,3}##[ \t]+goal[ \t]*#*[ \t]*\r?", re.IGNORECASE)
_HEADING = re.compile(r" {0,3}#{1,2}(?:[ \t]|\r?$)")
_MARKER = re.compile(
    r"<!-- memory-ledger context summary: generation (\d+), goal (\d+) lines? -->\r?"
)


class PinnedGoal(msgspec.Struct, frozen=True):
    """The goal pinned before a compaction: its ``text``, where it came from (a ``## Goal``
    section, an earlier summary of this engine, the first user turn, or nowhere) and the
    index of the message it was read from (None for ``none``)."""

    text: str
    source: GoalSource
    message_index: int | None = None


def goal_sections(text: str) -> list[tuple[int, int, str]]:
    """Every ``## Goal`` section of ``text``: ``(first line, end line, stripped text)``,
    line indices of ``text.split("\\n")`` (the heading line and the exclusive end)."""
    lines = text.split("\n")
    sections = []
    at = 0
    while at < len(lines):
        if _GOAL_LINE.fullmatch(lines[at]):
            end = at + 1
            while end < len(lines) and not _HEADING.match(lines[end]):
                end += 1
            sections.append((at, end, "\n".join(lines[at + 1 : end]).strip()))
            at = end
        else:
            at += 1
    return sections


def split_summary(content: str) -> tuple[int, str, str] | None:
    """``(generation, goal, rest)`` of a summary message written by :func:`render_summary`;
    None for any other text."""
    lines = content.split("\n")
    match = _MARKER.fullmatch(lines[0])
    if match is None or len(lines) < 2 or not _GOAL_LINE.fullmatch(lines[1]):
        return None
    count = int(match.group(2))
    if len(lines) < 2 + count:
        return None
    goal = "\n".join(lines[2 : 2 + count])
    rest = "\n".join(lines[2 + count :]).strip("\n")
    return int(match.group(1)), goal, rest


def render_summary(goal: str, body: str, generation: int) -> str:
    """The content of a summary message: the marker line, ``## Goal`` with ``goal``
    verbatim, then ``body`` (the summary without goal sections)."""
    count = goal.count("\n") + 1
    marker = f"<!-- memory-ledger context summary: generation {generation}, goal {count} lines -->"
    text = f"{marker}\n{GOAL_HEADING}\n{goal}\n"
    body = body.strip("\n")
    return f"{text}\n{body}\n" if body else text


def pin_goal(messages: Sequence[ChatMessage]) -> PinnedGoal:
    """The goal of a history: the most recent ``## Goal`` section of a user message (a
    summary of this engine counts with its whole goal), else the first user turn (whole,
    stripped), else an empty goal (``none``)."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role != "user":
            continue
        summary = split_summary(message.content)
        if summary is not None:
            return PinnedGoal(summary[1].strip(), "summary", index)
        sections = [s for s in goal_sections(message.content) if s[2]]
        if sections:
            return PinnedGoal(sections[-1][2], "goal_section", index)
    for index, message in enumerate(messages):
        if message.role == "user":
            summary = split_summary(message.content)
            text = summary[1] if summary is not None else message.content
            return PinnedGoal(text.strip(), "first_user_turn", index)
    return PinnedGoal("", "none")


def strip_goal(summary: str, goal: str) -> tuple[str, bool]:
    """A model's ``summary`` without its goal section(s), and whether the goal had to be
    restored (True when the summary did not hold ``## Goal`` followed by ``goal``
    verbatim). Marker lines a model copied are dropped too."""
    text = "\n".join(line for line in summary.split("\n") if not _MARKER.fullmatch(line))
    lines = text.split("\n")
    goal_lines = goal.split("\n") if goal else []
    for at, line in enumerate(lines):
        if _GOAL_LINE.fullmatch(line):
            start = at + 1
            while start < len(lines) and not lines[start].strip():
                start += 1
            if goal_lines and lines[start : start + len(goal_lines)] == goal_lines:
                end = start + len(goal_lines)
                while end < len(lines) and not _HEADING.match(lines[end]):
                    if lines[end].strip():
                        break
                    end += 1
                else:
                    rest = lines[:at] + lines[end:]
                    return _without_sections("\n".join(rest)), False
    return _without_sections(text), True


def _without_sections(text: str) -> str:
    lines = text.split("\n")
    for start, end, _ in reversed(goal_sections(text)):
        del lines[start:end]
    return "\n".join(lines).strip("\n")
