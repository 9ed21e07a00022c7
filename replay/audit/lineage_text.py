"""A memory's lineage as plain text: what a model reads (the MCP server's ``explain``).

The terminal shows a rich tree (``memory-ledger explain``); a model gets the same facts as
indented lines without markup, each event with its ledger position (``@N``) and the session
that wrote it. Direct commands name their caller in the session id (``direct-...``,
``mcp-<client>-...``), so the text says which call created, changed or forgot the memory.
"""

from __future__ import annotations

from datetime import datetime

from memory_ledger.replay.audit.lineage import Lineage

__all__ = ["render_text"]


def _when(value: datetime | None) -> str:
    return value.isoformat(timespec="seconds") if value is not None else "-"


def render_text(lineage: Lineage, *, transcript_chars: int = 400) -> str:
    """``lineage`` as plain indented text, transcripts cut to ``transcript_chars``."""
    lines = [
        f"memory {lineage.memory_id}: {lineage.statement}",
        f"  status {lineage.status}, revision {lineage.revision}"
        + (", pinned" if lineage.pinned else ""),
        f"  subject {lineage.subject or '-'}, predicate {lineage.predicate or '-'}, "
        f"value {lineage.value or '-'}, importance {lineage.importance:g}",
    ]
    if lineage.evidence:
        lines.append(f"  evidence: {', '.join(lineage.evidence)}")
    for origin in lineage.origins:
        head = f"{origin.kind} @{origin.position} in session {origin.session_id} turn "
        head += f"{origin.turn_id} ({_when(origin.recorded_at)})"
        if origin.decision is not None:
            head += f", decision {origin.decision}"
        if origin.activation_policy is not None:
            head += f" (policy {origin.activation_policy})"
        lines.append(f"  {head}")
        for shaped in origin.context:
            lines.append(f"    {shaped.type} @{shaped.position}: {shaped.detail}")
        if origin.command is not None:
            cmd = origin.command
            lines.append(f"    command {cmd.intent} @{cmd.position}: {cmd.statement}")
        if origin.candidate is not None:
            c = origin.candidate
            lines.append(
                f"    candidate @{c.position} by extractor {c.extractor_id}: {c.item.statement}"
                f" (confidence {c.item.confidence:g}, reason {c.item.reason!r})"
            )
        if origin.transcript is not None:
            t = origin.transcript
            text = " ".join(t.transcript.split())
            if len(text) > transcript_chars:
                text = text[:transcript_chars] + "…"
            lines.append(
                f"    transcript @{t.position} turn {t.turn_id}, occurred {_when(t.occurred_at)}: "
                f"{text}"
            )
    for entry in lineage.history:
        text = f"  {entry.type} @{entry.position}"
        if entry.session_id:
            text += f" in session {entry.session_id}"
        text += f": {entry.detail}"
        if entry.related_memory:
            related = lineage.related.get(entry.related_memory, "")
            text += f" -> {entry.related_memory} {related}".rstrip()
        lines.append(text)
    for older in lineage.supersedes:
        lines.append(f"  supersedes {older} {lineage.related.get(older, '')}".rstrip())
    if lineage.superseded_by:
        newer = lineage.superseded_by
        lines.append(f"  superseded by {newer} {lineage.related.get(newer, '')}".rstrip())
    lines.append(f"  recalled {len(lineage.recalls)} time(s)")
    for r in lineage.recalls[-5:]:
        lines.append(f"    @{r.position} session {r.session_id}: rank {r.rank} for {r.query!r}")
    lines.append(f"  admitted {len(lineage.admissions)} time(s), used {len(lineage.uses)} time(s)")
    return "\n".join(lines)
