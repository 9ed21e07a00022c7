"""Exact knowledge binding: one immutable knowledge package generation, its typed request
and cited response, and the checks that fail closed.

Seed 002 ("Exact Cognitive Packages") is the source of the rules and figures:

* a :class:`KnowledgeBinding` names one package generation exactly (package id and
  version, lifecycle generation, generation digest, capability snapshot digest) and the
  prompt-injection limits; the hard limits are four documents, 6 KiB per document and
  6 KiB in all (:data:`HARD_LIMITS`), and a host may choose smaller ones;
* every :class:`KnowledgeRequest` and every :class:`KnowledgeResponse` repeats the binding,
  and each document carries a :class:`KnowledgeCitation` (package, version, generation,
  document id, SHA-256 of its Markdown);
* :func:`validate_response` checks a response before any of its content may enter context;
  provider failure, a malformed response or citation, a request mismatch, generation drift
  or a limit overrun raise :class:`KnowledgeBindingError`; nothing falls back to other
  retrieval.

The engine never installs, resolves or picks a package: the host supplies the binding and
a provider holding that generation (:mod:`commands.context.knowledge_context`).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal, Protocol, runtime_checkable

import msgspec

from memory_ledger.commands.errors import MemoryLedgerError

__all__ = [
    "HARD_LIMITS",
    "KnowledgeBinding",
    "KnowledgeBindingError",
    "KnowledgeCitation",
    "KnowledgeDocument",
    "KnowledgeLimits",
    "KnowledgeProvider",
    "KnowledgeReason",
    "KnowledgeRequest",
    "KnowledgeResponse",
    "markdown_digest",
    "validate_response",
]

KnowledgeReason = Literal[
    "invalid_binding",
    "binding_mismatch",
    "binding_missing",
    "binding_not_recorded",
    "provider_failed",
    "malformed_response",
    "malformed_citation",
    "request_mismatch",
    "generation_drift",
    "limit_exceeded",
    "provider_refused",
    "recall_suppressed",
]


class KnowledgeBindingError(MemoryLedgerError, RuntimeError):
    """A knowledge binding refused something; the turn gets no knowledge content (fail
    closed). ``reason_code``:

    * ``invalid_binding``: the binding itself is malformed (ids, digests, limits);
    * ``binding_mismatch``: the provider holds another binding than the host named, or a
      resumed session is given a binding other than the one it recorded;
    * ``binding_missing``: a session recorded with a binding is resumed without one;
    * ``binding_not_recorded``: a binding is given for a session that started unbound;
    * ``provider_failed``: the provider raised;
    * ``malformed_response`` / ``malformed_citation``: the answer or a document's citation
      is not what the contract says (wrong type, empty or duplicate document id, a digest
      that does not match the Markdown);
    * ``request_mismatch``: the response answers another request or another package;
    * ``generation_drift``: the provider, the response or a citation names another
      generation (or generation digest) than the binding;
    * ``limit_exceeded``: more documents or bytes than the binding allows;
    * ``provider_refused``: a knowledge provider offered through the generic provider list,
      or another context provider (workspace retrieval, memory, a host provider) offered to
      a bound session;
    * ``recall_suppressed``: memory recall asked of a bound session.
    """

    reason_code = "knowledge_refused"

    def __init__(self, reason_code: KnowledgeReason, message: str) -> None:
        super().__init__(message, reason_code=reason_code)

    def __reduce__(self) -> tuple[type[KnowledgeBindingError], tuple[str, str]]:
        return (type(self), (self.reason_code, str(self)))


_DIGEST = re.compile(r"(sha256:)?[0-9a-f]{64}")

KIB = 1024


class KnowledgeLimits(msgspec.Struct, frozen=True, kw_only=True):
    """How much of a package may enter one turn's context: documents, bytes of one
    document's Markdown (UTF-8), bytes in all. Defaults are the hard limits (seed 002:
    four documents, 6 KiB per document, 6 KiB total); smaller values are allowed.

    :raises KnowledgeBindingError: ``invalid_binding`` for a limit that is not a positive
        integer or exceeds the hard limit.
    """

    max_documents: int = 4
    max_document_bytes: int = 6 * KIB
    max_total_bytes: int = 6 * KIB

    def __post_init__(self) -> None:
        hard = {"max_documents": 4, "max_document_bytes": 6 * KIB, "max_total_bytes": 6 * KIB}
        for name, ceiling in hard.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= ceiling:
                msg = f"knowledge limit {name} must be an integer in 1..{ceiling}, got {value!r}"
                raise KnowledgeBindingError("invalid_binding", msg)


HARD_LIMITS = KnowledgeLimits()
"""Four documents, 6 KiB per document, 6 KiB in all (seed 002)."""


class KnowledgeBinding(msgspec.Struct, frozen=True, kw_only=True):
    """One exact, immutable knowledge package generation and its limits.

    ``package_id`` and ``version`` name the package; ``generation`` (>= 1) its lifecycle
    generation; ``generation_digest`` and ``capability_digest`` are SHA-256 digests (64 hex
    digits, optionally ``sha256:``-prefixed) of the generation's content and its capability
    snapshot; ``limits`` bound what one turn may receive.

    :raises KnowledgeBindingError: ``invalid_binding`` naming the bad field.
    """

    package_id: str
    version: str
    generation: int
    generation_digest: str
    capability_digest: str
    limits: KnowledgeLimits = HARD_LIMITS

    def __post_init__(self) -> None:
        for name in ("package_id", "version"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip() or len(value) > 256:
                msg = f"knowledge binding {name} must be a non-empty string of at most 256 chars"
                raise KnowledgeBindingError("invalid_binding", msg)
        generation = self.generation
        if isinstance(generation, bool) or not isinstance(generation, int) or generation < 1:
            msg = f"knowledge binding generation must be an integer >= 1, got {generation!r}"
            raise KnowledgeBindingError("invalid_binding", msg)
        for name in ("generation_digest", "capability_digest"):
            value = getattr(self, name)
            if not isinstance(value, str) or not _DIGEST.fullmatch(value):
                msg = f"knowledge binding {name} must be a SHA-256 hex digest, got {value!r}"
                raise KnowledgeBindingError("invalid_binding", msg)
        if not isinstance(self.limits, KnowledgeLimits):
            raise KnowledgeBindingError(
                "invalid_binding", "knowledge limits must be KnowledgeLimits"
            )

    def binding_id(self) -> str:
        """SHA-256 (first 32 hex digits) of the binding's canonical JSON: one id for one
        exact generation and its limits."""
        return hashlib.sha256(msgspec.json.encode(self)).hexdigest()[:32]

    def label(self) -> str:
        """``package@version#generation`` for messages."""
        return f"{self.package_id}@{self.version}#{self.generation}"


class KnowledgeRequest(msgspec.Struct, frozen=True, kw_only=True):
    """One typed request to the provider: the binding (repeated), a ``request_id`` the
    response must echo, the session and turn it is for, and the ``query`` text."""

    binding: KnowledgeBinding
    request_id: str
    session_id: str
    turn_id: int
    query: str


class KnowledgeCitation(msgspec.Struct, frozen=True, kw_only=True):
    """Where a document comes from: the package, version and generation (repeated from
    the binding), the ``document_id`` inside the package and the SHA-256 hex digest of the
    document's Markdown (UTF-8)."""

    package_id: str
    version: str
    generation: int
    document_id: str
    digest: str

    def label(self) -> str:
        """``package@version#generation:document_id``."""
        return f"{self.package_id}@{self.version}#{self.generation}:{self.document_id}"


class KnowledgeDocument(msgspec.Struct, frozen=True, kw_only=True):
    """One cited Markdown document of a response; its size against the limits is the UTF-8
    bytes of ``title`` and ``markdown`` together."""

    citation: KnowledgeCitation
    title: str
    markdown: str


class KnowledgeResponse(msgspec.Struct, frozen=True, kw_only=True):
    """The provider's answer: the binding (repeated), the ``request_id`` it answers and at
    most ``limits.max_documents`` cited documents."""

    binding: KnowledgeBinding
    request_id: str
    documents: tuple[KnowledgeDocument, ...] = ()


@runtime_checkable
class KnowledgeProvider(Protocol):
    """Holds one package generation for the host. ``binding`` is the generation it serves;
    ``fetch`` answers a request (it may raise; the engine fails the turn closed)."""

    @property
    def binding(self) -> KnowledgeBinding:
        """The exact generation this provider serves."""
        ...

    def fetch(self, request: KnowledgeRequest) -> KnowledgeResponse:
        """Cited documents for ``request``."""
        ...


def markdown_digest(markdown: str) -> str:
    """The SHA-256 hex digest a citation carries for ``markdown`` (UTF-8 bytes)."""
    return hashlib.sha256(markdown.encode("utf-8")).hexdigest()


def _same_generation(a: KnowledgeBinding, b: KnowledgeBinding) -> bool:
    return a.generation == b.generation and a.generation_digest == b.generation_digest


def check_binding(expected: KnowledgeBinding, actual: object, what: str) -> None:
    """Raise unless ``actual`` is exactly ``expected``: ``generation_drift`` when the
    package matches but its generation does not, ``request_mismatch`` otherwise."""
    if actual == expected:
        return
    if isinstance(actual, KnowledgeBinding) and (
        actual.package_id,
        actual.version,
    ) == (expected.package_id, expected.version):
        if not _same_generation(actual, expected):
            msg = (
                f"{what} names generation {actual.generation} of {expected.package_id}; "
                f"the session is bound to {expected.label()}"
            )
            raise KnowledgeBindingError("generation_drift", msg)
    msg = f"{what} does not repeat the binding {expected.label()}"
    raise KnowledgeBindingError("request_mismatch", msg)


def _check_citation(binding: KnowledgeBinding, document: KnowledgeDocument) -> None:
    citation = document.citation
    if (citation.package_id, citation.version) != (binding.package_id, binding.version):
        msg = f"a citation names {citation.package_id}@{citation.version}, not {binding.label()}"
        raise KnowledgeBindingError("malformed_citation", msg)
    if citation.generation != binding.generation:
        msg = f"a citation names generation {citation.generation}, not {binding.generation}"
        raise KnowledgeBindingError("generation_drift", msg)
    if not citation.document_id.strip():
        raise KnowledgeBindingError("malformed_citation", "a citation has no document id")
    from memory_ledger.commands.secrets import contains_secret  # detect_secrets: on use

    if contains_secret(citation.document_id):
        # Cited to the model and recorded in KnowledgeServed (refused there at the door).
        msg = "a citation's document id holds a secret-shaped value"
        raise KnowledgeBindingError("malformed_citation", msg)
    if citation.digest != markdown_digest(document.markdown):
        msg = f"citation {citation.label()} has a digest that does not match its Markdown"
        raise KnowledgeBindingError("malformed_citation", msg)


def validate_response(
    binding: KnowledgeBinding, request: KnowledgeRequest, raw: Any
) -> tuple[KnowledgeDocument, ...]:
    """The documents of ``raw`` (a :class:`KnowledgeResponse`, or a mapping of that shape)
    once every rule holds; see :class:`KnowledgeBindingError` for what fails.

    :raises KnowledgeBindingError: ``malformed_response``, ``request_mismatch``,
        ``generation_drift``, ``malformed_citation`` or ``limit_exceeded``.
    """
    if isinstance(raw, KnowledgeResponse):
        response = raw
    else:
        try:
            response = msgspec.convert(raw, KnowledgeResponse)
        except (msgspec.ValidationError, KnowledgeBindingError, TypeError) as e:
            msg = f"the provider's answer is not a KnowledgeResponse ({type(e).__name__})"
            raise KnowledgeBindingError("malformed_response", msg) from None
    check_binding(binding, response.binding, "the response")
    if response.request_id != request.request_id:
        raise KnowledgeBindingError("request_mismatch", "the response answers another request")
    limits = binding.limits
    if len(response.documents) > limits.max_documents:
        msg = f"{len(response.documents)} documents; the binding allows {limits.max_documents}"
        raise KnowledgeBindingError("limit_exceeded", msg)
    seen: set[str] = set()
    total = 0
    for document in response.documents:
        _check_citation(binding, document)
        if document.citation.document_id in seen:
            msg = f"document {document.citation.document_id!r} is cited twice"
            raise KnowledgeBindingError("malformed_citation", msg)
        seen.add(document.citation.document_id)
        size = len(document.title.encode("utf-8")) + len(document.markdown.encode("utf-8"))
        if size > limits.max_document_bytes:
            msg = (
                f"document {document.citation.document_id!r} has {size} bytes; the binding "
                f"allows {limits.max_document_bytes} per document"
            )
            raise KnowledgeBindingError("limit_exceeded", msg)
        total += size
    if total > limits.max_total_bytes:
        msg = f"{total} bytes of documents; the binding allows {limits.max_total_bytes} in all"
        raise KnowledgeBindingError("limit_exceeded", msg)
    return response.documents
