"""A check that a text holds no secret, without loading the detectors (``detect-secrets``
and the rule tables cost a few hundred milliseconds to import).

:data:`LITERALS` and :data:`FOLDED` are the literal prefilter's conditions
(:data:`memory_ledger.commands.secrets.prefilter.PREFILTER`, derived from the detectors'
own gates), written out here so that a caller that echoes text (the CLI's titles and lines)
decides without importing the detectors whether the text needs the full scan;
``tests/secrets/test_quick_check.py`` checks they equal the derived ones, so a new rule or
gate that widens the prefilter fails that test until it is added here. Sound for ASCII
text only, as the prefilter: any other text may hold a secret here.
"""

from __future__ import annotations

from typing import Final

from memory_ledger.commands.secrets.scan import LONG_RUN

__all__ = ["FOLDED", "LITERALS", "may_hold_secret"]

LITERALS: Final = ("AP", "AKC", "SG.", "eyJ", "sk-", "pypi-", "k_live_", "sq0csp-")
"""Literals a detector's condition looks for as written."""

FOLDED: Final = (
    "://",
    "aws",
    "key",
    "pin",
    "pwd",
    "xox",
    " as ",
    "curl",
    "pass",
    "haslo",
    "mysql",
    "senha",
    "sifre",
    "token",
    "bearer",
    "secret",
    "mariadb",
    "contrase",
    "kennwort",
    "losenord",
    "credential",
    "wachtwoord",
    "adgangskode",
    "authorization",
    "hooks.slack.com",
)
"""Literals a detector's condition looks for in any case (found in the lower-case text)."""


def may_hold_secret(text: str) -> bool:
    """Whether ``text`` may hold a secret (False: the full scan finds nothing in it, sure):
    not ASCII, or one literal of a detector's condition, or a 20-character token run."""
    if not text.isascii():
        return True
    for literal in LITERALS:
        if literal in text:
            return True
    lower = text.lower()
    for literal in FOLDED:
        if literal in lower:
            return True
    return LONG_RUN.search(text) is not None
