"""Session-owned workspace retrieval: attached when the session opens, closed with it.

``engine.session(..., workspace=WorkspaceOptions(root, ...))`` builds a
:class:`~commands.workspace.retrieval.WorkspaceRetrieval` for the session (the engine's
store is left out of the tree, and vectors are cached by file digest under
``<store>/workspace-vectors`` so a reopened session re-embeds only changed files) and
records WorkspaceAttached. Without options nothing is built: ``workspace_status()`` is
``disabled``, ``workspace_modes`` is empty and ``search_workspace`` raises
``WorkspaceError`` (``disabled``); no embedding provider is ever called.

Each search is recorded as a read-path record (WorkspaceSearched: redacted query, mode,
verified hits as path, lines and digest); ``close()`` closes the retrieval (cancel, join,
release) and records WorkspaceReleased.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memory_ledger.commands.context.assembler import ContextItem, ContextQuery, FailureMode
from memory_ledger.commands.embeddings.base import EmbeddingProvider
from memory_ledger.commands.secrets import redact
from memory_ledger.commands.session.stream import SessionStream, check_turn_id
from memory_ledger.commands.workspace.admission import AdmissionRules
from memory_ledger.commands.workspace.chunking import ChunkingStrategy, LineWindows
from memory_ledger.commands.workspace.retrieval import (
    DISABLED,
    WorkspaceError,
    WorkspaceRetrieval,
    WorkspaceStatus,
)
from memory_ledger.commands.workspace.search import SearchMode, WorkspaceSearchResult
from memory_ledger.ledger.events import (
    LedgerEvent,
    WorkspaceAttached,
    WorkspaceHitRecord,
    WorkspaceReleased,
    WorkspaceSearched,
)

__all__ = ["SessionWorkspace", "WorkspaceContextProvider", "WorkspaceOptions"]

VECTOR_CACHE_FOLDER = "workspace-vectors"
"""Folder of the store holding workspace vectors by file digest (derived data)."""


@dataclass(frozen=True)
class WorkspaceOptions:
    """What a host gives a session to retrieve from: the ``root`` folder, a typed
    ``chunking`` strategy, an optional embedding provider (semantic and hybrid modes),
    admission ``rules`` and whether to keep vectors in the store's cache."""

    root: Path | str
    chunking: ChunkingStrategy = field(default_factory=LineWindows)
    embeddings: EmbeddingProvider | None = None
    rules: AdmissionRules = field(default_factory=AdmissionRules)
    cache_vectors: bool = True


class WorkspaceContextProvider:
    """The session's workspace as a context provider: the best verified chunks for the
    turn's query (hybrid when offered, else lexical), each item citing path, lines and
    digest. Fail-open: a failing search never blocks a turn."""

    def __init__(self, session: SessionWorkspace, k: int = 4, name: str = "workspace") -> None:
        self.failure_mode: FailureMode = "fail_open"
        self.session = session
        self.k = k
        self._name = name

    @property
    def name(self) -> str:
        """The provider name, the ``source`` of its items (``workspace``)."""
        return self._name

    def query(self, q: ContextQuery) -> Sequence[ContextItem]:
        """Up to ``k`` verified hits for the turn's query, as ``workspace`` items."""
        modes = self.session.workspace_modes
        mode: SearchMode = "hybrid" if "hybrid" in modes else "lexical"
        result = self.session.search_workspace(q.query, mode, self.k, turn_id=q.turn_id)
        best = max((hit.score for hit in result.hits), default=0.0)
        return [
            ContextItem(
                item_id=f"workspace:{hit.citation}",
                source=self._name,
                kind="workspace",
                text=f"{hit.citation}\n{hit.text}",
                relevance=min(1.0, hit.score / best) if best > 0 else 0.0,
                metadata={"path": hit.path, "digest": hit.digest},
            )
            for hit in result.hits
        ]


class SessionWorkspace:
    """Workspace retrieval of a session (see the module docstring).

    :param stream: the session's stream.
    """

    def __init__(self, stream: SessionStream) -> None:
        self.stream = stream
        self.workspace: WorkspaceRetrieval | None = None

    def attach(self, options: WorkspaceOptions | None) -> None:
        """Build the retrieval and record WorkspaceAttached (nothing without options)."""
        self.workspace = None
        if options is None:
            return
        store = Path(self.stream.engine.path)
        rules = options.rules
        rules = AdmissionRules(
            max_file_bytes=rules.max_file_bytes,
            max_files=rules.max_files,
            exclude=(*rules.exclude, str(store)),
        )
        retrieval = WorkspaceRetrieval(
            options.root,
            chunking=options.chunking,
            embeddings=options.embeddings,
            rules=rules,
            vector_cache=store / VECTOR_CACHE_FOLDER if options.cache_vectors else None,
        )
        status = retrieval.status()

        def attached() -> list[LedgerEvent]:
            self.stream.start_plan()
            return [
                WorkspaceAttached(
                    **self.stream.envelope(),
                    root=status.root or str(options.root),
                    chunking=status.chunking or "",
                    model=status.model,
                    max_file_bytes=rules.max_file_bytes,
                    max_files=rules.max_files,
                    modes=tuple(status.modes),
                )
            ]

        try:
            self.stream.append_once(attached)
        except BaseException:
            retrieval.close()
            raise
        self.workspace = retrieval

    @property
    def workspace_modes(self) -> tuple[SearchMode, ...]:
        """Search modes offered to the model: none without a workspace, ``lexical``, or all
        three with an embedding provider."""
        return self.workspace.modes if self.workspace is not None else ()

    def workspace_status(self) -> WorkspaceStatus:
        """The workspace status (``disabled`` for a session without one)."""
        return self.workspace.status() if self.workspace is not None else DISABLED

    def wait_for_workspace(self, timeout: float = 30.0) -> WorkspaceStatus:
        """Wait for the workspace index to be ready (at most ``timeout`` seconds; seed 002:
        30 s by default); the partial index keeps serving after a timeout."""
        if self.workspace is None:
            return DISABLED
        return self.workspace.wait_ready(timeout)

    def workspace_provider(self, k: int = 4) -> WorkspaceContextProvider:
        """This session's workspace as a context provider.

        :raises WorkspaceError: ``disabled`` without a workspace.
        """
        if self.workspace is None:
            raise WorkspaceError("this session has no workspace retrieval", "disabled")
        return WorkspaceContextProvider(self, k)

    def search_workspace(
        self, query: str, mode: SearchMode = "lexical", k: int = 8, *, turn_id: int | None = None
    ) -> WorkspaceSearchResult:
        """Search the session's workspace (verified results; see
        :meth:`WorkspaceRetrieval.search`) and record what was served.

        :raises WorkspaceError: ``disabled``, ``mode_unavailable``, ``closed``, ``bad_query``.
        """
        self.stream.check_open()
        if turn_id is not None:
            check_turn_id(turn_id)
        retrieval = self.workspace
        if retrieval is None:
            raise WorkspaceError("this session has no workspace retrieval", "disabled")
        result = retrieval.search(query, mode, k)
        self.stream.buffer_read(
            WorkspaceSearched(
                **self.stream.read_envelope("workspace"),
                turn_id=turn_id,
                query=redact(query).text[:2000],
                mode=mode,
                k=k,
                hits=tuple(
                    WorkspaceHitRecord(
                        path=h.path, line_start=h.line_start, line_end=h.line_end, digest=h.digest
                    )
                    for h in result.hits
                ),
                rejected=sum(result.rejected.values()),
                degraded=result.degraded,
            )
        )
        self.stream.touch()
        return result

    def close(self) -> None:
        """Close the retrieval (cancel, join, release) and record WorkspaceReleased."""
        retrieval, self.workspace = self.workspace, None
        if retrieval is None:
            return
        final = retrieval.close()

        def released() -> list[LedgerEvent]:
            self.stream.start_plan()
            return [
                WorkspaceReleased(
                    **self.stream.envelope(),
                    files_indexed=final.files_indexed,
                    files_embedded=final.files_embedded,
                    chunks=final.chunks,
                    failures=len(final.failures),
                    release_rate=final.release_rate,
                    released=final.released,
                )
            ]

        self.stream.append_once(released)
