"""The context wing: context assembly, knowledge binding, compaction and summarizers.

The names below are imported on first use (see :mod:`memory_ledger.ledger.lazy_exports`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memory_ledger.ledger.lazy_exports import lazy_exports

if TYPE_CHECKING:
    from memory_ledger.commands.context.knowledge_context import BoundKnowledge
    from memory_ledger.commands.context.chat_messages import ChatMessage
    from memory_ledger.commands.context.compaction import CompactionPolicy
    from memory_ledger.commands.context.assembler import ContextAssembler
    from memory_ledger.commands.context.assembler import ContextItem
    from memory_ledger.commands.context.assembler import ContextQuery
    from memory_ledger.commands.context.summarizers import DeterministicSummarizer
    from memory_ledger.commands.context.knowledge_binding import KnowledgeBinding
    from memory_ledger.commands.context.knowledge_binding import KnowledgeBindingError
    from memory_ledger.commands.context.knowledge_binding import KnowledgeCitation
    from memory_ledger.commands.context.knowledge_binding import KnowledgeDocument
    from memory_ledger.commands.context.knowledge_binding import KnowledgeRequest
    from memory_ledger.commands.context.knowledge_binding import KnowledgeResponse
    from memory_ledger.commands.context.summarizers import OpenAISummarizer
    from memory_ledger.commands.context.summarizers import Summarizer
    from memory_ledger.commands.context.knowledge_binding import markdown_digest

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
