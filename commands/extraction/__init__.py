"""The extraction wing: the extractor contract, the shipped extractors and item validation.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.extraction.base import (
        ExtractionRequest,
        Extractor,
        RecordedExtractor,
    )
    from memory_ledger.commands.extraction.openai import OpenAIChatExtractor
    from memory_ledger.commands.extraction.validation import Rejection, validate_item

__all__ = [
    "ExtractionRequest",
    "Extractor",
    "OpenAIChatExtractor",
    "RecordedExtractor",
    "Rejection",
    "validate_item",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ExtractionRequest": "memory_ledger.commands.extraction.base",
        "Extractor": "memory_ledger.commands.extraction.base",
        "OpenAIChatExtractor": "memory_ledger.commands.extraction.openai",
        "RecordedExtractor": "memory_ledger.commands.extraction.base",
        "Rejection": "memory_ledger.commands.extraction.validation",
        "validate_item": "memory_ledger.commands.extraction.validation",
    },
)
