"""Child process of the LangGraph store tests (``python -m tests.langgraph_child ROLE ARGS``).

Roles: ``graph STORE RUN`` runs a compiled LangGraph ``StateGraph`` whose node reads and
writes the store, printing the node's view as JSON; ``put STORE N`` puts ``N`` items one by
one, printing ``{"put": i}`` after each put returned (the parent kills it with SIGKILL).
"""

from __future__ import annotations

import json
import sys
from typing import Any, TypedDict

from memory_ledger.commands import Namespace
from memory_ledger.replay.langgraph_store import LedgerStore

TENANT = Namespace("acme", "alice", "graph")


class State(TypedDict):
    run: str
    seen: list[str]


def build_graph(store: LedgerStore) -> Any:
    """A graph of one node that remembers its run and reports every run it remembers."""
    from langgraph.graph import END, START, StateGraph
    from langgraph.store.base import BaseStore

    def remember_run(state: State, *, store: BaseStore) -> dict[str, Any]:
        store.put(("runs",), state["run"], {"run": state["run"]})
        seen = sorted(item.key for item in store.search(("runs",), limit=100))
        return {"seen": seen}

    graph = StateGraph(State)
    graph.add_node("remember_run", remember_run)
    graph.add_edge(START, "remember_run")
    graph.add_edge("remember_run", END)
    return graph.compile(store=store)


def main() -> None:
    role, path = sys.argv[1], sys.argv[2]
    with LedgerStore.open(path, TENANT) as store:
        if role == "graph":
            result = build_graph(store).invoke({"run": sys.argv[3], "seen": []})
            print(json.dumps(result["seen"]), flush=True)
        elif role == "put":
            for i in range(int(sys.argv[3])):
                store.put(("crash",), f"k{i}", {"i": i, "text": f"item {i}"})
                print(json.dumps({"put": i}), flush=True)
            sys.stdin.read()  # wait for the kill


if __name__ == "__main__":
    main()
