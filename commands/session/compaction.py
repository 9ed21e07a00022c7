"""Compaction as a session command: each compaction of the host's history is recorded.

``engine.session(..., summarizer=..., compaction=CompactionPolicy(...))`` gives the session
a summarizer and a policy (off unless ``enabled``). :meth:`SessionCompaction.compact` runs
:func:`commands.context.compaction.compact_history` on the history the host passes and, when it
compacts, appends ContextCompacted (the range summarised, the cumulative summary message,
the pinned goal, token counts by the session's token counter) durably before returning.
The generation counts the session's compactions (across processes: it is read from the
session stream), so a host that keeps its own history can persist the same compact
generation; the summary and goal are redacted before they are recorded (secrets never enter
the ledger), the result handed back is the host's own text.
"""

from __future__ import annotations

from collections.abc import Sequence

from memory_ledger.commands.context.chat_messages import ChatMessage
from memory_ledger.commands.context.compaction import (
    CompactionError,
    CompactionPolicy,
    CompactionResult,
    compact_history,
)
from memory_ledger.commands.context.summarizers import Summarizer
from memory_ledger.commands.secrets import redact
from memory_ledger.commands.session.stream import SessionStream, check_turn_id
from memory_ledger.ledger.events import ContextCompacted, LedgerEvent

__all__ = ["SessionCompaction"]


class SessionCompaction:
    """Recorded compaction of a session (see the module docstring).

    :param stream: the session's stream.
    :param summarizer: the summarizer of :meth:`compact` (None: compaction refused).
    :param policy: when and how far to compact.
    """

    def __init__(
        self, stream: SessionStream, summarizer: Summarizer | None, policy: CompactionPolicy
    ) -> None:
        self.stream = stream
        self.summarizer = summarizer
        self.compaction_policy = policy

    @property
    def compactions(self) -> list[ContextCompacted]:
        """The session's ContextCompacted events, oldest first (read from the ledger)."""
        return list(self.stream.refresh().compactions)

    def compact(
        self,
        messages: Sequence[ChatMessage | dict[str, object]],
        *,
        turn_id: int | None = None,
        fixed_tokens: int = 0,
        force: bool = False,
        max_context_tokens: int | None = None,
    ) -> CompactionResult | None:
        """Compact ``messages`` when they reach the policy's trigger (or ``force``) and
        record ContextCompacted; None when compaction is off or not due.

        :param max_context_tokens: the window when the policy sets none (e.g. the model's).
        :raises CompactionError: ``no_summarizer`` (the session was opened without one),
            ``conflict`` (another process recorded this generation first), or any error of
            :func:`~commands.context.compaction.compact_history`; nothing is recorded then.
        """
        self.stream.check_open()
        if turn_id is not None:
            check_turn_id(turn_id)
        if self.summarizer is None:
            raise CompactionError("the session was opened without a summarizer", "no_summarizer")
        generation = len(self.stream.refresh().compactions) + 1
        result = compact_history(
            messages,
            self.summarizer,
            self.compaction_policy,
            fixed_tokens=fixed_tokens,
            force=force,
            generation=generation,
            max_context_tokens=max_context_tokens,
            token_counter=self.stream.token_counter,
        )
        if result is None:
            return None
        summary = redact(result.summary)
        goal = redact(result.goal)

        def compacted() -> list[LedgerEvent]:
            if len(self.stream.state.compactions) >= generation:
                return []
            self.stream.start_plan()
            return [
                ContextCompacted(
                    **self.stream.envelope(),
                    turn_id=turn_id,
                    generation=generation,
                    summarized_from=result.summarized_from,
                    summarized_to=result.summarized_to,
                    summary=summary.text,
                    goal=goal.text,
                    goal_source=result.goal_source,
                    goal_restored=result.goal_restored,
                    truncated_tool_outputs=result.truncated_tool_outputs,
                    tokens_before=result.tokens_before,
                    tokens_after=result.tokens_after,
                    trigger_tokens=result.trigger_tokens,
                    target_tokens=result.target_tokens,
                    summarizer_id=result.summarizer_id,
                    redactions=summary.count + goal.count,
                )
            ]

        if not self.stream.append_once(compacted):
            msg = f"compaction generation {generation} was recorded by another writer first"
            raise CompactionError(msg, "conflict")
        return result
