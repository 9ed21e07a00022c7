"""Verify file flips: one-byte changes ANYWHERE in the LMDB ledger file, never a crash.

``python -m benchmarks verify_file_flips [--flips N] [--seed S] [--quick]`` builds the
quickstart store (``benchmarks.verify_flips.build_plain``), then N times copies it, changes
one random byte of ``ledger/data.mdb`` (meta pages, branch and leaf pages, overflow pages,
free pages: anywhere) and runs ``verify_path`` (the ledger walk in a child process, as
``memory-ledger verify`` does). Each flip must end in a report (ok: the byte was unused or
on a free page; not ok: damage or a changed record named) or a typed error
(``MemoryLedgerError``); anything else (an untyped exception) is a failure. Prints the flips
per region of the file and outcome, and every failure. Each flip costs a child interpreter
(about a second): keep N small on a shared machine.
"""

from __future__ import annotations

import argparse
import random
import shutil
import struct
import tempfile
import time
from collections import Counter
from pathlib import Path

from benchmarks.results import save
from benchmarks.verify_flips import build_plain
from memory_ledger.ledger.errors import MemoryLedgerError

_PAGE = 4096
_FLAGS = ((0x08, "meta"), (0x01, "branch"), (0x02, "leaf"), (0x04, "overflow"))


def region(data: bytes, offset: int) -> str:
    """The kind of LMDB page holding byte ``offset`` of ``data``, by its header's flags
    (``"other"``: none of them, e.g. an overflow page's continuation)."""
    page = offset // _PAGE
    if page < 2:
        return "meta"
    flags = struct.unpack_from("<H", data, page * _PAGE + 10)[0]
    return next((name for bit, name in _FLAGS if flags & bit), "other")


def outcome(store: Path) -> tuple[str, str | None]:
    """``(outcome, failure)`` of ``verify_path`` on ``store``."""
    from memory_ledger.replay.audit.verify import verify_path

    try:
        report = verify_path(store)
    except MemoryLedgerError as e:
        return f"typed error {e.reason_code}", None
    except Exception as e:  # noqa: BLE001 (an untyped error is what this looks for)
        return "untyped error", f"{type(e).__name__}: {e}"
    if report.ok:
        return "ok", None
    return ("damaged" if report.damaged else "tampered"), None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks verify_file_flips")
    parser.add_argument("--flips", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="10 flips (the smoke test)")
    args = parser.parse_args(argv)
    flips = 10 if args.quick else args.flips
    rng = random.Random(args.seed)
    tried: Counter[tuple[str, str]] = Counter()
    failures: list[str] = []
    with tempfile.TemporaryDirectory(prefix="ml-verify-file-flips-") as tmp:
        folder = Path(tmp)
        source = build_plain(folder).store
        data = (source / "ledger" / "data.mdb").read_bytes()
        started = time.perf_counter()
        for _ in range(flips):
            offset, mask = rng.randrange(len(data)), rng.randrange(1, 256)
            store = folder / "work"
            shutil.rmtree(store, ignore_errors=True)
            shutil.copytree(source, store)
            flipped = bytearray(data)
            flipped[offset] ^= mask
            (store / "ledger" / "data.mdb").write_bytes(bytes(flipped))
            name, failure = outcome(store)
            tried[(region(data, offset), name)] += 1
            if failure is not None:
                failures.append(f"offset {offset} ^ {mask}: {failure}")
        seconds = time.perf_counter() - started
    print(f"verify_file_flips: {flips} flips of {len(data)} bytes in {seconds:.1f} s")
    for (where, name), count in sorted(tried.items()):
        print(f"  {where:9} {name:32} {count}")
    print(f"failures: {len(failures)}")
    for failure in failures[:20]:
        print(f"  {failure}")
    figures = {
        "flips": flips,
        "seed": args.seed,
        "seconds": round(seconds, 1),
        "failures": len(failures),
        "by_region_outcome": {" / ".join(key): count for key, count in sorted(tried.items())},
    }
    print(f"figures written to {save('verify_file_flips', figures)}")
    return 1 if failures else 0
