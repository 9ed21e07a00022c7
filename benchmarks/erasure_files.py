"""Erasure reaches every file: random interleavings of writes, erase, reads, close, reopen,
a second process holding a slot, kill -9, backup, restore and export, then every byte.

``python -m benchmarks erasure_files [--examples N] [--steps K] [--seed S]`` runs N random
interleavings (hypothesis, issue 34 item 2) of up to K steps on an encrypted store with
three namespaces whose names (tenant, principal, scope id) and statement words are
distinctive random tokens, then reads every byte of every file under the store folder,
every backup, every store restored from one and every export for each erased namespace's
names and words (a word's first six letters: the recall index keeps stems), and asks every
DuckDB file by SQL whether it holds a row of one. It prints how many interleavings and
steps it tried and the leaks found (none expected). ``tests/encryption/test_erasure_files.py``
runs its fast profile.

What is checked (``docs/erasure.md``, "What erasure reaches"): the store folder and every
backup taken, export written and store restored AFTER a namespace's erasure hold none of
its names or words, once every process that held a projection slot at the erasure has
closed; a slot whose holder was killed first (its stamp ``slot-N.erasures`` stale) is
deleted by the next open or close of the store (checked after one more open).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from memory_ledger.commands.config import MemoryConfig
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.ledger.errors import MemoryLedgerError
from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.keyring import namespace_ids
from memory_ledger.projections.derived import slot_stale
from memory_ledger.projections.erasure import present_namespaces

REPO = Path(__file__).resolve().parents[1]

NAMESPACES = 3
STEP_KINDS = (
    "remember",
    "recall",
    "erase",
    "reopen",
    "close",
    "child_open",
    "child_recall",
    "child_remember",
    "child_busy",
    "child_close",
    "child_kill",
    "backup",
    "restore",
    "export",
)
"""What a step does (see :meth:`World.run`)."""

Step = tuple[str, int, int]
"""``(kind, namespace number, a number the step draws from: level, delay, ...)``."""


def token(rng: random.Random, syllables: int = 5) -> str:
    """A pronounceable random word (no secret detector takes it for a key)."""
    return "".join(
        rng.choice("bcdfghjklmnpqrstvwz") + rng.choice("aeiou") for _ in range(syllables)
    )


@dataclass
class Subject:
    """One namespace: its parts and the words of its statements (all distinctive)."""

    namespace: Namespace
    words: list[str] = field(default_factory=list)

    def needles(self) -> list[bytes]:
        """What must not be found once it is erased: its names and each word's first six
        letters (stems keep them)."""
        names = [self.namespace.tenant, self.namespace.principal, self.namespace.scope_id]
        return [n.encode() for n in names] + [w[:6].encode() for w in self.words]


@dataclass
class Copy:
    """A folder written from the store (backup, export, restored store) and the namespaces
    erased when it was taken (only those are checked in it)."""

    kind: str
    path: Path
    erased: frozenset[int]


class World:
    """An encrypted store, its main engine, at most one child process, and what it wrote."""

    def __init__(self, root: Path, seed: int) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.store = root / "store"
        root.mkdir(parents=True, exist_ok=True)
        self.key = root / "master.key"
        self.key.write_bytes(self.rng.randbytes(32))
        self.key.chmod(0o600)
        self.subjects = [
            Subject(Namespace("t" + token(self.rng), "p" + token(self.rng), "s" + token(self.rng)))
            for _ in range(NAMESPACES)
        ]
        self.erased: set[int] = set()
        self.engine: MemoryEngine | None = None
        self.child: subprocess.Popen[bytes] | None = None
        self.busy = False
        """The child is writing in a loop (until it is killed)."""
        self.copies: list[Copy] = []
        self.steps = 0

    # Parts ----------------------------------------------------------------------------------

    def main(self) -> MemoryEngine:
        if self.engine is None:
            self.engine = MemoryEngine.open(self.store, master_key=self.key)
        return self.engine

    def close_main(self) -> None:
        if self.engine is not None:
            self.engine.close()
            self.engine = None

    def statement(self, number: int) -> str:
        subject = self.subjects[number]
        words = [token(self.rng) for _ in range(3)]
        subject.words.extend(words)
        return f"{words[0].capitalize()} likes {words[1]} and {words[2]}."

    def query(self, number: int) -> str:
        words = self.subjects[number].words
        return self.rng.choice(words) if words else "anything"

    def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.child is not None and self.child.stdin and self.child.stdout
        self.child.stdin.write((json.dumps(request) + "\n").encode())
        self.child.stdin.flush()
        line = self.child.stdout.readline()
        if not line:
            raise RuntimeError(f"the child died on {request['op']}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def _ns(self, number: int) -> list[str]:
        ns = self.subjects[number].namespace
        return [ns.tenant, ns.principal, ns.scope_id]

    def child_open(self) -> None:
        if self.child is not None:
            return
        self.main()  # the store exists, and the child takes the next slot
        self.child = subprocess.Popen(  # noqa: S603 (our own module)
            [sys.executable, "-m", "benchmarks.erasure_worker", str(self.store), str(self.key)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=REPO,
        )
        assert self.child.stdout is not None
        if not self.child.stdout.readline():
            raise RuntimeError("the child did not open the store")
        for number in range(NAMESPACES):  # its recall index holds every namespace
            self._ask({"op": "recall", "ns": self._ns(number), "query": self.query(number)})

    def child_busy(self, number: int) -> None:
        """The child remembers and recalls in a loop from now on, while the next steps run
        (an erasure among them races its writes), until it is killed."""
        if self.child is None or self.busy or number in self.erased:
            return
        statements = [self.statement(number) for _ in range(8)]
        self._ask({"op": "busy", "ns": self._ns(number), "statements": statements})
        self.busy = True

    def child_close(self) -> None:
        if self.busy:  # it reads no request any more
            self.child_kill(0, 0)
        elif self.child is not None:
            self._ask({"op": "close"})
            self.child.wait(timeout=60)
            self.child = None

    def child_kill(self, number: int, delay: int) -> None:
        if self.child is None:
            return
        if delay and not self.busy:  # killed mid-work
            self.child_busy(number)
        if self.busy:
            time.sleep(delay / 1000)
        self.child.send_signal(signal.SIGKILL)
        self.child.wait(timeout=60)
        self.child = None
        self.busy = False

    # Steps ----------------------------------------------------------------------------------

    def run(self, step: Step) -> None:
        """Run one step (a step that does not apply now, e.g. writing to an erased
        namespace, does nothing)."""
        kind, number, extra = step
        self.steps += 1
        ns = self.subjects[number].namespace
        if kind == "remember" and number not in self.erased:
            self.main().remember(ns, self.statement(number))
        elif kind == "recall":
            self.main().recall(ns, self.query(number))
        elif kind == "erase" and number not in self.erased:
            level = extra % 3
            parts = [ns.tenant, ns.principal, ns.scope_id][: level + 1]
            report = self.main().erase(*parts, requested_by="harness")
            if report.namespaces:  # a namespace never written has no key: nothing erased
                self.erased.add(number)
        elif kind == "reopen":
            self.close_main()
            self.main()
        elif kind == "close":
            self.close_main()
        elif kind == "child_open":
            self.child_open()
        elif kind == "child_recall" and self.child is not None and not self.busy:
            self._ask({"op": "recall", "ns": self._ns(number), "query": self.query(number)})
        elif (
            kind == "child_remember" and self.child and not self.busy and number not in self.erased
        ):
            self._ask(
                {"op": "remember", "ns": self._ns(number), "statement": self.statement(number)}
            )
        elif kind == "child_busy":
            self.child_busy(number)
        elif kind == "child_close":
            self.child_close()
        elif kind == "child_kill":
            self.child_kill(number, extra % 40)
        elif kind == "backup":
            self.backup()
        elif kind == "restore":
            self.restore()
        elif kind == "export":
            self.export()

    def backup(self) -> None:
        from memory_ledger.replay.audit.backup import backup_store

        out = self.root / f"backup-{len(self.copies)}"
        backup_store(self.main(), out)
        self.copies.append(Copy("backup", out, frozenset(self.erased)))

    def restore(self) -> None:
        from memory_ledger.replay.audit.backup import restore_store

        backups = [c for c in self.copies if c.kind == "backup"]
        if not backups:
            return
        backup = backups[-1]
        target = self.root / f"restored-{len(self.copies)}"
        report = restore_store(backup.path, target, MemoryConfig(master_key_file=str(self.key)))
        if not report.ok:
            raise AssertionError(f"restore failed: {report.problem}")
        with MemoryEngine.open(target, master_key=self.key) as engine:
            for number in range(NAMESPACES):  # recall all: the restored recall index
                engine.recall(self.subjects[number].namespace, self.query(number))
        self.copies.append(Copy("restored", target, backup.erased))

    def export(self) -> None:
        from memory_ledger.replay.audit.export import export_store

        out = self.root / f"export-{len(self.copies)}"
        export_store(self.main(), out, fmt="jsonl")
        self.copies.append(Copy("export", out, frozenset(self.erased)))

    def finish(self) -> None:
        """Close the main engine and the child (gracefully)."""
        self.close_main()
        self.child_close()

    def abort(self) -> None:
        """Stop everything after a failure (no check)."""
        if self.child is not None:
            with contextlib.suppress(OSError):
                self.child.kill()
            self.child.wait(timeout=60)
            self.child = None
            self.busy = False
        with contextlib.suppress(MemoryLedgerError, OSError):
            self.close_main()

    # The check ------------------------------------------------------------------------------

    def leaks(self) -> list[str]:
        """Every place an erased namespace's name or word is found (empty: none)."""
        found: list[str] = []
        folders = [Copy("store", self.store, frozenset(self.erased)), *self.copies]
        for copy in folders:
            subjects = [self.subjects[n] for n in sorted(copy.erased)]
            if not subjects:
                continue
            erased_ids = {namespace_ids(s.namespace)[0] for s in subjects}
            for path in sorted(p for p in copy.path.rglob("*") if p.is_file()):
                data = path.read_bytes()
                for subject in subjects:
                    for needle in subject.needles():
                        if needle in data:
                            found.append(f"{needle.decode()!r} in {path}")
                if path.suffix == ".duckdb":
                    found.extend(_sql_leaks(path, erased_ids))
        return found


def _sql_leaks(path: Path, erased_ids: set[Any]) -> list[str]:
    """Rows of an erased namespace in DuckDB file ``path`` (DuckDB may compress strings, so
    the raw bytes alone may hide them)."""
    conn = duckdb.connect(str(path), read_only=True)
    try:
        held = present_namespaces(conn)
    finally:
        conn.close()
    return [f"rows of {ns.key()} in {path}" for ns in held if namespace_ids(ns)[0] in erased_ids]


def check_interleaving(root: Path, seed: int, steps: list[Step]) -> list[str]:
    """Run ``steps`` on a new store under ``root``, close everything, open and close the
    store once more, and return the leaks found (after the last close, and after the
    extra open)."""
    world = World(root, seed)
    try:
        for step in steps:
            world.run(step)
        world.finish()
    except BaseException:
        world.abort()
        raise
    erasures = len(world.erased)
    found = [f"after close: {leak}" for leak in world.leaks() if not _pending(leak, erasures)]
    MemoryEngine.open(world.store, master_key=world.key).close()
    found += [f"after reopen: {leak}" for leak in world.leaks()]
    return found


def _pending(leak: str, erasures: int) -> bool:
    """A file of a slot whose holder was killed before it scrubbed it (its stamp
    ``slot-N.erasures`` predates an erasure): deleted by the next open, checked after it."""
    path = Path(leak.rsplit(" in ", 1)[-1])
    slot = path.name.split(".", 1)[0]  # slot-N of slot-N.duckdb.wal, slot-N.recall, ...
    return path.parent.name == "projections" and slot_stale(
        path.parent / f"{slot}.duckdb", erasures
    )


def step_strategy() -> Any:
    """A hypothesis strategy of one step."""
    from hypothesis import strategies as st

    return st.tuples(
        st.sampled_from(STEP_KINDS),
        st.integers(0, NAMESPACES - 1),
        st.integers(0, 1000),
    )


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks erasure_files")
    parser.add_argument("--examples", type=int, default=200, help="interleavings to try")
    parser.add_argument("--steps", type=int, default=30, help="at most this many steps each")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="2 interleavings of 6 steps")
    args = parser.parse_args(argv)
    if args.quick:
        args.examples, args.steps = 2, 6
    from hypothesis import HealthCheck, Phase, given, seed, settings
    from hypothesis import strategies as st

    from benchmarks.results import print_table, save

    tried = {"interleavings": 0, "steps": 0, "erasures": 0}
    started = time.perf_counter()

    @seed(args.seed)
    @settings(
        max_examples=args.examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
        phases=[Phase.generate],
    )
    @given(
        steps=st.lists(step_strategy(), min_size=1, max_size=args.steps),
        world_seed=st.integers(0, 2**32),
    )
    def explore(steps: list[Step], world_seed: int) -> None:
        root = Path(tempfile.mkdtemp(prefix="ml-erasure-files-"))
        # Every interleaving writes namespace 0 and erases it somewhere.
        cut = world_seed % (len(steps) + 1)
        steps = [("remember", 0, 0), *steps[:cut], ("erase", 0, world_seed % 3), *steps[cut:]]
        try:
            tried["interleavings"] += 1
            tried["steps"] += len(steps)
            tried["erasures"] += sum(1 for kind, _, _ in steps if kind == "erase")
            leaks = check_interleaving(root, world_seed, steps)
            assert not leaks, f"{steps}:\n" + "\n".join(leaks)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    explore()
    seconds = time.perf_counter() - started
    figures: dict[str, Any] = {
        **tried,
        "leaks": 0,
        "seconds": round(seconds, 1),
        "load": round(os.getloadavg()[0], 2),
    }
    print_table(
        "Erasure reaches every file (issue 34 item 2)",
        [(name, str(value)) for name, value in figures.items()],
    )
    print(
        f"erasure_files: {tried['interleavings']} interleavings, {tried['steps']} steps, "
        f"0 leaks, {seconds:.0f} s"
    )
    print(f"figures written to {save('erasure_files', figures)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
