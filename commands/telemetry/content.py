"""Content (statements, queries) on the way to an exporter: through the secret door first.

Content is off by default
(:attr:`Telemetry.content <memory_ledger.commands.telemetry.options.Telemetry.content>`).
When a host turns it on, each text is passed through the same detection the ledger's door
uses (:mod:`memory_ledger.commands.secret_door`): secret-shaped spans are replaced by
``[REDACTED:<kind>]`` markers (:func:`memory_ledger.commands.secrets.redact`, as
transcripts are), and a text the door would still refuse as a whole field (a bare generated
password, :func:`memory_ledger.commands.secrets.field_secret`) is left out. A secret never reaches a
span, whether the operation it names succeeds or is refused.
"""

from __future__ import annotations

__all__ = ["door_text"]


def door_text(text: object) -> str | None:
    """``text`` as a span may carry it: redacted, or None when it is not a string or the
    door would refuse what is left (imports ``detect_secrets`` on first use)."""
    if not isinstance(text, str):
        return None
    from memory_ledger.commands.secrets import field_secret, redact

    redacted = redact(text).text
    if field_secret(redacted):
        return None
    return redacted
