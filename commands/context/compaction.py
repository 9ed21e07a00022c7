"""Compaction of a conversation history that never loses the task goal.

Seed 002 ("Compaction") gives the behaviour and the figures, kept as the defaults of
:class:`CompactionPolicy`: off by default; when on, compaction triggers when the estimated
request reaches ``threshold`` (0.80) of the context window; it keeps up to the 20 most
recent messages intact (half of a shorter history) and aims to land at 60% of the trigger;
the summary is capped at 8,000 tokens. :func:`compact_history`:

1. counts the request (:func:`commands.context.chat_messages.history_tokens`: host-declared fixed
   tokens for the system prompt and tool schemas, plus every message);
2. keeps the leading system messages as they are, and chooses how many recent messages to
   keep: at most ``keep_recent`` and half the rest, fewer while the kept tail leaves the
   summary no room under the target; the kept tail never starts with a ``tool`` message
   (a tool result stays with the call that asked for it); when no such tail fits as it is,
   its oversized tool outputs are truncated too, and when none fits even so, every message
   is summarized (so the result lands under the target whenever the system messages and
   fixed tokens leave room);
3. pins the goal (:func:`commands.context.compaction_goal.pin_goal`);
4. truncates every older tool output over ``max_tool_output_tokens`` with a marker that
   tells the model to re-read the file or re-run the command;
5. asks the :class:`~commands.context.summarizers.Summarizer` for a summary of the older prefix
   (rolling: an earlier summary message is part of that prefix and is passed on as
   ``previous_summary``), within the room left under the target (at most
   ``max_summary_tokens``);
6. puts the pinned goal back when the summary dropped or rewrote its ``## Goal`` section,
   and cuts the rest of the summary to its budget (the goal is never cut);
7. returns the new history: system messages, one ``user`` summary message, the kept tail.

The summary message starts with a marker line naming its generation and the length of its
goal, so the next compaction reads the goal back whole (:mod:`commands.context.compaction_goal`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

from memory_ledger.commands.context.chat_messages import (
    ChatMessage,
    as_messages,
    history_tokens,
    message_tokens,
)
from memory_ledger.commands.context.compaction_goal import (
    GoalSource,
    pin_goal,
    render_summary,
    split_summary,
    strip_goal,
)
from memory_ledger.commands.context.summarizers import (
    Summarizer,
    SummarizerError,
    SummaryRequest,
    previous_summary_text,
)
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.projections.tokens import TokenCounter, estimate_tokens

__all__ = [
    "MIN_SUMMARY_TOKENS",
    "CompactionError",
    "CompactionPolicy",
    "CompactionResult",
    "compact_history",
    "truncate_tool_output",
]

MIN_SUMMARY_TOKENS = 256
"""Room a summary always gets beside its goal, even when the kept tail fills the target."""

TRUNCATION_NOTE = (
    "\n[tool output truncated by compaction: {kept} of {total} estimated tokens kept; "
    "re-read the file or re-run the command to see the rest]"
)


class CompactionError(MemoryLedgerError, ValueError):
    """A compaction could not run; the history is unchanged. ``reason_code``:
    ``nothing_to_compact`` (fewer than two messages after the system messages),
    ``summarizer_failed`` (the summarizer raised or returned no text; its
    :class:`~commands.context.summarizers.SummarizerError` is the cause), ``bad_history``."""

    reason_code = "compaction_refused"

    def __init__(self, message: str, reason_code: str | None = None) -> None:
        super().__init__(message, reason_code=reason_code)

    def __reduce__(self) -> tuple[type[CompactionError], tuple[str, str]]:
        return (type(self), (str(self), self.reason_code))


class CompactionPolicy(msgspec.Struct, frozen=True, kw_only=True):
    """When and how far to compact (defaults from seed 002).

    ``enabled`` (default False: automatic compaction is off), ``max_context_tokens`` (the
    model's context window; required when enabled), ``threshold`` (0.80 of the window
    triggers), ``keep_recent`` (20 messages), ``target_ratio`` (land at 0.60 of the
    trigger), ``max_summary_tokens`` (8,000), ``max_tool_output_tokens`` (older tool
    outputs above this are truncated; 2,000, this module's choice).

    :raises InvalidArgumentError: (a ``ValueError``) a ratio outside (0, 1], a non-positive
        count, or ``enabled`` without ``max_context_tokens``.
    """

    enabled: bool = False
    max_context_tokens: int | None = None
    threshold: float = 0.80
    keep_recent: int = 20
    target_ratio: float = 0.60
    max_summary_tokens: int = 8000
    max_tool_output_tokens: int = 2000

    def __post_init__(self) -> None:
        for name in ("threshold", "target_ratio"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not math.isfinite(value) or not 0 < value <= 1:
                msg = f"CompactionPolicy.{name} must be in (0, 1], got {value!r}"
                raise InvalidArgumentError(msg, parameter=name, reason_code="out_of_range")
        counts = ("keep_recent", "max_summary_tokens", "max_tool_output_tokens")
        for name in counts:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                msg = f"CompactionPolicy.{name} must be a positive integer, got {value!r}"
                raise InvalidArgumentError(msg, parameter=name)
        window = self.max_context_tokens
        if window is not None and (
            isinstance(window, bool) or not isinstance(window, int) or window <= 0
        ):
            msg = f"CompactionPolicy.max_context_tokens must be a positive integer, got {window!r}"
            raise InvalidArgumentError(msg, parameter="max_context_tokens")
        if self.enabled and window is None:
            msg = "an enabled CompactionPolicy needs max_context_tokens (the context window)"
            raise InvalidArgumentError(msg, parameter="max_context_tokens")

    def trigger_tokens(self, window: int | None = None) -> int:
        """Tokens at which compaction triggers: ``threshold`` of the window.

        :raises InvalidArgumentError: no window is known.
        """
        size = window if window is not None else self.max_context_tokens
        if size is None:
            msg = "no context window: pass max_context_tokens"
            raise InvalidArgumentError(msg, parameter="max_context_tokens")
        return int(size * self.threshold)

    def target_tokens(self, window: int | None = None) -> int:
        """Tokens compaction aims to land at: ``target_ratio`` of the trigger."""
        return int(self.trigger_tokens(window) * self.target_ratio)


class CompactionResult(msgspec.Struct, frozen=True, kw_only=True):
    """One compaction: the new ``messages``; the ``summary`` message's content; the pinned
    ``goal`` and its source; whether the goal had to be restored; the ``generation`` (1 for
    the first compaction of a history); the replaced range ``[summarized_from,
    summarized_to)`` of the input messages; how many older tool outputs were truncated;
    token counts (estimated) before and after, the trigger, the target, and the summary
    message's tokens; the summarizer's id."""

    messages: tuple[ChatMessage, ...]
    summary: str
    goal: str
    goal_source: GoalSource
    goal_restored: bool
    generation: int
    summarized_from: int
    summarized_to: int
    truncated_tool_outputs: int
    tokens_before: int
    tokens_after: int
    trigger_tokens: int
    target_tokens: int
    summary_tokens: int
    summarizer_id: str


def truncate_tool_output(
    message: ChatMessage, max_tokens: int, counter: TokenCounter = estimate_tokens
) -> ChatMessage:
    """``message`` with its content cut to about ``max_tokens`` estimated tokens and a note
    telling the model to re-read or re-run (unchanged when it fits or is not a tool
    message)."""
    total = counter(message.content)
    if message.role != "tool" or total <= max_tokens:
        return message
    low, high = 0, len(message.content)
    while low < high:  # the longest prefix within the budget
        middle = (low + high + 1) // 2
        if counter(message.content[:middle]) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    kept = message.content[:low]
    note = TRUNCATION_NOTE.format(kept=counter(kept), total=total)
    return msgspec.structs.replace(message, content=kept + note)


def _keep(
    body: Sequence[ChatMessage], policy: CompactionPolicy, room: int, counter: TokenCounter
) -> tuple[int, bool]:
    """How many recent messages to keep, and whether their tool outputs must be truncated.

    The most recent ``k`` messages (``k`` at most ``keep_recent`` and half the body, never
    starting at a tool result) are kept as they are when they fit in ``room``; else, with
    oversized tool outputs truncated, when that fits; else none are kept.
    """
    limit = min(policy.keep_recent, len(body) // 2)
    cap = policy.max_tool_output_tokens
    for truncate in (False, True):
        tail = 0
        fits = []
        for k in range(1, limit + 1):
            message = body[len(body) - k]
            if truncate:
                message = truncate_tool_output(message, cap, counter)
            tail += message_tokens(message, counter)
            if tail <= room and message.role != "tool":
                fits.append(k)
        if fits:
            return fits[-1], truncate
    return 0, False


def _capped(goal: str, body: str, generation: int, budget: int, counter: TokenCounter) -> str:
    """The summary message content within ``budget`` tokens: the longest start of ``body``
    (cut at a line end when one is in its second half) with a note, or the goal alone (the
    goal is never cut)."""
    content = render_summary(goal, body, generation)
    if counter(content) <= budget:
        return content
    note = "\n[summary cut to its token budget]"
    low, high = 0, len(body)
    while low < high:
        middle = (low + high + 1) // 2
        trial = render_summary(goal, body[:middle] + note, generation)
        if counter(trial) <= budget:
            low = middle
        else:
            high = middle - 1
    if low == 0:
        return render_summary(goal, "", generation)
    cut = body.rfind("\n", 0, low)
    end = cut if cut > low // 2 else low
    return render_summary(goal, body[:end] + note, generation)


def compact_history(
    messages: Sequence[ChatMessage | dict[str, object]],
    summarizer: Summarizer,
    policy: CompactionPolicy,
    *,
    fixed_tokens: int = 0,
    force: bool = False,
    generation: int | None = None,
    max_context_tokens: int | None = None,
    token_counter: TokenCounter = estimate_tokens,
) -> CompactionResult | None:
    """Compact ``messages`` if they reach the trigger (or ``force``); see the module
    docstring for the steps.

    :param fixed_tokens: tokens of what the host sends beside the history (system prompt,
        tool schemas), counted against the window.
    :param generation: the generation to record (default: the previous summary's + 1).
    :param max_context_tokens: the window, when the policy does not fix one.
    :param token_counter: ``text -> tokens`` (a session passes its own; default the engine's
        estimate).
    :returns: None when compaction is off or not due (never with ``force``).
    :raises CompactionError: nothing to compact (with ``force``), the summarizer failed, or
        the history is malformed; the caller's history is unchanged.
    """
    try:
        history = as_messages(messages)
    except ValueError as e:
        raise CompactionError(str(e), "bad_history") from None
    window = max_context_tokens or policy.max_context_tokens
    if window is None:
        raise CompactionError("no context window: set max_context_tokens", "bad_history")
    trigger = policy.trigger_tokens(window)
    target = policy.target_tokens(window)
    counter = token_counter
    before = history_tokens(history, fixed_tokens, counter)
    if not force and (not policy.enabled or before < trigger):
        return None
    lead = 0
    while lead < len(history) and history[lead].role == "system":
        lead += 1
    body = history[lead:]
    if len(body) < 2:
        if force:
            raise CompactionError("fewer than two messages to compact", "nothing_to_compact")
        return None
    goal = pin_goal(history)
    previous = next(
        (
            split_summary(m.content)
            for m in reversed(body)
            if m.role == "user" and split_summary(m.content)
        ),
        None,
    )
    number = generation if generation is not None else (previous[0] + 1 if previous else 1)
    base = history_tokens(history[:lead], fixed_tokens, counter) + message_tokens(
        ChatMessage(role="user", content=render_summary(goal.text, "", number)), counter
    )
    keep, truncate_tail = _keep(body, policy, target - base - MIN_SUMMARY_TOKENS, counter)
    prefix, kept = body[: len(body) - keep], body[len(body) - keep :]
    cap = policy.max_tool_output_tokens
    entries = [truncate_tool_output(m, cap, counter) for m in prefix]
    tail = [truncate_tool_output(m, cap, counter) for m in kept] if truncate_tail else list(kept)
    truncated = sum(
        1 for new, old in zip([*entries, *tail], [*prefix, *kept], strict=True) if new is not old
    )
    tail_tokens = history_tokens(tail, 0, counter)
    budget = min(
        policy.max_summary_tokens,
        max(target - base - tail_tokens, MIN_SUMMARY_TOKENS)
        + counter(render_summary(goal.text, "", number)),
    )
    request = SummaryRequest(
        goal=goal.text,
        previous_summary=previous_summary_text(prefix),
        entries=tuple(entries),
        max_tokens=budget,
    )
    try:
        raw = summarizer.summarize(request)
    except SummarizerError as e:
        raise CompactionError(f"summarizer failed: {e}", "summarizer_failed") from e
    except Exception as e:
        msg = f"summarizer {summarizer.summarizer_id!r} raised {type(e).__name__}"
        raise CompactionError(msg, "summarizer_failed") from e
    if not isinstance(raw, str) or not raw.strip():
        raise CompactionError("the summarizer returned no summary text", "summarizer_failed")
    rest, restored = strip_goal(raw, goal.text)
    content = _capped(goal.text, rest, number, budget, counter)
    summary = ChatMessage(role="user", content=content)
    compacted = (*history[:lead], summary, *tail)
    return CompactionResult(
        messages=compacted,
        summary=content,
        goal=goal.text,
        goal_source=goal.source,
        goal_restored=restored and goal.source != "none",
        generation=number,
        summarized_from=lead,
        summarized_to=lead + len(prefix),
        truncated_tool_outputs=truncated,
        tokens_before=before,
        tokens_after=history_tokens(compacted, fixed_tokens, counter),
        trigger_tokens=trigger,
        target_tokens=target,
        summary_tokens=message_tokens(summary, counter),
        summarizer_id=summarizer.summarizer_id,
    )
