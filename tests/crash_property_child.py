"""Fork server and operation runner for ``tests/crash/test_crash_property.py``.

Run from the repository root as ``python -m tests.crash_property_child``. The server imports
everything once, single-threaded (the parent sets ``OMP_NUM_THREADS=1`` and turns off
pyarrow's jemalloc background thread, so ``fork`` copies no thread), never opens a store,
and then serves one request per stdin line (JSON)::

    {"store": DIR, "ops": [...], "start": I, "kill": {"op": K, "point": P, "nth": N} | null,
     "page_size": S, "master_key": HEX | null}

(``master_key``: the store is encrypted at rest with that key; absent or null: in clear.)

For each request it forks a worker and waits for it; a worker costs a ``fork`` and an engine
open instead of an interpreter start. The worker opens the store (durable sync on), runs
``ops[start:]`` through :class:`OpRunner` and acknowledges on stdout, one JSON line per
message, each written with one ``os.write`` (the server writes nothing while a worker runs):

- ``{"kind": "worker", "pid"}`` first;
- ``{"kind": "batch", "after", "events"}`` right before every ledger append (the head before
  it and ``[class, originator id, version]`` of each event) and ``{"kind": "appended",
  "positions"}`` when the append returned (durable: acknowledged);
- ``{"kind": "op", "index"}`` before an operation and ``{"kind": "op_done", "index",
  "result"}`` after it returned;
- ``{"kind": "at_fault", "point", "index"}`` at the kill point, after which the worker sleeps
  until the parent SIGKILLs it. The kill point is the ``nth`` call of fault point ``point``
  (``ledger.faults``) counted from the start of operation ``op``; with point ``between``, or
  when operation ``op`` returns before the ``nth`` call, the worker stops right after ``op``
  (``point`` is then ``between`` or ``after_op``). With point ``timer`` the parent kills the
  worker a delay after operation ``op`` started, wherever it is then (or after ``op``);
- ``{"kind": "finished", "head"}`` when every operation ran (no kill requested);
- ``{"kind": "error", "traceback"}`` on an unexpected exception.

The server then writes ``{"kind": "exit", "pid", "code"}`` (``-9`` after a SIGKILL).

:class:`OpRunner` is also used in-process by the parent, for the uninterrupted run that the
crashed store is compared with.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.commands.extraction import RecordedExtractor
from memory_ledger.commands.session import MemorySession
from memory_ledger.ledger import faults
from memory_ledger.ledger.events import LedgerEvent
from memory_ledger.ledger.ids import Namespace

NAMESPACES = [
    Namespace("acme", "alice", "chat"),
    Namespace("globex", "bob", "chat"),
    Namespace("acme", "carol", "chat"),
]
"""Two tenants, and two principals of one tenant."""

STALL_SECONDS = 120.0
PRUNE_MAX_IMPORTANCE = 0.85
PRUNE_MAX_USES = 10**6
"""Prune by importance only: recall counters (which lost read records change) never decide."""

Op = dict[str, Any]
Emit = Callable[..., None]


def identity(event: LedgerEvent) -> list[Any]:
    """``[class name, originator id, originator version]`` of an event."""
    return [type(event).__name__, str(event.originator_id), event.originator_version]


def emit(**message: Any) -> None:
    """One JSON line on stdout in one ``write`` (no Python buffering: safe after fork)."""
    data = (json.dumps(message) + "\n").encode()
    view = memoryview(data)
    while view:
        written = os.write(1, view)
        view = view[written:]


class OpRunner:
    """Runs the crash test's operations through the public API of one store.

    :param emit: acknowledgement callback; when given, every ledger append is announced
        before it starts and acknowledged when it returned.
    :param master_key: open the store with this master key (encryption at rest).
    """

    def __init__(
        self,
        store: str | Path,
        *,
        sync: bool,
        page_size: int,
        emit: Emit | None = None,
        master_key: bytes | None = None,
    ) -> None:
        self.store = store
        self.master_key = master_key
        self.sync = sync
        self.page_size = page_size
        self.emit = emit
        self.sessions: dict[tuple[int, str], tuple[MemorySession, RecordedExtractor]] = {}
        self.engine = self._open()

    def _open(self) -> MemoryEngine:
        engine = MemoryEngine.open(self.store, sync=self.sync, master_key=self.master_key)
        engine.runner.page_size = self.page_size
        if self.emit is not None:
            announce = self.emit
            original = engine.append

            def append(events: Sequence[LedgerEvent], **kwargs: Any) -> list[int]:
                announce(kind="batch", after=engine.head, events=[identity(e) for e in events])
                positions = original(events, **kwargs)
                announce(kind="appended", positions=positions)
                return positions

            engine.append = append  # type: ignore[method-assign]
        return engine

    def session(self, ns: int, sid: str) -> tuple[MemorySession, RecordedExtractor]:
        key = (ns, sid)
        if key not in self.sessions:
            extractor = RecordedExtractor()
            session = self.engine.session(NAMESPACES[ns], sid, extractor=extractor)
            self.sessions[key] = (session, extractor)
        return self.sessions[key]

    def close(self) -> None:
        for session, _ in self.sessions.values():
            session.close()
        self.sessions.clear()
        self.engine.close()

    def run(self, op: Op) -> dict[str, Any]:
        """Run one operation; return what it reported (typed refusals included)."""
        kind = op["op"]
        if kind == "reopen":
            self.close()
            self.engine = self._open()
            return {}
        if kind == "flush":
            return {"flushed": sum(s.flush_reads() for s, _ in self.sessions.values())}
        session, extractor = self.session(op["ns"], op["sid"])
        try:
            if kind == "observe":
                extractor.provide(op["turn"], op["items"])
                out = session.observe_final_transcript(op["turn"], op["transcript"])
                return {
                    "evidence": out.evidence_position,
                    "extraction": out.extraction_position,
                    "candidates": out.candidates,
                    "rejected": out.rejected,
                    "already": out.already_observed,
                }
            if kind == "command":
                result = session.apply_explicit_command(op["intent"], op["statement"], op["turn"])
                return {
                    "command_id": str(result.command_id),
                    "position": result.position,
                    "already": result.already_applied,
                }
            if kind == "recall":
                return self._recall(session, op)
            if kind == "finish":
                report = session.finish()
                return {
                    "already": report.already_reconciled,
                    "position": report.position,
                    "activated": sorted(str(m) for m in report.activated),
                }
            if kind == "prune":
                pruned = session.prune(max_importance=PRUNE_MAX_IMPORTANCE, max_uses=PRUNE_MAX_USES)
                return {"pruned": sorted(str(m) for m in pruned)}
        except MemoryLedgerError as e:
            return {"refused": type(e).__name__, "reason": getattr(e, "reason_code", "")}
        raise ValueError(f"unknown operation {op!r}")

    def _recall(self, session: MemorySession, op: Op) -> dict[str, Any]:
        turn = op["turn"]
        result: dict[str, Any] = {}
        if op["prepare"]:
            session.prepare(turn, op["query"])
            session.begin_turn(turn)
        served = session.recall(op["query"], turn)
        result["hits"] = [[h.memory_id, h.origin, h.statement] for h in served.results]
        if op["admit"]:
            report = session.admit(turn, [h for h in served.results if h.revision])
            result["admitted"] = [[str(m), r] for m, r in report.admitted]
            if op["use"] and report.admitted:
                result["used"] = session.record_use(turn, report.admitted[0][0])
        return result


# The worker ---------------------------------------------------------------------------------


def _stall(point: str, index: int) -> None:
    emit(kind="at_fault", point=point, index=index)
    time.sleep(STALL_SECONDS)
    os._exit(3)  # never reached when the parent kills


def _arm(point: str, nth: int, index: int) -> None:
    calls = 0

    def hook() -> None:
        nonlocal calls
        calls += 1
        if calls == nth:
            _stall(point, index)

    faults.FAULTS.clear()
    faults.FAULTS[point] = hook


def work(request: dict[str, Any]) -> None:
    emit(kind="worker", pid=os.getpid())
    ops: list[Op] = request["ops"]
    kill: dict[str, Any] | None = request["kill"]
    key = request.get("master_key")
    runner = OpRunner(
        request["store"],
        sync=True,
        page_size=request["page_size"],
        emit=emit,
        master_key=bytes.fromhex(key) if key else None,
    )
    for index in range(request["start"], len(ops)):
        killing_here = kill is not None and kill["op"] == index
        # With ``timer`` the parent kills the worker wherever it is after a delay (or here,
        # right after the operation, if the operation is quicker than that).
        if killing_here and kill is not None and kill["point"] not in ("between", "timer"):
            _arm(kill["point"], kill["nth"], index)
        emit(kind="op", index=index)
        result = runner.run(ops[index])
        emit(kind="op_done", index=index, result=result)
        if killing_here and kill is not None:
            faults.FAULTS.clear()
            _stall("between" if kill["point"] == "between" else "after_op", index)
    for session, _ in runner.sessions.values():
        session.close()  # flushes buffered reads
    head = runner.engine.head
    runner.close()
    emit(kind="finished", head=head)


def serve() -> int:
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else 1
    if threads != 1:
        emit(kind="error", traceback=f"fork server has {threads} threads; fork needs one")
        return 1
    emit(kind="server_ready", pid=os.getpid())
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                work(request)
            except BaseException:
                emit(kind="error", traceback=traceback.format_exc())
                code = 1
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        emit(kind="exit", pid=pid, code=os.waitstatus_to_exitcode(status))
    return 0


if __name__ == "__main__":
    raise SystemExit(serve())
