"""A real compiled LangGraph ``StateGraph`` using the store from a node (no model): across
two runs of the graph, two processes, and a SIGKILL right after a put returns."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from memory_ledger.replay.langgraph_store import LedgerStore
from tests.conftest import REPO_ROOT
from tests.langgraph_child import TENANT, build_graph


def child(*args: str) -> subprocess.Popen[str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return subprocess.Popen(
        [sys.executable, "-m", "tests.langgraph_child", *args],
        cwd=REPO_ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_two_runs_in_one_process(tmp_path: Path) -> None:
    with LedgerStore.open(tmp_path / "store", TENANT) as store:
        graph = build_graph(store)
        assert graph.invoke({"run": "first", "seen": []})["seen"] == ["first"]
        assert graph.invoke({"run": "second", "seen": []})["seen"] == ["first", "second"]
        assert [v.action for v in store.history(("runs",), "first")] == ["put"]


def test_two_processes_share_the_memory(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    for run, expected in (("one", ["one"]), ("two", ["one", "two"])):
        proc = child("graph", path, run)
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1]) == expected
    with LedgerStore.open(path, TENANT) as store:  # and this process sees both runs
        assert build_graph(store).invoke({"run": "three", "seen": []})["seen"] == [
            "one",
            "three",
            "two",
        ]


def test_sigkill_right_after_a_put_loses_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "store")
    proc = child("put", path, "1000")
    assert proc.stdout is not None
    acknowledged = -1
    for line in proc.stdout:
        acknowledged = json.loads(line)["put"]
        if acknowledged == 4:
            break
    os.kill(proc.pid, signal.SIGKILL)  # right after put 4 returned (maybe mid put 5)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    with LedgerStore.open(path, TENANT) as store:
        for i in range(acknowledged + 1):
            item = store.get(("crash",), f"k{i}")
            assert item is not None and item.value == {"i": i, "text": f"item {i}"}
        keys = {item.key for item in store.search(("crash",), limit=2000)}
        assert {f"k{i}" for i in range(acknowledged + 1)} <= keys
        assert len(keys) <= acknowledged + 2  # at most the put under way when killed
