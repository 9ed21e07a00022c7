"""``memory-ledger recall``: the top memories of one namespace for a query, now or as of an
earlier point. With an embeddings provider it waits a bounded time for vectors, then answers
lexically (saying so once, naming the endpoint's host and the cause) rather than stall."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import typer

from memory_ledger.commands.config import MemoryConfig, load_config_from
from memory_ledger.ledger.errors import InvalidArgumentError
from memory_ledger.ledger.ids import Namespace
from memory_ledger.replay.audit.points import parse_point
from memory_ledger.replay.cli import common
from memory_ledger.replay.cli.common import (
    Embeddings,
    JsonOption,
    LedgerOption,
    MasterKeyFileOption,
    PrincipalOption,
    ScopeOption,
    StoreOption,
    TenantOption,
)
from memory_ledger.replay.cli.terminal_text import Table, echoed, escape

if TYPE_CHECKING:  # the engine's modules are imported when recall runs
    from memory_ledger.commands.embeddings.base import EmbeddingError
    from memory_ledger.commands.engine.memory_engine import MemoryEngine
    from memory_ledger.commands.recall.index import RecallResult

__all__ = ["WAIT_SECONDS", "Embeddings", "endpoint_host", "recall"]

WAIT_SECONDS = 2.0
"""How long ``recall`` waits by default for missing vectors before answering lexically."""

_STOP_WAITING = 0.2
"""Seconds given to a failing indexer's request in flight once the answer is lexical."""


def endpoint_host(config: MemoryConfig) -> str | None:
    """``host[:port]`` of the configured OpenAI-compatible embeddings endpoint (never its
    path, query, user info or key); None for the local model."""
    if config.embeddings != "openai":
        return None
    import httpx

    try:
        url = httpx.URL(config.embeddings_base_url)
    except httpx.InvalidURL:
        return "?"
    return f"{url.host}:{url.port}" if url.port else url.host


_URL = re.compile(r"https?://\S+")


def _provider(host: str | None) -> str:
    return "the local embeddings model" if host is None else f"embeddings endpoint {host}"


def _cause(error: EmbeddingError, host: str | None) -> str:
    """The error's message with every URL in it replaced by ``host`` (no path, no query)."""
    return f"{_URL.sub(host or 'local', ' '.join(str(error).split()))} [{error.reason_code}]"


def _lexical(engine: MemoryEngine, namespace: Namespace, query: str, k: int) -> RecallResult:
    from memory_ledger.commands.recall.index import RecallResult

    ranked, _, position = engine.canonical_candidates(namespace, query, k, semantic=False)
    hits = [doc.hit(rank, score) for rank, (doc, score) in enumerate(ranked, 1)]
    return RecallResult(query=query, results=tuple(hits), position=position)


def _recall_now(
    engine: MemoryEngine,
    namespace: Namespace,
    query: str,
    k: int,
    wait: float,
    host: str | None,
) -> tuple[RecallResult, str | None]:
    """The answer, and a warning when it had to be lexical although embeddings are on.

    Waits up to ``wait`` seconds for the namespace's vectors. Hybrid when they are ready,
    or when the indexer is still making progress without failing; otherwise lexical, and
    the indexer is stopped (no retry keeps the process alive).
    """
    channel, indexer = engine.semantic, engine.indexer
    if channel is None or indexer is None:
        return engine.recall(namespace, query, k), None
    before = indexer.embedded
    ready = engine.wait_for_vectors(wait, namespace)
    failure = channel.last_error
    if ready or (failure is None and indexer.embedded > before):
        result = engine.recall(namespace, query, k)
        status = result.semantic
        if status is not None and status.state == "degraded":
            return result, (
                f"answered lexically: {_provider(host)} could not embed the query [{status.reason}]"
            )
        return result, None
    from memory_ledger.commands.recall.semantic_status import SemanticStatus

    indexer.close(_STOP_WAITING)
    coverage = channel.status(namespace)
    result = _lexical(engine, namespace, query, k)
    reason = failure.reason_code if failure is not None else "timeout"
    status = SemanticStatus(
        state="degraded",
        model=coverage.model,
        retrievable=coverage.retrievable,
        embedded=coverage.embedded,
        reason=reason,
    )
    if failure is not None:
        note = f"answered lexically: {_cause(failure, host)}"
    else:
        note = (
            f"answered lexically: no vectors from {_provider(host)} within {wait:g} s "
            f"({coverage.embedded} of {coverage.retrievable} memories embedded; "
            "wait longer with --wait)"
        )
    return msgspec.structs.replace(result, semantic=status), note


def recall(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(metavar="QUERY", help="What to recall.")],
    tenant: TenantOption,
    principal: PrincipalOption,
    scope_id: ScopeOption,
    store: StoreOption = None,
    ledger: LedgerOption = None,
    master_key_file: MasterKeyFileOption = None,
    k: Annotated[
        int | None,
        typer.Option(
            "-k",
            min=1,
            help="How many results, at most recall_max_k of memory-ledger.toml (else 50; "
            "more is refused). Default: recall_k of memory-ledger.toml, else 5.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
    at: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            metavar="POSITION|TIMESTAMP",
            help="Answer as the store would have at this position or time (lexical).",
        ),
    ] = None,
    occurred: Annotated[
        bool,
        typer.Option(
            "--occurred", help="Read the --as-of timestamp as conversation (occurred) time."
        ),
    ] = False,
    embeddings: Annotated[
        Embeddings,
        typer.Option(
            "--embeddings",
            help="config: what memory-ledger.toml says (default: lexical); none: lexical "
            "BM25 only; local: hybrid with the bundled MiniLM (the embeddings extra); lite: "
            "hybrid with the bundled multilingual e5 without PyTorch (the embeddings-lite "
            "extra).",
        ),
    ] = Embeddings.config,
    wait: Annotated[
        float,
        typer.Option(
            "--wait",
            metavar="SECONDS",
            min=0,
            help="With embeddings: wait this long for missing vectors; then, if the "
            "provider failed or made no progress, answer lexically (said once on stderr).",
        ),
    ] = WAIT_SECONDS,
) -> None:
    """Recall canonical memories of one namespace (BM25, or hybrid with embeddings), now or
    --as-of an earlier point."""
    from memory_ledger.commands.engine.memory_engine import MemoryEngine
    from memory_ledger.commands.recall.policy import check_recall_k

    past: dict[str, Any] | None = None
    note: str | None = None
    with common.user_errors():
        namespace = Namespace(tenant, principal, scope_id).validated()
        if occurred and at is None:
            msg = "--occurred needs --as-of TIMESTAMP"
            raise InvalidArgumentError(msg, parameter="--occurred")
        point = parse_point(at, "--as-of") if at is not None else None
        config = common.settings(ctx)
        if embeddings is not Embeddings.config or at is not None:  # as-of recall is lexical
            wanted = embeddings.value if at is None else "none"
            config = load_config_from(config, embeddings=wanted)
        count = check_recall_k(k, config.recall_max_k) if k is not None else config.recall_k
        folder = common.store_folder(store, config)
        with MemoryEngine.open(folder, create=False, config=config) as engine:
            if point is None:
                result, note = _recall_now(
                    engine, namespace, query, count, wait, endpoint_host(config)
                )
            else:
                from memory_ledger.replay.audit.past_recall import recall_point

                with recall_point(engine, point, occurred=occurred, verify=True) as then:
                    result = then.recall(namespace, query, count)
                    past = then.describe()
    if note is not None:
        common.err.print(f"[yellow]warning:[/] {escape(note)}", highlight=False, soft_wrap=True)
    if as_json:
        common.print_json(_payload(result, past))
        return
    common.out.print(_table(query, result, past))


def _payload(result: RecallResult, past: dict[str, Any] | None) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "query": echoed(result.query),  # the user's input, as the title shows it
        "position": result.position,
        "results": [
            {
                "rank": hit.rank,
                "memory_id": hit.memory_id,
                "statement": hit.statement,
                "subject": hit.subject,
                "score": hit.score,
                "evidence": list(hit.evidence),
                "occurred_at": hit.occurred_at,
            }
            for hit in result.results
        ],
    }
    if past is not None:
        payload["as_of"] = past
    if result.semantic is not None:
        payload["semantic"] = msgspec.to_builtins(result.semantic)
    return payload


def _table(query: str, result: RecallResult, past: dict[str, Any] | None) -> Table:
    title = f"recall {query!r} (position {result.position})"
    if past is not None and past["mode"] == "position":
        title = f"recall {query!r} as of position {past['position']}"
    elif past is not None:
        title = (
            f"recall {query!r} as of {past['at']} ({past['mode']} time, "
            f"position {past['position']})"
        )
    table = Table(title=title)
    for column in ("rank", "score", "subject", "statement", "evidence", "occurred_at"):
        table.add_column(column)
    for hit in result.results:
        table.add_row(
            str(hit.rank),
            f"{hit.score:.3f}",
            hit.subject or "",
            hit.statement,
            ", ".join(hit.evidence),
            common.clock(hit.occurred_at),
        )
    return table
