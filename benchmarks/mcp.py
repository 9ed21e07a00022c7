"""Recall through the MCP server over streamable HTTP vs in-process, at 16,000 memories.

The synthetic corpus of the recall benchmark (``benchmarks.corpus``) is appended with sync
off. Then, in this order, in one run:

1. in-process, lexical: a session's ``recall_scoped`` (what the server's ``recall`` tool
   calls, RecallServed recorded) and ``engine.recall``, timed per call;
2. in-process, hybrid: the same with the bundled MiniLM (``--embeddings local``; every
   memory is embedded first and the vectors stay in the projection file);
3. ``memory-ledger mcp --http 127.0.0.1:PORT --embeddings none`` in a child process, warm:
   the SDK's ClientSession (streamable HTTP, bearer token) times each ``recall`` tool call
   end to end (client encode, HTTP, token check, the server's worker thread, reply parse);
4. the same server with ``--embeddings local`` (the model loaded once, the vectors of step 2
   reused; it is warm once recall reports the semantic channel ``ready``). Query embedding
   is included in both hybrid figures.

Targets (issue 14): over MCP, lexical p50 under 10 ms, hybrid p50 under 50 ms. Without the
``embeddings`` extra the hybrid parts are skipped, saying so.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from benchmarks.corpus import BENCH_NAMESPACE, fill, memories, queries, scratch
from benchmarks.results import median, percentile, print_table, save
from memory_ledger.commands import MemoryEngine
from memory_ledger.commands.embeddings.base import EmbeddingProvider
from memory_ledger.commands.recall.index import RecallScope
from memory_ledger.replay.mcp.tokens import new_token, token_entry_toml

REPO = Path(__file__).resolve().parents[1]


def local_provider() -> EmbeddingProvider | None:
    """The bundled MiniLM, or None without the ``embeddings`` extra."""
    try:
        from memory_ledger.commands.embeddings.local import SentenceTransformerProvider

        return SentenceTransformerProvider()
    except ImportError:
        return None


def timed(call: Callable[[], object], count: int) -> list[float]:
    values = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        values.append((time.perf_counter() - started) * 1000)
    return values


def in_process(
    folder: Path, asked: list[str], k: int, provider: EmbeddingProvider | None
) -> dict[str, list[float]]:
    """Per-call ms of a session's recall_scoped and of engine.recall, warm."""
    with MemoryEngine.open(folder, embeddings=provider, index_in_background=False) as engine:
        if provider is not None:
            engine.index_vectors()
        session = engine.session(BENCH_NAMESPACE, "bench-in-process")
        for q in asked[:20]:
            session.recall_scoped(q, None, RecallScope(), k=k)
            engine.recall(BENCH_NAMESPACE, q, k)
        out: dict[str, list[float]] = {"session": [], "engine": []}
        for q in asked:
            out["session"] += timed(
                lambda q=q: session.recall_scoped(q, None, RecallScope(), k=k), 1
            )
            out["engine"] += timed(lambda q=q: engine.recall(BENCH_NAMESPACE, q, k), 1)
        session.close()
    return out


class ServerProcess:
    """``memory-ledger mcp --http`` on a free port of 127.0.0.1, in a child process."""

    def __init__(self, folder: Path, tokens: Path, embeddings: str) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memory_ledger.replay",
                "mcp",
                "--store",
                str(folder),
                "--http",
                f"127.0.0.1:{self.port}",
                "--tokens",
                str(tokens),
                "--embeddings",
                embeddings,
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": path},
        )
        self.ready = threading.Event()
        self.log: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.log.append(line)
            if "serving" in line:
                self.ready.set()
        self.ready.set()

    def wait(self, timeout: float = 300) -> None:
        self.ready.wait(timeout)
        if self.process.poll() is not None or not self.ready.is_set():
            raise SystemExit("the MCP server did not start:\n" + "".join(self.log)[-3000:])

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


async def over_mcp(url: str, token: str, asked: list[str], k: int, hybrid: bool) -> list[float]:
    """Per-call ms of the ``recall`` tool through a warm server (ClientSession, HTTP)."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=120) as client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                deadline = time.monotonic() + 600
                while True:  # warm: the index built, the model's first calls, vectors ready
                    result = await session.call_tool("recall", {"query": asked[0], "k": k})
                    state = (result.structured_content or {}).get("semantic")
                    if not hybrid or state == "ready" or time.monotonic() > deadline:
                        break
                    await anyio.sleep(0.5)
                if hybrid and state != "ready":
                    raise SystemExit(f"the server's semantic channel is {state!r}, not ready")
                for q in asked[:20]:
                    await session.call_tool("recall", {"query": q, "k": k})
                values = []
                for q in asked:
                    started = time.perf_counter()
                    result = await session.call_tool("recall", {"query": q, "k": k})
                    values.append((time.perf_counter() - started) * 1000)
                    assert not result.is_error
    return values


def served(
    folder: Path, tokens: Path, token: str, embeddings: str, asked: list[str], k: int
) -> list[float]:
    server = ServerProcess(folder, tokens, embeddings)
    try:
        server.wait()
        return anyio.run(over_mcp, server.url, token, asked, k, embeddings != "none")
    finally:
        server.stop()


def stats(values: list[float]) -> dict[str, float]:
    return {"p50_ms": median(values), "p99_ms": percentile(values, 99), "samples": len(values)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks mcp", description=__doc__)
    parser.add_argument("--size", type=int, default=16_000, help="memories (16,000)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("-k", type=int, default=5)
    parser.add_argument(
        "--embeddings",
        choices=("auto", "none"),
        default="auto",
        help="auto: also hybrid with the bundled MiniLM when the extra is installed",
    )
    parser.add_argument("--quick", action="store_true", help="500 memories, 30 queries")
    args = parser.parse_args(argv)
    if args.quick:
        args.size, args.queries = 500, 30
    corpus = memories(args.size)
    asked = queries(corpus, args.queries)
    provider = local_provider() if args.embeddings == "auto" else None
    figures: dict[str, Any] = {"memories": args.size, "queries": len(asked), "k": args.k}
    rows: list[tuple[str, str]] = [("columns", "p50 / p99 ms")]
    with scratch("bench_mcp_") as folder:
        store = folder / "store"
        with MemoryEngine.open(store, sync=False) as engine:
            fill(engine, corpus)
        token = new_token()
        tokens = folder / "tokens.toml"
        tokens.write_text(token_entry_toml("bench", token, BENCH_NAMESPACE))
        modes = [("lexical", "none", None)]
        if provider is not None:
            modes.append(("hybrid", "local", provider))
        elif args.embeddings == "none":
            rows.append(("hybrid", "skipped (--embeddings none)"))
        else:
            rows.append(("hybrid", "skipped: the embeddings extra is not installed"))
        for label, flag, chosen in modes:
            local = in_process(store, asked, args.k, chosen)
            remote = served(store, tokens, token, flag, asked, args.k)
            figures[label] = {
                "mcp_http": stats(remote),
                "in_process_session": stats(local["session"]),
                "in_process_engine": stats(local["engine"]),
            }
            overhead = median(remote) - median(local["session"])
            figures[label]["mcp_overhead_p50_ms"] = overhead
            for name, values in (
                (f"{label}: MCP recall tool over HTTP", remote),
                (f"{label}: in-process session.recall_scoped", local["session"]),
                (f"{label}: in-process engine.recall", local["engine"]),
            ):
                rows.append((name, f"{median(values):.2f} / {percentile(values, 99):.2f}"))
            rows.append((f"{label}: MCP overhead at p50", f"{overhead:.2f}"))
    targets = {"lexical": 10.0, "hybrid": 50.0}
    for label, limit in targets.items():
        if label in figures:
            met = figures[label]["mcp_http"]["p50_ms"] < limit
            figures[label][f"target_p50_lt_{limit:g}ms_met"] = met
            rows.append(
                (f"target: {label} p50 < {limit:g} ms over MCP", "met" if met else "MISSED")
            )
    if provider is not None:
        figures["model"] = provider.descriptor.model_key()
    print_table(
        f"MCP recall over streamable HTTP vs in-process, {args.size:,} memories "
        f"(k = {args.k}, {len(asked)} queries)",
        rows,
    )
    print(f"figures written to {save('mcp', figures)}")
    return 0
