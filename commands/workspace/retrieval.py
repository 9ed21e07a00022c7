"""Session-owned workspace retrieval: a bounded index of one folder, built in the background,
verified at serve time, released on close (seed 002, "Session-owned workspace retrieval").

Off by default: a session without a :class:`WorkspaceRetrieval` builds nothing, calls no
embedding provider and offers no search mode (its status is :data:`DISABLED`). With one::

    ws = WorkspaceRetrieval("/repo", chunking=LineWindows(lines=40))  # returns at once
    ws.wait_ready(timeout=30)         # optional; a timeout keeps the partial index serving
    ws.search("open the ledger", mode="lexical", k=5).hits[0].citation
    ws.close().release_rate           # 1.0: every vector freed

Search modes are ``lexical`` always, and ``semantic`` / ``hybrid`` only with an embedding
provider (:attr:`WorkspaceRetrieval.modes`). The pieces: admission
(:mod:`commands.workspace.admission`), chunking (:mod:`commands.workspace.chunking`),
safe reads (:mod:`commands.workspace.files`), the catalog (:mod:`commands.workspace.catalog`),
the indexer thread (:mod:`commands.workspace.indexer`), verified search
(:mod:`commands.workspace.search`) and the on-disk vector cache
(:mod:`commands.workspace.vector_cache`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import msgspec

from memory_ledger.commands.embeddings.base import EmbeddingProvider
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.commands.workspace.admission import AdmissionRules
from memory_ledger.commands.workspace.catalog import WorkspaceCatalog
from memory_ledger.commands.workspace.chunking import (
    ChunkingStrategy,
    LineWindows,
    check_strategy,
    strategy_key,
)
from memory_ledger.commands.workspace.files import WorkspaceRoot
from memory_ledger.commands.workspace.indexer import WorkspaceFailure, WorkspaceIndexer
from memory_ledger.commands.workspace.search import (
    SEARCH_MODES,
    SearchMode,
    WorkspaceSearchResult,
    run_search,
)
from memory_ledger.commands.workspace.vector_cache import VectorCache
from memory_ledger.ledger.arguments import check_timeout

__all__ = [
    "DEFAULT_READY_TIMEOUT_S",
    "DISABLED",
    "WorkspaceError",
    "WorkspaceRetrieval",
    "WorkspaceState",
    "WorkspaceStatus",
    "open_root",
]

WorkspaceState = Literal["disabled", "building", "ready", "degraded", "closed"]

DEFAULT_READY_TIMEOUT_S = 30.0
"""How long :meth:`WorkspaceRetrieval.wait_ready` waits by default (seed 002: 30 seconds)."""

DEFAULT_CLOSE_TIMEOUT_S = 10.0
"""How long ``close`` waits for a provider call in flight before releasing anyway."""

MAX_K = 50
"""The largest ``k`` a search accepts."""


class WorkspaceError(MemoryLedgerError, ValueError):
    """A workspace request was refused. ``reason_code``: ``disabled`` (the session has no
    workspace retrieval), ``mode_unavailable`` (semantic or hybrid without an embedding
    provider, or an unknown mode), ``closed``, ``bad_root`` (not a readable folder, the
    empty string, a NUL byte, a path that is not UTF-8), ``root_in_store`` (the root is the
    engine's store folder or inside it), ``bad_query`` (empty query, a lone surrogate, or
    ``k`` out of 1..50); ``workspace_refused`` by default."""

    reason_code = "workspace_refused"

    def __init__(self, message: str, reason_code: str | None = None) -> None:
        super().__init__(message, reason_code=reason_code)

    def __reduce__(self) -> tuple[type[WorkspaceError], tuple[str, str]]:
        return (type(self), (str(self), self.reason_code))


class WorkspaceStatus(msgspec.Struct, frozen=True, kw_only=True):
    """A snapshot of workspace retrieval (seed 002: coverage, queue depth, failures, vector
    memory, post-close release).

    ``files_indexed`` are searchable lexically, ``files_embedded`` semantically;
    ``lexical_coverage`` is ``files_indexed / (files_indexed + files still to read)`` and
    ``semantic_coverage`` ``files_embedded`` over the same (None without a provider; 1.0
    for an empty tree). ``queue_depth`` counts files still to read plus files still to
    embed. ``excluded`` counts files (folders, for ``generated`` and ``store``) left out by
    reason. ``vector_bytes`` is the memory held by vectors now; ``release_rate`` the share
    of vector arrays freed by ``close`` (None while open) and ``released`` whether close
    joined the indexer and freed them all.
    """

    state: WorkspaceState
    root: str | None = None
    modes: tuple[SearchMode, ...] = ()
    model: str | None = None
    chunking: str | None = None
    files_listed: int = 0
    files_indexed: int = 0
    files_embedded: int = 0
    chunks: int = 0
    lexical_coverage: float = 0.0
    semantic_coverage: float | None = None
    queue_depth: int = 0
    excluded: dict[str, int] = {}
    failures: tuple[WorkspaceFailure, ...] = ()
    provider_calls: int = 0
    cache_hits: int = 0
    vector_bytes: int = 0
    release_rate: float | None = None
    released: bool | None = None


DISABLED = WorkspaceStatus(state="disabled")
"""The status of a session without workspace retrieval."""


def _utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def open_root(root: object) -> WorkspaceRoot:
    """The workspace root ``root`` opened (a descriptor held until closed), once it is
    checked: a ``str`` or path, not the empty string, without a NUL byte, an openable
    folder whose resolved path is valid UTF-8. Nothing is written.

    :raises WorkspaceError: ``bad_root`` (the message names the check, and the root only
        as ``repr`` of what was given).
    """
    text = os.fspath(root) if isinstance(root, str | os.PathLike) else None
    if not isinstance(text, str):
        msg = f"a workspace root must be a str or a path, got {type(root).__name__}"
        raise WorkspaceError(msg, "bad_root")
    if isinstance(root, str) and not root:
        msg = "a workspace root must name a folder ('' would be the current directory)"
        raise WorkspaceError(msg, "bad_root")
    if "\x00" in text:
        raise WorkspaceError("a workspace root must not hold a NUL byte", "bad_root")
    try:
        opened = WorkspaceRoot(text)
    except (OSError, ValueError) as e:
        msg = f"workspace root {text!r} is not a readable folder ({type(e).__name__})"
        raise WorkspaceError(msg, "bad_root") from e
    if not _utf8(str(opened.path)):
        opened.close()
        msg = f"workspace root {text!r} is not valid UTF-8 (its path is recorded)"
        raise WorkspaceError(msg, "bad_root")
    return opened


class WorkspaceRetrieval:
    """A session-owned index of the folder ``root``; construction starts the indexer and
    returns immediately.

    :param chunking: a typed strategy (default ``LineWindows()``); a bare name is refused.
    :param embeddings: an embedding provider for ``semantic``/``hybrid`` (None: lexical
        only, no provider is ever called).
    :param rules: admission limits (size, file count, extra excluded paths).
    :param vector_cache: a folder keeping vectors by file digest across sessions.
    :param vector_cache_erased: whether the cache's owner is erased now (nothing is then
        written to ``vector_cache``; :class:`~commands.workspace.vector_cache.VectorCache`).
    :param batch_size: at most this many chunks per provider call.
    :raises WorkspaceError: ``bad_root`` when ``root`` is not a readable folder, is not a
        ``str`` or path, is the empty string (it would be the current directory, unnamed),
        holds a NUL byte, or resolves to a path that is not valid UTF-8 (it is recorded).
    :raises TypeError: ``chunking`` is not a typed strategy object.
    """

    def __init__(
        self,
        root: Path | str,
        *,
        chunking: ChunkingStrategy | None = None,
        embeddings: EmbeddingProvider | None = None,
        rules: AdmissionRules | None = None,
        vector_cache: Path | str | None = None,
        vector_cache_erased: Callable[[], bool] | None = None,
        batch_size: int = 64,
    ) -> None:
        self.strategy = check_strategy(chunking if chunking is not None else LineWindows())
        self.rules = rules or AdmissionRules()
        self.root = open_root(root)
        self.provider = embeddings
        self.descriptor = embeddings.descriptor if embeddings is not None else None
        cache = None
        if vector_cache is not None and self.descriptor is not None:
            cache = VectorCache(
                Path(vector_cache),
                self.descriptor,
                strategy_key(self.strategy),
                erased=vector_cache_erased,
            )
        self.catalog = WorkspaceCatalog()
        self._indexer = WorkspaceIndexer(
            self.root,
            self.catalog,
            strategy=self.strategy,
            rules=self.rules,
            provider=embeddings,
            descriptor=self.descriptor,
            cache=cache,
            batch_size=batch_size,
        )
        self._closed_status: WorkspaceStatus | None = None
        self._indexer.start()

    @property
    def modes(self) -> tuple[SearchMode, ...]:
        """The search modes offered: ``("lexical",)``, or all three with a provider."""
        return SEARCH_MODES if self.provider is not None else ("lexical",)

    def status(self) -> WorkspaceStatus:
        """A consistent snapshot (cheap: no file is read)."""
        if self._closed_status is not None:
            return self._closed_status
        counts = self._indexer.counts()
        files, chunks, embedded, held = self.catalog.counts()
        todo = files + counts.pending_read
        return WorkspaceStatus(
            state=counts.state,
            root=str(self.root.path),
            modes=self.modes,
            model=self.descriptor.model_key() if self.descriptor is not None else None,
            chunking=strategy_key(self.strategy),
            files_listed=counts.listed,
            files_indexed=files,
            files_embedded=embedded,
            chunks=chunks,
            lexical_coverage=files / todo if todo else 1.0,
            semantic_coverage=(embedded / todo if todo else 1.0) if self.provider else None,
            queue_depth=counts.pending_read + counts.pending_embed,
            excluded=counts.excluded,
            failures=counts.failures,
            provider_calls=counts.provider_calls,
            cache_hits=counts.cache_hits,
            vector_bytes=held,
        )

    def wait_ready(self, timeout: float = DEFAULT_READY_TIMEOUT_S) -> WorkspaceStatus:
        """Wait until the index is ``ready`` or ``degraded`` (or closed), at most ``timeout``
        seconds; on timeout the partial index keeps serving. Returns the status then."""
        seconds = check_timeout("timeout", timeout, allow_none=False)
        assert seconds is not None
        self._indexer.wait_idle(seconds)
        return self.status()

    def refresh(self) -> None:
        """Queue a rescan: new, changed and deleted files are reconciled in the background
        (unchanged files keep their partitions and vectors)."""
        self._check_open()
        self._indexer.request_rescan()

    def search(self, query: str, mode: SearchMode = "lexical", k: int = 8) -> WorkspaceSearchResult:
        """The best ``k`` verified chunks for ``query`` in ``mode`` (see
        :mod:`commands.workspace.search`), over whatever is published now.

        :raises WorkspaceError: ``closed``, ``mode_unavailable`` or ``bad_query``.
        """
        self._check_open()
        if mode not in self.modes:
            msg = f"search mode {mode!r} is not offered; modes: {', '.join(self.modes)}"
            raise WorkspaceError(msg, "mode_unavailable")
        if not isinstance(query, str) or not query.strip():
            raise WorkspaceError("a workspace search needs a non-empty query", "bad_query")
        if not _utf8(query):
            msg = "a workspace query must be valid UTF-8 (it holds a lone surrogate)"
            raise WorkspaceError(msg, "bad_query")
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise WorkspaceError(f"k must be an integer from 1 to {MAX_K}, got {k!r}", "bad_query")
        return run_search(
            self.catalog,
            self.root,
            query,
            mode,
            k,
            max_bytes=self.rules.max_file_bytes,
            provider=self.provider,
            descriptor=self.descriptor,
            on_stale=self._indexer.request_check,
        )

    def _check_open(self) -> None:
        if self._closed_status is not None:
            raise WorkspaceError("workspace retrieval is closed", "closed")

    def close(self, timeout: float = DEFAULT_CLOSE_TIMEOUT_S) -> WorkspaceStatus:
        """Cancel provider work, join the indexer (up to ``timeout`` seconds for a call in
        flight), release every partition and vector and close the root. Idempotent.

        :returns: the final status: state ``closed``, the counts as they stood at close,
            ``vector_bytes`` 0, ``release_rate`` and ``released``.
        """
        if self._closed_status is not None:
            return self._closed_status
        before = self.status()
        joined = self._indexer.close(timeout)
        self.catalog.release()
        self.root.close()
        rate = self.catalog.release_rate()
        self._closed_status = msgspec.structs.replace(
            before,
            state="closed",
            queue_depth=0,
            vector_bytes=0,
            release_rate=rate,
            released=joined and rate == 1.0,
        )
        return self._closed_status

    def __enter__(self) -> WorkspaceRetrieval:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
