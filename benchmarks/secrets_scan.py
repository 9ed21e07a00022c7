"""Secret detection speed on 2,000-character transcripts, beside a plain tokenizer pass.

Both run over the same texts in the same process: LoCoMo dialogue cut into 2,000-character
transcripts (``../shared/data/locomo/locomo7.json`` or ``$LOCOMO_PATH``; a synthetic chat
when absent). The baseline is ``projections.text_index.tokenize`` (one regex pass plus
Unicode normalization), so the ratio says how many tokenizer passes a scan costs.
"""

from __future__ import annotations

import argparse
import json
import time

from benchmarks.locomo.source import locomo_path
from benchmarks.results import median, print_table, save
from memory_ledger.commands.secrets import find_secrets
from memory_ledger.projections.text_index import tokenize


def transcripts(limit: int) -> list[str]:
    path = locomo_path()
    text = ""
    if path is not None:
        for sample in json.loads(path.read_text()):
            conversation = sample["conversation"]
            for key, turns in conversation.items():
                if key.startswith("session_") and isinstance(turns, list):
                    text += "\n".join(f"{t['speaker']}: {t['text']}" for t in turns) + "\n"
    if not text:
        text = "user: I went hiking with my sister and we saw a waterfall.\n" * 2000
    return [text[i : i + 2000] for i in range(0, len(text) - 2000, 2000)][:limit]


def timed(fn: object, texts: list[str]) -> list[float]:
    call = fn  # type: ignore[assignment]
    result = []
    for text in texts:
        start = time.perf_counter()
        call(text)  # type: ignore[operator]
        result.append(time.perf_counter() - start)
    return result


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks secrets", description=__doc__)
    parser.add_argument("--texts", type=int, default=300)
    parser.add_argument("--quick", action="store_true", help="100 transcripts")
    args = parser.parse_args(argv)
    texts = transcripts(100 if args.quick else args.texts)
    timed(find_secrets, texts[:20])
    scan = median(timed(find_secrets, texts))
    base = median(timed(tokenize, texts))
    figures = {
        "texts": len(texts),
        "scan_median_ms": scan * 1000,
        "tokenize_median_ms": base * 1000,
        "scan_over_tokenize": scan / base,
    }
    print_table(
        "secret detection on 2,000-character transcripts (medians)",
        [
            ("transcripts", str(len(texts))),
            ("find_secrets", f"{scan * 1000:.3f} ms"),
            ("tokenize (baseline)", f"{base * 1000:.3f} ms"),
            ("scan / tokenize", f"{scan / base:.2f}"),
        ],
    )
    print(f"figures written to {save('secrets', figures)}")
    return 0
