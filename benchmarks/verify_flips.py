"""Verify flips: one-byte changes of random ledger records, each named by ``verify``.

``python -m benchmarks verify_flips [--flips N] [--seed S] [--audit-every K] [--quick]``
builds two stores (the quickstart script, in clear; and an encrypted one where a namespace
was erased, so it holds erased, live and ``NamespaceErased`` records), then N times copies
one, changes one byte of one record of its LMDB ``log`` (its stored hash, its body's msgpack
header or its payload; any record, the last one included) and checks that
``verify_path`` without and with the master key, and ``memory-ledger verify --json``, answer
"not ok" naming that record's position, and (every K-th flip) that ``export``, ``as-of``,
``explain`` and ``stats`` either answer or raise a typed error (``MemoryLedgerError`` with a
``reason_code``) naming it. It prints how many flips were tried, per kind of record and
part, and every failure. The CI profile of the same property is
``tests/replay/test_verify_flips.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import lmdb
import msgspec

import memory_ledger
from benchmarks.results import save
from memory_ledger.ledger.errors import MemoryLedgerError
from memory_ledger.ledger.records import HASH_SIZE, decode_body
from memory_ledger.ledger.sealing import is_sealed, sealed_key_id
from memory_ledger.replay.scripts.script import parse_script, run_script

REPO = Path(__file__).resolve().parent.parent
QUICKSTART = REPO / "examples" / "quickstart.jsonl"
ALICE = memory_ledger.Namespace("acme", "alice", "chat")
BOB = memory_ledger.Namespace("acme", "bob", "chat")

Part = Literal["hash", "header", "payload"]
"""Where a flipped byte is: the stored hash (32 bytes), the body's msgpack before the
payload (array, id, version, topic and the payload's own header), or the payload."""


class Flip(msgspec.Struct, frozen=True):
    """One change: ``value[offset] ^= xor`` in the record at ``position`` (``xor`` != 0)."""

    position: int
    offset: int
    xor: int


class Ledger(msgspec.Struct, frozen=True, kw_only=True):
    """A built store: its folder, its master key (None: in clear), its records by position
    and the kind of each (``live``, ``erased``, ``NamespaceErased``; ``last`` is the head)."""

    store: Path
    master_key: bytes | None
    records: dict[int, bytes]
    kinds: dict[int, str]
    memory_id: str


def read_log(store: Path) -> dict[int, bytes]:
    """Every record of the store's LMDB ``log`` (position -> stored hash + body)."""
    env = lmdb.open(str(store / "ledger"), max_dbs=32, readonly=True, lock=False)
    try:
        db = env.open_db(b"log", create=False)
        with env.begin() as txn:
            return {int.from_bytes(k, "big"): bytes(v) for k, v in txn.cursor(db=db)}
    finally:
        env.close()


def write_record(store: Path, position: int, value: bytes) -> None:
    """Overwrite one record of the store's LMDB ``log`` in place (the tamper)."""
    env = lmdb.open(str(store / "ledger"), max_dbs=32)
    try:
        db = env.open_db(b"log", create=False)
        with env.begin(write=True) as txn:
            txn.put(position.to_bytes(8, "big"), value, db=db)
    finally:
        env.close()


def part_of(value: bytes, offset: int) -> Part:
    """Which part of a stored record ``offset`` falls in."""
    if offset < HASH_SIZE:
        return "hash"
    state = decode_body(value[HASH_SIZE:])[3]
    return "payload" if offset >= len(value) - len(state) else "header"


def _kinds(records: dict[int, bytes], erased_keys: set[bytes]) -> dict[int, str]:
    kinds: dict[int, str] = {}
    for position, value in records.items():
        _, _, topic, state = decode_body(value[HASH_SIZE:])
        if topic.endswith("NamespaceErased"):
            kinds[position] = "NamespaceErased"
        elif is_sealed(state) and sealed_key_id(state) in erased_keys:
            kinds[position] = "erased"
        else:
            kinds[position] = "live"
    return kinds


def build_plain(folder: Path) -> Ledger:
    """The quickstart script's store, in clear."""
    store = folder / "plain"
    with memory_ledger.open(store) as engine:
        run_script(engine, parse_script(QUICKSTART.read_text().splitlines()))
        memory_id = str(
            engine.recall(memory_ledger.Namespace("demo", "alice", "assistant"), "espresso")[
                0
            ].memory_id
        )
    records = read_log(store)
    return Ledger(
        store=store,
        master_key=None,
        records=records,
        kinds=_kinds(records, set()),
        memory_id=memory_id,
    )


def build_encrypted(folder: Path) -> Ledger:
    """An encrypted store of two namespaces where alice's was erased, then bob's written."""
    store = folder / "encrypted"
    key = os.urandom(32)
    with memory_ledger.open(store, master_key=key) as engine:
        for ns in (ALICE, BOB):
            kept = engine.remember(ns, f"{ns.principal} drinks quokkafruit tea.")
            engine.remember(ns, f"{ns.principal} lives in Lisbon.")
        engine.erase("acme", "alice")
        engine.remember(BOB, "bob moved to Porto.")  # a live record after the erasure
        erased_keys = {r.key_id.bytes for r in engine.keyring.records() if r.erased}
    records = read_log(store)
    return Ledger(
        store=store,
        master_key=key,
        records=records,
        kinds=_kinds(records, erased_keys),
        memory_id=str(kept.memory_id),
    )


def random_flip(ledger: Ledger, rng: random.Random) -> Flip:
    """A flip of a random byte of a random record, its part drawn evenly first."""
    position = rng.choice(sorted(ledger.records))
    value = ledger.records[position]
    state = decode_body(value[HASH_SIZE:])[3]
    start = len(value) - len(state)
    part = rng.choice(("hash", "header", "payload"))
    offset = {
        "hash": lambda: rng.randrange(HASH_SIZE),
        "header": lambda: rng.randrange(HASH_SIZE, start),
        "payload": lambda: rng.randrange(start, len(value)),
    }[part]()
    return Flip(position, offset, rng.randrange(1, 256))


def flipped_copy(ledger: Ledger, flip: Flip, into: Path) -> Path:
    """A copy of ``ledger``'s store under ``into`` with ``flip`` applied."""
    store = into / "store"
    shutil.rmtree(store, ignore_errors=True)
    shutil.copytree(ledger.store, store)
    value = bytearray(ledger.records[flip.position])
    value[flip.offset] ^= flip.xor
    write_record(store, flip.position, bytes(value))
    return store


def verify_problems(ledger: Ledger, flip: Flip, store: Path, *, cli: bool) -> list[str]:
    """What ``verify`` got wrong about ``flip`` applied to ``store`` ([]: nothing)."""
    from memory_ledger.replay.audit.verify import verify_ledger, verify_path

    problems: list[str] = []
    keys: list[bytes | None] = [None] if ledger.master_key is None else [None, ledger.master_key]
    for key in keys:
        # In process: a record flip rewrites the record through LMDB, so no page is damaged
        # (the child walk of the CLI is checked by _cli_problems).
        report = verify_path(store, master_key=key, isolate=False)
        if report.ok or report.first_bad_position != flip.position:
            problems.append(f"verify_path(key={key is not None}) answered {report}")
    report = verify_ledger(store)
    if report.ok or report.first_bad_position != flip.position:
        problems.append(f"verify_ledger answered {report}")
    if cli:
        problems += _cli_problems(ledger, flip, store)
    return problems


def _cli_problems(ledger: Ledger, flip: Flip, store: Path) -> list[str]:
    from typer.testing import CliRunner

    from memory_ledger.replay.cli.app import app

    problems: list[str] = []
    key_args: list[list[str]] = [[]]
    if ledger.master_key is not None:
        key_file = store.parent / "master.key"
        key_file.write_bytes(ledger.master_key)
        key_args.append(["--master-key-file", str(key_file)])
    for extra in key_args:
        result = CliRunner().invoke(app, ["verify", "--store", str(store), "--json", *extra])
        try:
            named = json.loads(result.stdout).get("first_bad_position")
        except ValueError:
            named = None
        if result.exit_code != 1 or named != flip.position or "Traceback" in result.output:
            problems.append(
                f"memory-ledger verify {' '.join(extra)} exit {result.exit_code}: "
                f"{result.stdout.strip()} {result.stderr.strip()}"
            )
    return problems


def audit_problems(ledger: Ledger, flip: Flip, store: Path) -> list[str]:
    """What ``export``, ``as-of``, ``explain`` and ``stats`` got wrong about a damaged
    ``store``: each either answers (explain checks only the records it shows, stats none)
    or raises a typed error naming ``flip.position``; export and as-of of the head always
    refuse."""
    from memory_ledger.replay.audit.export import export_store
    from memory_ledger.replay.audit.lineage import explain
    from memory_ledger.replay.audit.stats import store_stats
    from memory_ledger.replay.audit.timetravel import as_of

    head = max(ledger.records)
    calls: dict[str, tuple[Callable[[Any], object], bool]] = {
        "export": (lambda engine: export_store(engine, store.parent / "export"), True),
        "as-of": (lambda engine: as_of(engine, head).close(), True),
        "explain": (lambda engine: explain(engine, ledger.memory_id), False),
        "stats": (store_stats, False),
    }
    problems: list[str] = []
    for name, (call, must_refuse) in calls.items():
        shutil.rmtree(store.parent / "export", ignore_errors=True)
        try:
            with memory_ledger.open(store, create=False, master_key=ledger.master_key) as engine:
                call(engine)
        except MemoryLedgerError as e:
            position = getattr(e, "position", None)
            if position != flip.position or not e.reason_code:
                problems.append(f"{name}: {type(e).__name__} names {position}: {e}")
            continue
        except Exception as e:  # noqa: BLE001 (the property: nothing untyped)
            problems.append(f"{name}: untyped {type(e).__name__}: {e}")
            continue
        if must_refuse:
            problems.append(f"{name}: answered on a damaged store")
    return problems


def run_flips(
    ledgers: list[Ledger], flips: int, seed: int, *, audit_every: int, work: Path
) -> tuple[Counter[tuple[str, str, str]], list[str]]:
    """Try ``flips`` random flips over ``ledgers``; ``(tried per (store, kind, part),
    failures)``."""
    rng = random.Random(seed)
    tried: Counter[tuple[str, str, str]] = Counter()
    failures: list[str] = []
    for number in range(flips):
        ledger = ledgers[number % len(ledgers)]
        flip = random_flip(ledger, rng)
        value = ledger.records[flip.position]
        kind = ledger.kinds[flip.position]
        kind += " (last)" if flip.position == max(ledger.records) else ""
        tried[(ledger.store.name, kind, part_of(value, flip.offset))] += 1
        store = flipped_copy(ledger, flip, work)
        problems = verify_problems(ledger, flip, store, cli=number % 10 == 0)
        if audit_every and number % audit_every == 0:
            problems += audit_problems(ledger, flip, store)
        failures += [f"{ledger.store.name} {flip}: {p}" for p in problems]
    return tried, failures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks verify_flips")
    parser.add_argument("--flips", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--audit-every", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="30 flips (the smoke test)")
    args = parser.parse_args(argv)
    flips = 30 if args.quick else args.flips
    with tempfile.TemporaryDirectory(prefix="ml-verify-flips-") as tmp:
        folder = Path(tmp)
        ledgers = [build_plain(folder), build_encrypted(folder)]
        started = time.perf_counter()
        tried, failures = run_flips(
            ledgers, flips, args.seed, audit_every=args.audit_every, work=folder / "work"
        )
        seconds = time.perf_counter() - started
    print(f"verify_flips: {sum(tried.values())} flips tried in {seconds:.1f} s (seed {args.seed})")
    for (store, kind, part), count in sorted(tried.items()):
        print(f"  {store:9} {kind:15} {part:7} {count}")
    print(f"failures: {len(failures)}")
    for failure in failures[:20]:
        print(f"  {failure}")
    figures = {
        "flips": sum(tried.values()),
        "seed": args.seed,
        "seconds": round(seconds, 1),
        "failures": len(failures),
        "by_store_kind_part": {" ".join(key): count for key, count in sorted(tried.items())},
    }
    print(f"figures written to {save('verify_flips', figures)}")
    return 1 if failures else 0
