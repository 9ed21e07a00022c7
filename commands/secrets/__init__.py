"""Secret detection and redaction (docs/design.md).

Secret shapes (API keys, tokens, password assignments, private keys, cloud keys) are
redacted in transcripts and rejected in candidate items before any event is written.

Detection is Yelp's ``detect-secrets`` library (its regex plugins, keyword-assignment
patterns and heuristic filters, and its base64 high-entropy plugin: the glue is
``secrets.plugins``) plus the project's own rules for what the library misses, kept as data
(``secrets.rules``: one entry per rule with its id, kind, pattern, context words and
validator), applied by a small engine (``secrets.detect``). Adjustments for conversational
text:

* Token spans are widened to the whole token: the library reports the shortest match (a
  JWT without its signature, a Stripe key's first 24 characters, just ``ghp`` of a GitHub
  token), which would leave the rest of the secret in the text.
* Keyword assignments must name a credential as a whole word part of the key, and an
  unquoted value after a plain English word and a colon must look like a password; code
  about a secret is skipped (``secrets.plugins``).
* Shapes the library misses, token prefixes in any case, ``token``/``secret``/
  ``credential`` assignments and password assignments in other languages, tokens known by
  shape alone (``mlt_``, ``npm_``, ``hf_``, bare AWS secret keys), prose logins and short
  password keywords: one rule each in ``secrets.rules``. There is no general high-entropy
  detector for free text: it would refuse ordinary text.
* Zero-width characters are removed from a copy of the text before the scan; text that is
  not NFKC-normalized is scanned in NFKC form and the spans mapped back
  (``secrets.detect``, ``secrets.nfkc``).
* Whole structured fields: :func:`field_secret` (``secrets.fields``).

Redaction markers ``[REDACTED:<kind>]`` are opaque to detection, so redaction is idempotent.
Speed: about 0.1 ms for a 2,000-character conversational transcript, about 0.5 ms for
code-heavy text (literal gates skip the patterns whose anchors are absent, and keyword
patterns are tried only where ``str.find`` locates their keyword); ``python -m benchmarks
secrets``.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.secrets.detect import (
        ZERO_WIDTH,
        clear_scan_cache,
        contains_secret,
        find_secrets,
        redact,
    )
    from memory_ledger.commands.secrets.fields import field_secret
    from memory_ledger.commands.secrets.spans import Redaction, SecretSpan

__all__ = [
    "Redaction",
    "SecretSpan",
    "ZERO_WIDTH",
    "clear_scan_cache",
    "contains_secret",
    "field_secret",
    "find_secrets",
    "redact",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Redaction": "memory_ledger.commands.secrets.spans",
        "SecretSpan": "memory_ledger.commands.secrets.spans",
        "ZERO_WIDTH": "memory_ledger.commands.secrets.detect",
        "clear_scan_cache": "memory_ledger.commands.secrets.detect",
        "contains_secret": "memory_ledger.commands.secrets.detect",
        "field_secret": "memory_ledger.commands.secrets.fields",
        "find_secrets": "memory_ledger.commands.secrets.detect",
        "redact": "memory_ledger.commands.secrets.detect",
    },
)
