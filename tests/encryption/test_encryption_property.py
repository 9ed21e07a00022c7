"""Property (issue #16): random remember / forget / erase programs over three namespaces.

The same program runs on an encrypted store and on a clear reference store (which never
erases: a clear store cannot, and its erased namespaces' operations are skipped). After
every operation, and again after reopening: every namespace not erased recalls exactly what
the reference recalls; an erased namespace recalls nothing; a write to an erased namespace
raises :class:`NamespaceErasedError`; the chain verifies.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from memory_ledger.commands.engine import MemoryEngine
from memory_ledger.commands.errors import MemoryLedgerError, UnknownMemoryError
from memory_ledger.ledger.ids import Namespace
from memory_ledger.ledger.key_errors import NamespaceErasedError
from memory_ledger.replay import verify_store

NAMESPACES = (
    Namespace("acme", "alice", "chat"),
    Namespace("acme", "alice", "work"),
    Namespace("acme", "bob", "chat"),
    Namespace("globex", "carol", "chat"),
)
FACTS = (
    "Alice drinks espresso at noon.",
    "Alice plays chess on Sundays.",
    "The deploy script lives in tools/deploy.sh.",
    "Bob sings in a choir.",
    "Carol keeps bees in Porto.",
)
QUERIES = ("espresso noon", "chess Sundays", "deploy script", "choir", "bees Porto")

op_st = st.one_of(
    st.tuples(st.just("remember"), st.integers(0, 3), st.integers(0, len(FACTS) - 1)),
    st.tuples(st.just("remember"), st.integers(0, 3), st.integers(0, len(FACTS) - 1)),
    st.tuples(st.just("forget"), st.integers(0, 3), st.integers(0, len(FACTS) - 1)),
    # An erasure names one namespace, a principal (two namespaces of alice) or a tenant.
    st.tuples(st.just("erase"), st.integers(0, 3), st.sampled_from(["namespace", "principal"])),
    st.tuples(st.just("erase_tenant"), st.sampled_from(["acme", "globex"])),
)


def erased_by(op: tuple[Any, ...]) -> set[Namespace]:
    if op[0] == "erase_tenant":
        return {ns for ns in NAMESPACES if ns.tenant == op[1]}
    target = NAMESPACES[op[1]]
    if op[2] == "namespace":
        return {target}
    return {
        ns for ns in NAMESPACES if (ns.tenant, ns.principal) == (target.tenant, target.principal)
    }


def apply(engine: MemoryEngine, op: tuple[Any, ...]) -> tuple[str, Any]:
    """Run one write; return ``("ok", None)`` or ``("refused", error class name)``."""
    ns = NAMESPACES[op[1]] if op[0] in ("remember", "forget") else None
    try:
        if op[0] == "remember":
            assert ns is not None
            engine.remember(ns, FACTS[op[2]])
        elif op[0] == "forget":
            assert ns is not None
            engine.forget(ns, FACTS[op[2]])
    except MemoryLedgerError as e:
        return "refused", type(e).__name__
    return "ok", None


def _without_ids(hits: Any) -> list[Any]:
    """Recall hits less their memory ids: each store derives its own (keyed by its keys)."""
    return [msgspec.structs.replace(h, memory_id="") for h in hits]


def check(engine: MemoryEngine, reference: MemoryEngine, erased: set[Namespace]) -> None:
    for ns in NAMESPACES:
        for query in QUERIES:
            got = engine.recall(ns, query, 10).results
            if ns in erased:
                assert got == (), f"erased {ns} recalled {got}"
            else:
                want = reference.recall(ns, query, 10).results
                assert _without_ids(got) == _without_ids(want), (ns, query)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@example(
    ops=[
        ("remember", 0, 0),
        ("remember", 1, 2),
        ("remember", 2, 3),
        ("remember", 3, 4),
        ("erase", 0, "principal"),  # alice's two namespaces
        ("remember", 0, 1),  # refused
        ("forget", 1, 2),  # refused
        ("forget", 2, 3),
        ("remember", 2, 1),
        ("erase_tenant", "globex"),
        ("remember", 3, 4),  # refused
        ("erase", 2, "namespace"),
    ]
)
@given(ops=st.lists(op_st, min_size=3, max_size=12))
def test_encrypted_store_recalls_like_a_clear_one_and_erased_namespaces_nothing(
    ops: list[tuple[Any, ...]],
) -> None:
    key = os.urandom(32)
    with tempfile.TemporaryDirectory() as folder:
        store = Path(folder) / "sealed"
        erased: set[Namespace] = set()
        with (
            MemoryEngine.open(store, master_key=key, sync=False) as engine,
            MemoryEngine.open(Path(folder) / "clear", sync=False) as reference,
        ):
            for op in ops:
                if op[0] in ("erase", "erase_tenant"):
                    target = NAMESPACES[op[1]] if op[0] == "erase" else None
                    if op[0] == "erase_tenant":
                        report = engine.erase(op[1])
                    elif op[2] == "namespace":
                        assert target is not None
                        report = engine.erase(target.tenant, target.principal, target.scope_id)
                    else:
                        assert target is not None
                        report = engine.erase(target.tenant, target.principal)
                    # Only namespaces that ever held a key are counted.
                    assert report.namespaces <= len(erased_by(op) - erased)
                    erased |= {ns for ns in erased_by(op) if has_key(engine, ns)}
                elif NAMESPACES[op[1]] in erased:
                    before = engine.head
                    outcome = apply(engine, op)
                    # A forget finds no memory to forget (its text is gone) before it could
                    # write; a remember is refused as a write to an erased namespace.
                    allowed = {NamespaceErasedError.__name__}
                    if op[0] == "forget":
                        allowed.add(UnknownMemoryError.__name__)
                    assert outcome[0] == "refused" and outcome[1] in allowed, (op, outcome)
                    assert engine.head == before
                else:
                    assert apply(engine, op) == apply(reference, op), op
                check(engine, reference, erased)
            head = engine.head
        with (
            MemoryEngine.open(store, master_key=key, sync=False) as engine,
            MemoryEngine.open(Path(folder) / "clear", sync=False) as reference,
        ):
            assert engine.head == head
            check(engine, reference, erased)
            verified = verify_store(engine)
            assert verified.ok and verified.checked == head, verified


def has_key(engine: MemoryEngine, ns: Namespace) -> bool:
    """Whether ``ns`` ever had a data key (a namespace never written has none to erase)."""
    namespace_id = engine.keyring.namespace_id(ns)
    return any(r.namespace_id == namespace_id for r in engine.keyring.records())
