"""Session-owned workspace retrieval: attached when the session opens, closed with it.

``engine.session(..., workspace=WorkspaceOptions(root, ...))`` checks the root and builds a
:class:`~commands.workspace.retrieval.WorkspaceRetrieval` for the session before the session
writes anything (a refused root leaves no event; a root that is the engine's store or inside
it is refused, ``root_in_store``; a store inside the root is left out of the tree), and
vectors are cached by file digest under ``<store>/workspace-vectors/<namespace id>`` so a
reopened session re-embeds only changed files and an erasure of the namespace deletes them;
then the session records WorkspaceAttached. Without options nothing is built:
``workspace_status()`` is ``disabled``, ``workspace_modes`` is empty and ``search_workspace`` raises
``WorkspaceError`` (``disabled``); no embedding provider is ever called.

Each search is recorded as a read-path record (WorkspaceSearched: redacted query, mode,
verified hits as path, lines and digest); ``close()`` closes the retrieval (cancel, join,
release) and records WorkspaceReleased.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
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
    open_root,
)
from memory_ledger.commands.workspace.search import SearchMode, WorkspaceSearchResult
from memory_ledger.ledger.events import (
    LedgerEvent,
    WorkspaceAttached,
    WorkspaceHitRecord,
    WorkspaceReleased,
    WorkspaceSearched,
)
from memory_ledger.projections.derived import NO_ERASURE, VECTOR_CACHE_FOLDER, ErasedNamespaces

__all__ = ["SessionWorkspace", "WorkspaceContextProvider", "WorkspaceOptions"]


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
        self._options: WorkspaceOptions | None = None

    def prepare(self, options: WorkspaceOptions | None) -> None:
        """Check the root and build the retrieval (its indexer starts), before the session
        writes anything: a refused root leaves no event. Nothing without options.

        :raises WorkspaceError: ``bad_root`` (see
            :func:`~commands.workspace.retrieval.open_root`), ``root_in_store`` (the root is
            the engine's store folder or a folder inside it: the store's own files, such as
            an export of every namespace kept there, would be indexed; a store that is a
            sub-folder of the root is left out of the tree instead).
        """
        self.workspace = self._options = None
        if options is None:
            return
        store = Path(self.stream.engine.path)
        root = open_root(options.root)
        try:
            real_store = Path(os.path.realpath(store))
            if root.path == real_store or real_store in root.path.parents:
                msg = (
                    "a workspace root must not be the store's folder or inside it: "
                    "the store's own files would be searched"
                )
                raise WorkspaceError(msg, "root_in_store")
        finally:
            root.close()
        rules = options.rules
        rules = AdmissionRules(
            max_file_bytes=rules.max_file_bytes,
            max_files=rules.max_files,
            exclude=(*rules.exclude, str(store)),
        )
        vectors = None
        erased: Callable[[], bool] | None = None
        if options.cache_vectors:
            known = getattr(self.stream.engine, "erased_namespaces", NO_ERASURE)
            if not isinstance(known, ErasedNamespaces):
                known = NO_ERASURE
            namespace = self.stream.namespace
            vectors = store / VECTOR_CACHE_FOLDER / known.namespace_id(namespace).hex
            erased = functools.partial(known.is_erased, namespace)

        self.workspace = WorkspaceRetrieval(
            options.root,
            chunking=options.chunking,
            embeddings=options.embeddings,
            rules=rules,
            vector_cache=vectors,
            vector_cache_erased=erased,
        )
        self._options = options

    def attach(self) -> None:
        """Record WorkspaceAttached for the retrieval :meth:`prepare` built (nothing
        without one); on failure the retrieval is closed and dropped."""
        retrieval, options = self.workspace, self._options
        if retrieval is None or options is None:
            return
        status = retrieval.status()
        rules = retrieval.rules

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
            self.discard()
            raise

    def discard(self) -> None:
        """Close and drop a retrieval that was never attached (the session failed to open);
        nothing is recorded."""
        retrieval, self.workspace, self._options = self.workspace, None, None
        if retrieval is not None:
            retrieval.close()

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
