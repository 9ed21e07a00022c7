"""Where the LoCoMo conversations are read from: one rule for the benchmarks and the tests.

``$LOCOMO_PATH`` when it is set, else ``../shared/data/locomo/locomo7.json`` beside the
checkout (the data is never copied into this repository). No other place is looked at: a
clone without the data skips the tests that read it, saying so (:func:`missing`), and the
benchmarks that need it say so too.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["BESIDE", "locomo_path", "missing"]

BESIDE = Path(__file__).resolve().parents[3] / "shared" / "data" / "locomo" / "locomo7.json"
"""``../shared/data/locomo/locomo7.json`` beside the checkout."""


def locomo_path() -> Path | None:
    """The LoCoMo file (``$LOCOMO_PATH``, else :data:`BESIDE`); None when it is no file."""
    configured = os.environ.get("LOCOMO_PATH")
    candidate = Path(configured) if configured else BESIDE
    return candidate if candidate.is_file() else None


def missing() -> str:
    """Why :func:`locomo_path` is None, for a skip reason or an error message."""
    configured = os.environ.get("LOCOMO_PATH")
    if configured:
        return f"LoCoMo data not found: $LOCOMO_PATH ({configured}) is no file"
    return f"LoCoMo data not found at {BESIDE} (beside the checkout); set LOCOMO_PATH"
