"""The floor of a LangGraph batch of 100 puts: the per-item rules alone, beside PostgresStore.

``python -m benchmarks batch_floor [--batches 40] [--pg URL] [--quick]``

Issue 35 asks a ``LedgerStore.batch`` of 100 puts to cost no more than PostgresStore's
(one multi-row INSERT, its per-item work in C). This benchmark measures a lower bound for
ours that no orchestration change can go below: for each batch of 100 new values (the
values of ``python -m benchmarks serving``), the calling thread's CPU time of the engine's
own per-item functions, called directly with nothing around them:

- ``record``: the LangGraph record of each put (``writes._remember``: the value's JSON,
  its address, subject and tags: ``records.encode_record``);
- ``validation``: each remember's validation with the secret door's item question
  (``batch._spec``, which every direct remember passes: ``checked_remember``);
- ``bm25``: the BM25 analysis of each statement (``analyze_document``: tokens and stems),
  which makes a put searchable;

and the wall time of one durable LMDB transaction writing 200 hash-chained msgpack records
of the batch's statements (two records a put: the command and its activation), the same
``sync``/``metasync`` as the ledger. Their sum is what a batch costs before any event is
built, any id derived, any decision read or any read model applied. PostgresStore's whole
``batch`` of 100 (wall) and LedgerStore's (wall and thread CPU) are measured in the same run
on the same values. Medians over ``--batches`` batches, ms.

``--quick``: 3 batches (the smoke test's size). Figures go to ``results/batch_floor.json``.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import lmdb
import msgspec
from langgraph.store.base import BaseStore, PutOp

from benchmarks.langgraph_bench import PG_URL, ledger_store, postgres_store, value
from benchmarks.results import save
from memory_ledger.commands.engine.batch import _spec
from memory_ledger.commands.recall.lexical import analyze_document
from memory_ledger.replay.langgraph_store.writes import Put, _remember

NAMESPACE = ("users", "floor")


def _values(batch: int) -> list[dict[str, Any]]:
    return [value(500_000 + 100 * batch + i) for i in range(100)]


def _cpu(call: Callable[[], list[Any]]) -> tuple[float, list[Any]]:
    """Thread CPU (ms) of ``call`` and what it returned."""
    started = time.thread_time()
    result = call()
    return (time.thread_time() - started) * 1000, result


def _rules(batches: int) -> dict[str, list[float]]:
    """Thread CPU (ms) of the per-item rule functions over each batch of 100, called bare."""
    spent: dict[str, list[float]] = {"record": [], "validation": [], "bm25": []}
    for b in range(batches):
        puts = [
            Put(namespace=NAMESPACE, key=f"floor-{b}-{i}", value=v)
            for i, v in enumerate(_values(b))
        ]
        took, ops = _cpu(functools.partial(_records, puts))
        spent["record"].append(took)
        spent["validation"].append(_cpu(functools.partial(_validated, ops))[0])
        spent["bm25"].append(_cpu(functools.partial(_analyzed, ops))[0])
    return spent


def _records(puts: list[Put]) -> list[Any]:
    return [_remember(p) for p in puts]


def _validated(ops: list[Any]) -> list[Any]:
    return [_spec(op, f"ops[{i}]") for i, op in enumerate(ops)]


def _analyzed(ops: list[Any]) -> list[Any]:
    return [analyze_document(op.subject, op.statement) for op in ops]


def _lmdb_writes(batches: int) -> list[float]:
    """Wall time (ms) of one durable LMDB transaction of 200 chained records a batch."""
    folder = tempfile.mkdtemp(prefix="batch-floor-")
    encoder = msgspec.msgpack.Encoder()
    spent: list[float] = []
    try:
        env = lmdb.open(folder, map_size=1 << 30, sync=True, metasync=True)
        try:
            chain = bytes(32)
            position = 0
            for b in range(batches):
                bodies = [
                    encoder.encode({"statement": str(v), "kind": kind})
                    for v in _values(b)
                    for kind in ("command", "activated")
                ]
                started = time.perf_counter()
                with env.begin(write=True) as txn:
                    for body in bodies:
                        position += 1
                        chain = hashlib.sha256(chain + body).digest()
                        txn.put(position.to_bytes(8, "big"), chain + body, append=True)
                spent.append((time.perf_counter() - started) * 1000)
        finally:
            env.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return spent


def _store_batches(store: BaseStore, batches: int) -> tuple[list[float], list[float]]:
    """Wall and thread CPU (ms) of ``store.batch`` of 100 new puts, after 3 warm-up batches."""
    for b in range(3):
        store.batch([PutOp(NAMESPACE, f"warm-{b}-{i}", v) for i, v in enumerate(_values(b))])
    wall: list[float] = []
    cpu: list[float] = []
    for b in range(batches):
        ops = [PutOp(NAMESPACE, f"b-{b}-{i}", v) for i, v in enumerate(_values(b))]
        w0, c0 = time.perf_counter(), time.thread_time()
        store.batch(ops)
        cpu.append((time.thread_time() - c0) * 1000)
        wall.append((time.perf_counter() - w0) * 1000)
    return wall, cpu


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks batch_floor")
    parser.add_argument("--batches", type=int, default=40, help="batches measured (default 40)")
    parser.add_argument("--pg", default=PG_URL, help="PostgreSQL URL for PostgresStore")
    parser.add_argument("--quick", action="store_true", help="3 batches")
    args = parser.parse_args(argv)
    batches = 3 if args.quick else args.batches
    load = os.getloadavg()[0]
    med = statistics.median
    rules = _rules(batches)
    writes = _lmdb_writes(batches)
    floor = sum(med(v) for v in rules.values()) + med(writes)
    with ledger_store() as store:
        ours_wall, ours_cpu = _store_batches(store, batches)
    pg_wall: list[float] = []
    with postgres_store(args.pg) as pg:
        if pg is not None:
            pg_wall, _ = _store_batches(pg, batches)
    print(f"a LangGraph batch of 100 new puts, {batches} batches (ms, medians; load {load:.2f})")
    print(f"  record (thread CPU)                   {med(rules['record']):8.3f}")
    print(f"  validation + door item (thread CPU)   {med(rules['validation']):8.3f}")
    print(f"  BM25 analysis (thread CPU)            {med(rules['bm25']):8.3f}")
    print(f"  LMDB, 200 records, durable (wall)     {med(writes):8.3f}")
    print(f"  floor: their sum                      {floor:8.3f}")
    print(f"  LedgerStore.batch wall / thread CPU   {med(ours_wall):8.3f} / {med(ours_cpu):.3f}")
    if pg_wall:
        print(f"  PostgresStore.batch wall              {med(pg_wall):8.3f}")
        print(f"  floor / PostgresStore                 {floor / med(pg_wall):8.2f}")
    else:
        print("  PostgresStore: skipped (PostgreSQL or langgraph-checkpoint-postgres absent)")
    figures: dict[str, Any] = {
        "batches": batches,
        "load_average": load,
        "record_cpu_ms": med(rules["record"]),
        "validation_cpu_ms": med(rules["validation"]),
        "bm25_cpu_ms": med(rules["bm25"]),
        "lmdb_write_ms": med(writes),
        "floor_ms": floor,
        "ledger_store_batch_ms": med(ours_wall),
        "ledger_store_batch_cpu_ms": med(ours_cpu),
        "postgres_store_batch_ms": med(pg_wall) if pg_wall else None,
    }
    print(f"figures written to {save('batch_floor', figures)}")
    return 0


if __name__ == "__main__":
    import sys

    raise SystemExit(main(sys.argv[1:]))
