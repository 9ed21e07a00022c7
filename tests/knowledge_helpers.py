"""A scripted knowledge package provider for the knowledge binding tests."""

from __future__ import annotations

import hashlib
from typing import Any, Literal

import msgspec

from memory_ledger.commands.context import (
    KnowledgeBinding,
    KnowledgeCitation,
    KnowledgeDocument,
    KnowledgeRequest,
    KnowledgeResponse,
    markdown_digest,
)
from memory_ledger.commands.context.knowledge_binding import KnowledgeLimits

Mode = Literal[
    "ok",
    "raise",
    "other_request",
    "other_package",
    "drifted_response",
    "drifted_citation",
    "bad_digest",
    "empty_document_id",
    "duplicate",
    "too_many",
    "too_big",
    "too_big_in_all",
    "not_a_response",
    "as_mapping",
]


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def binding(generation: int = 3, **limits: int) -> KnowledgeBinding:
    return KnowledgeBinding(
        package_id="acme/runbooks",
        version="2.1.0",
        generation=generation,
        generation_digest=digest(f"generation {generation}"),
        capability_digest=digest("capabilities"),
        limits=KnowledgeLimits(**limits),
    )


DOCS = {
    "deploy.md": ("Deploying", "Deploy with `make release`; freeze starts Friday."),
    "rollback.md": ("Rolling back", "Roll back with `make rollback TAG=previous`."),
}


class PackageProvider:
    """Serves ``DOCS`` for its binding; ``mode`` makes it misbehave one way; counts calls."""

    def __init__(self, bound: KnowledgeBinding) -> None:
        self._binding = bound
        self.mode: Mode = "ok"
        self.requests: list[KnowledgeRequest] = []

    @property
    def binding(self) -> KnowledgeBinding:
        return self._binding

    def document(self, doc_id: str, title: str, text: str, generation: int) -> KnowledgeDocument:
        citation = KnowledgeCitation(
            package_id=self._binding.package_id,
            version=self._binding.version,
            generation=generation,
            document_id=doc_id,
            digest=markdown_digest(text),
        )
        return KnowledgeDocument(citation=citation, title=title, markdown=text)

    def fetch(self, request: KnowledgeRequest) -> Any:
        self.requests.append(request)
        mode = self.mode
        if mode == "raise":
            raise ConnectionError("lease expired")
        generation = self._binding.generation
        docs = [self.document(d, t, m, generation) for d, (t, m) in DOCS.items()]
        answer_binding = self._binding
        request_id = request.request_id
        if mode == "other_request":
            request_id = "another-request"
        elif mode == "other_package":
            answer_binding = msgspec.structs.replace(self._binding, package_id="evil/pkg")
        elif mode == "drifted_response":
            answer_binding = binding(generation + 1)
        elif mode == "drifted_citation":
            docs[0] = self.document("deploy.md", "Deploying", "new text", generation + 1)
        elif mode == "bad_digest":
            docs[0] = msgspec.structs.replace(docs[0], markdown="tampered")
        elif mode == "empty_document_id":
            docs[0] = self.document(" ", "x", "x", generation)
        elif mode == "duplicate":
            docs = [docs[0], docs[0]]
        elif mode == "too_many":
            docs = [self.document(f"d{i}.md", "t", f"text {i}", generation) for i in range(5)]
        elif mode == "too_big":
            docs = [self.document("big.md", "Big", "x" * (6 * 1024), generation)]
        elif mode == "too_big_in_all":
            docs = [self.document(f"d{i}.md", "t", "y" * 2000, generation) for i in range(4)]
        elif mode == "not_a_response":
            return ["deploy.md"]
        response = KnowledgeResponse(
            binding=answer_binding, request_id=request_id, documents=tuple(docs)
        )
        if mode == "as_mapping":
            return msgspec.to_builtins(response)
        return response
