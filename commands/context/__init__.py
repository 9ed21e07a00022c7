"""The context wing: context assembly, knowledge binding, compaction and summarizers.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.context.assembler import ContextAssembler, ContextItem, ContextQuery
    from memory_ledger.commands.context.chat_messages import ChatMessage
    from memory_ledger.commands.context.compaction import CompactionPolicy
    from memory_ledger.commands.context.knowledge_binding import (
        KnowledgeBinding,
        KnowledgeBindingError,
        KnowledgeCitation,
        KnowledgeDocument,
        KnowledgeRequest,
        KnowledgeResponse,
        markdown_digest,
    )
    from memory_ledger.commands.context.knowledge_context import BoundKnowledge
    from memory_ledger.commands.context.summarizers import (
        DeterministicSummarizer,
        OpenAISummarizer,
        Summarizer,
    )

__all__ = [
    "BoundKnowledge",
    "ChatMessage",
    "CompactionPolicy",
    "ContextAssembler",
    "ContextItem",
    "ContextQuery",
    "DeterministicSummarizer",
    "KnowledgeBinding",
    "KnowledgeBindingError",
    "KnowledgeCitation",
    "KnowledgeDocument",
    "KnowledgeRequest",
    "KnowledgeResponse",
    "OpenAISummarizer",
    "Summarizer",
    "markdown_digest",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BoundKnowledge": "memory_ledger.commands.context.knowledge_context",
        "ChatMessage": "memory_ledger.commands.context.chat_messages",
        "CompactionPolicy": "memory_ledger.commands.context.compaction",
        "ContextAssembler": "memory_ledger.commands.context.assembler",
        "ContextItem": "memory_ledger.commands.context.assembler",
        "ContextQuery": "memory_ledger.commands.context.assembler",
        "DeterministicSummarizer": "memory_ledger.commands.context.summarizers",
        "KnowledgeBinding": "memory_ledger.commands.context.knowledge_binding",
        "KnowledgeBindingError": "memory_ledger.commands.context.knowledge_binding",
        "KnowledgeCitation": "memory_ledger.commands.context.knowledge_binding",
        "KnowledgeDocument": "memory_ledger.commands.context.knowledge_binding",
        "KnowledgeRequest": "memory_ledger.commands.context.knowledge_binding",
        "KnowledgeResponse": "memory_ledger.commands.context.knowledge_binding",
        "OpenAISummarizer": "memory_ledger.commands.context.summarizers",
        "Summarizer": "memory_ledger.commands.context.summarizers",
        "markdown_digest": "memory_ledger.commands.context.knowledge_binding",
    },
)
