"""Bad arguments to ``LedgerStore`` are typed refusals naming the argument, never a bare
``TypeError``; a refused namespace label is repeated nowhere, its exception chain included."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.ledger.errors import InvalidArgumentTypeError
from memory_ledger.replay.langgraph_store import LedgerStore, StoreNamespaceError

SECRET_LABEL = "AKIA" + "IOSFODNN7EXAMPLE.x"


def fresh(engine: MemoryEngine) -> LedgerStore:
    return LedgerStore(engine, Namespace("typed", "lg", uuid.uuid4().hex))


@pytest.mark.parametrize(
    ("call", "parameter"),
    [
        (lambda store: store.search(("u",), filter={1: 1}), "filter"),
        (lambda store: store.search(None), "namespace_prefix"),
        (lambda store: store.batch(None), "ops"),
        (lambda store: store.batch("ops"), "ops"),
    ],
)
def test_bad_arguments_are_typed(engine: MemoryEngine, call: Any, parameter: str) -> None:
    store = fresh(engine)
    with pytest.raises(InvalidArgumentTypeError) as refused:
        call(store)
    assert refused.value.parameter == parameter


def test_a_refused_label_is_kept_in_no_exception_of_the_chain(engine: MemoryEngine) -> None:
    store = fresh(engine)
    with pytest.raises(StoreNamespaceError) as refused:
        store.get(("users", SECRET_LABEL), "k")
    chain: list[BaseException] = []
    error: BaseException | None = refused.value
    while error is not None:
        chain.append(error)
        error = error.__cause__ or error.__context__
    assert all(SECRET_LABEL.split(".")[0] not in str(e) for e in chain), chain
