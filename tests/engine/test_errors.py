"""Errors a user can act on: one base class with stable reason codes, and engine calls
that validate their arguments with a typed error naming the parameter.

- Every error class the engine raises on purpose derives from ``MemoryLedgerError``
  (re-exported as ``memory_ledger.MemoryLedgerError``, one class object everywhere), keeps
  the builtin or ``eventsourcing`` base it had before (``except ValueError`` still works),
  and carries a snake_case ``reason_code``: a class default, overridable per instance,
  surviving pickling.
- ``k`` < 1 or not an int, NaN / infinite / negative timeouts, naive datetimes and empty
  namespace parts raise ``InvalidArgumentError`` (a ``ValueError``) whose ``parameter``
  names the argument, before anything is written.
"""

from __future__ import annotations

import importlib
import inspect
import math
import pickle
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import (
    DatabaseError,
    IntegrityError,
    MapperDeserialisationError,
    OperationalError,
)

import memory_ledger
from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.commands.config import ConfigError, MemoryConfig
from memory_ledger.commands.context import ContextAssembler, ContextItem
from memory_ledger.commands.context.assembler import AssemblyPolicy
from memory_ledger.commands.embeddings import OpenAIEmbeddingProvider
from memory_ledger.commands.errors import StoreUnavailableError
from memory_ledger.commands.extraction import OpenAIChatExtractor
from memory_ledger.ledger.errors import (
    InvalidArgumentError,
    InvalidArgumentTypeError,
    LedgerIntegrityError,
    LedgerOperationalError,
    LedgerRecordError,
    MemoryLedgerError,
)
from memory_ledger.ledger.ids import InvalidNamespaceError
from memory_ledger.replay import EventFilter, OutputExistsError, as_of, filter_events, position_at
from memory_ledger.replay.scripts.locomo import SampleNotFoundError
from tests.conftest import make_item

NS = Namespace("acme", "alice", "assistant")

ERROR_MODULES = (
    "memory_ledger.ledger.errors",
    "memory_ledger.ledger.ids",
    "memory_ledger.ledger.mapper",
    "memory_ledger.projections.errors",
    "memory_ledger.commands.errors",
    "memory_ledger.commands.config",
    "memory_ledger.commands.context.assembler",
    "memory_ledger.commands.embeddings.base",
    "memory_ledger.commands.embeddings.local",
    "memory_ledger.commands.extraction.openai",
    "memory_ledger.commands.workspace.retrieval",
    "memory_ledger.commands.workspace.files",
    "memory_ledger.commands.context.knowledge_binding",
    "memory_ledger.commands.context.compaction",
    "memory_ledger.commands.context.summarizers",
    "memory_ledger.replay.audit.errors",
    "memory_ledger.replay.audit.rebuild",
    "memory_ledger.replay.audit.lineage",
    "memory_ledger.replay.audit.points",
    "memory_ledger.replay.scripts.script",
    "memory_ledger.replay.scripts.locomo",
)


def error_classes() -> Iterator[type[BaseException]]:
    """Every exception class defined (not imported) by the engine's error-raising modules."""
    for name in ERROR_MODULES:
        module = importlib.import_module(name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if issubclass(value, BaseException) and value.__module__ == name:
                yield value


# The base class and reason codes -------------------------------------------------------------


def test_one_base_class_under_every_error_of_the_engine() -> None:
    classes = list(error_classes())
    assert len(classes) >= 40
    outside = [c.__qualname__ for c in classes if not issubclass(c, MemoryLedgerError)]
    # Refused is the ledger's internal control-flow signal, never raised to a caller.
    assert outside == ["Refused"] or outside == []
    assert memory_ledger.MemoryLedgerError is MemoryLedgerError
    assert memory_ledger.commands.MemoryLedgerError is MemoryLedgerError
    assert memory_ledger.commands.errors.MemoryLedgerError is MemoryLedgerError


def test_class_reason_codes_are_stable_snake_case_and_distinct() -> None:
    own = {
        c: c.__dict__["reason_code"]
        for c in error_classes()
        if issubclass(c, MemoryLedgerError) and "reason_code" in c.__dict__
    }
    assert len(own) >= 40
    for cls, code in own.items():
        assert isinstance(code, str) and re.fullmatch(r"[a-z][a-z0-9_]*", code), cls
    duplicates = {code for code in own.values() if list(own.values()).count(code) > 1}
    assert not duplicates, duplicates


@pytest.mark.parametrize(
    ("error", "builtin"),
    [
        (InvalidArgumentError("x"), ValueError),
        (InvalidArgumentTypeError("x"), TypeError),
        (InvalidNamespaceError("x"), ValueError),
        (StoreUnavailableError("x"), OSError),
        (LedgerOperationalError("x"), OperationalError),
        (LedgerIntegrityError("x"), IntegrityError),
        (LedgerRecordError("x"), ValueError),
        (OutputExistsError("x"), FileExistsError),
        (ConfigError("x"), ValueError),
        (SampleNotFoundError("conv-x", ["conv-1"]), KeyError),
    ],
)
def test_typed_errors_keep_the_builtin_they_replaced(
    error: MemoryLedgerError, builtin: type[BaseException]
) -> None:
    assert isinstance(error, MemoryLedgerError)
    assert isinstance(error, builtin)


def test_reason_code_is_overridable_per_instance_and_survives_pickling() -> None:
    error = InvalidArgumentError("k must be at least 1", parameter="k", reason_code="too_small")
    assert InvalidArgumentError.reason_code == "invalid_argument"
    again = pickle.loads(pickle.dumps(error))
    assert type(again) is InvalidArgumentError
    assert (again.reason_code, again.parameter, str(again)) == (
        "too_small",
        "k",
        "k must be at least 1",
    )
    ledger = pickle.loads(pickle.dumps(LedgerOperationalError("full", path="/s")))
    assert (ledger.reason_code, ledger.path) == ("ledger_unavailable", "/s")
    assert isinstance(ledger, DatabaseError)


def test_the_mapper_and_the_record_decoder_raise_typed_errors() -> None:
    from eventsourcing.persistence import JSONTranscoder

    from memory_ledger.ledger.lmdb import decode_record
    from memory_ledger.ledger.mapper import EventDecodeError, MsgspecMapper

    mapper = MsgspecMapper(transcoder=JSONTranscoder())
    with pytest.raises(EventDecodeError) as raised:
        mapper.decode("memory_ledger.ledger.events:SessionOpened", b"\x01\xc1", b"0" * 16, 1)
    assert isinstance(raised.value, MapperDeserialisationError)
    assert raised.value.reason_code == "undecodable_event"
    with pytest.raises(LedgerRecordError) as bad:
        decode_record((1).to_bytes(8, "big"), bytes(32) + b"\xc1")
    assert bad.value.reason_code == "undecodable_record"


# Argument validation -------------------------------------------------------------------------


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[MemoryEngine]:
    with MemoryEngine.open(tmp_path / "store", sync=False, index_in_background=False) as opened:
        extractor = RecordedExtractor()
        session = opened.session(NS, "s1", extractor=extractor)
        extractor.provide(1, [make_item("Alice likes green tea.", tags=["drinks"])])
        session.observe_final_transcript(1, "user: green tea please")
        session.finish()
        yield opened


def raises_naming(parameter: str, call: Callable[[], object]) -> InvalidArgumentError:
    with pytest.raises(InvalidArgumentError) as raised:
        call()
    assert raised.value.parameter == parameter
    assert parameter in str(raised.value)
    assert isinstance(raised.value, ValueError)
    return raised.value


@pytest.mark.parametrize("k", [0, -1, 1.5, True, "3", None])
def test_k_below_one_or_not_an_int_is_refused_everywhere(engine: MemoryEngine, k: Any) -> None:
    head = engine.head
    session = engine.session(NS, "s2")
    calls: list[tuple[str, Callable[[], object]]] = [
        ("k", lambda: session.memory_recent(k=k)),
        ("k", lambda: session.recall_by_tags(["drinks"], k=k)),
    ]
    if k is not None:  # None means "the default" for these (the recall policy's limit)
        calls.append(("k", lambda: engine.recall(NS, "tea", k=k)))
        calls.append(("k", lambda: session.recall("tea", k=k)))
        calls.append(("k", lambda: session.recall_similar("tea", k=k)))
        calls.append(("limit", lambda: list(filter_events(engine, limit=k))))
    for parameter, call in calls:
        error = raises_naming(parameter, call)
        assert error.reason_code in ("not_an_integer", "out_of_range")
    with as_of(engine, engine.head) as past:
        raises_naming("k", lambda: past.recall(NS, "tea", k=k))
    assert engine.head == head + 1  # only the second session's SessionOpened


def test_k_of_one_is_valid(engine: MemoryEngine) -> None:
    assert [h.statement for h in engine.recall(NS, "green tea", k=1).results] == [
        "Alice likes green tea."
    ]


@pytest.mark.parametrize("timeout", [math.nan, math.inf, -1.0, -0.001, "5"])
def test_nan_infinite_negative_or_text_timeouts_are_refused(
    engine: MemoryEngine, timeout: Any
) -> None:
    session = engine.session(NS, "s2")
    raises_naming("timeout", lambda: engine.wait_for_vectors(timeout))
    raises_naming("timeout", lambda: session.wait_for_extractions(timeout))
    raises_naming("idle_seconds", lambda: session.is_idle(timeout))
    raises_naming("timeout_s", lambda: ContextAssembler([], timeout_s=timeout))
    raises_naming(
        "timeout", lambda: OpenAIChatExtractor("http://127.0.0.1:9/v1", "m", timeout=timeout)
    )
    raises_naming(
        "timeout",
        lambda: OpenAIEmbeddingProvider("http://127.0.0.1:9/v1", "m", 4, timeout=timeout),
    )


def test_valid_timeouts_are_accepted(engine: MemoryEngine) -> None:
    session = engine.session(NS, "s2")
    assert engine.wait_for_vectors(0) is True
    assert session.wait_for_extractions(0.0) == []
    assert session.wait_for_extractions(None) == []
    assert session.is_idle(0) is True


def test_a_naive_datetime_is_refused_wherever_an_aware_one_is_needed(
    engine: MemoryEngine,
) -> None:
    naive = datetime(2024, 3, 4, 9, 15)
    session = engine.session(NS, "s1")
    head = engine.head
    error = raises_naming("older_than", lambda: session.prune(older_than=naive))
    assert error.reason_code == "naive_datetime"
    error = raises_naming(
        "occurred_at", lambda: session.observe_final_transcript(2, "user: hi", occurred_at=naive)
    )
    assert error.reason_code == "naive_datetime"
    raises_naming("at", lambda: as_of(engine, naive))
    raises_naming("when", lambda: position_at(engine, naive))
    raises_naming("since", lambda: list(filter_events(engine, EventFilter(since=naive))))
    raises_naming("until", lambda: list(filter_events(engine, EventFilter(until=naive))))
    assert engine.head == head, "a refused call writes nothing"
    aware = naive.replace(tzinfo=UTC)
    assert session.prune(older_than=aware) == []
    assert position_at(engine, aware) == 0


@pytest.mark.parametrize("part", ["tenant", "principal", "scope_id"])
@pytest.mark.parametrize("value", ["", "   ", 7])
def test_empty_namespace_parts_name_the_part(engine: MemoryEngine, part: str, value: Any) -> None:
    parts: dict[str, Any] = {"tenant": "acme", "principal": "alice", "scope_id": "assistant"}
    parts[part] = value
    bad = Namespace(**parts)
    for call in (
        lambda: engine.recall(bad, "tea"),
        lambda: engine.session(bad, "s9"),
        lambda: engine.memory_map(bad),
    ):
        error = raises_naming(part, call)
        assert isinstance(error, InvalidNamespaceError)
        expected = "namespace_part_not_a_string" if value == 7 else "empty_namespace_part"
        assert error.reason_code == expected


def test_a_namespace_that_is_not_a_namespace_and_an_empty_session_id(
    engine: MemoryEngine,
) -> None:
    error = raises_naming("namespace", lambda: engine.recall(("acme", "alice", "x"), "tea"))  # type: ignore[arg-type]
    assert isinstance(error, TypeError)
    # Every direct command and read names the namespace the same way (no AttributeError).
    for call in (
        lambda: engine.remember(("acme", "alice", "x"), "Alice likes tea."),  # type: ignore[arg-type]
        lambda: engine.forget(("acme", "alice", "x"), "tea"),  # type: ignore[arg-type]
        lambda: engine.pin(None, "tea"),  # type: ignore[arg-type]
        lambda: engine.correct("acme", "Alice likes coffee."),  # type: ignore[arg-type]
        lambda: engine.memory_map(["acme", "alice", "x"]),  # type: ignore[arg-type]
    ):
        error = raises_naming("namespace", call)
        assert isinstance(error, TypeError) and error.reason_code == "not_a_namespace"
    raises_naming("session_id", lambda: engine.session(NS, " "))


def test_configuration_and_context_values_name_the_key() -> None:
    with pytest.raises(ConfigError, match="recall_k"):
        MemoryConfig(recall_k=0)
    raises_naming("max_tokens", lambda: AssemblyPolicy(1, -1, 1, 1))
    raises_naming(
        "relevance", lambda: ContextItem(item_id="i", source="s", kind="k", text="t", relevance=2)
    )


def test_an_embeddings_name_instead_of_a_provider_is_refused_before_any_file(
    tmp_path: Path,
) -> None:
    """``open(path, embeddings="local")`` (the CLI's word, not a provider) names the
    parameter and how to choose by name, and creates nothing."""
    store = tmp_path / "store"
    error = raises_naming("embeddings", lambda: memory_ledger.open(store, embeddings="local"))
    assert isinstance(error, TypeError) and "MemoryConfig(embeddings='local')" in str(error)
    assert not store.exists()


def test_a_refused_command_names_the_argument_at_fault(engine: MemoryEngine) -> None:
    """``CommandRejectedError`` is a ``ValueError`` whose ``parameter`` names the argument,
    as the README promises for every bad argument."""
    cases: list[tuple[str, Callable[[], object]]] = [
        ("statement", lambda: engine.remember(NS, "   ")),
        ("statement", lambda: engine.remember(NS, 7)),  # type: ignore[arg-type]
        ("statement_or_id", lambda: engine.forget(NS, "")),
        ("target", lambda: engine.correct(NS, "Alice likes tea.", target=5)),  # type: ignore[arg-type]
    ]
    for name, call in cases:
        with pytest.raises(ValueError) as raised:
            call()
        assert getattr(raised.value, "parameter", None) == name, (name, raised.value)
        assert name in str(raised.value)


@pytest.mark.parametrize(
    "invisible", ["\u200b\u200b\u200b", "\u200e\u2066\u2069", "\u0301\u0301", "\x00\x00"]
)
def test_a_statement_that_shows_nothing_is_empty(engine: MemoryEngine, invisible: str) -> None:
    """Zero-width spaces, direction marks, lone combining marks or NULs are no statement:
    refused as empty (``empty_statement``, naming ``statement``), nothing written; the same
    rule as an extracted item's statement."""
    head = engine.head
    with pytest.raises(ValueError) as raised:
        engine.remember(NS, invisible)
    assert getattr(raised.value, "reason_code", None) == "empty_statement"
    assert getattr(raised.value, "parameter", None) == "statement"
    assert engine.head == head
    from memory_ledger.commands.extraction.validation import has_visible_text

    assert not has_visible_text(invisible) and has_visible_text(f"{invisible}Alice likes tea.")


# --- files that are not UTF-8, and the item field a rejected command names -------------------


def test_a_config_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    from memory_ledger.commands.config import load_config
    from memory_ledger.replay.mcp.tokens import TokenFileError, TokenRegistry

    path = tmp_path / "memory-ledger.toml"
    path.write_bytes(b"[memory]\nllm_extraction = true\n# caf\xe9 \xff\n")
    with pytest.raises(ConfigError) as raised:
        load_config(path)
    assert raised.value.reason_code == "not_utf8" and "not UTF-8" in str(raised.value)
    assert raised.value.__cause__ is None  # no UnicodeDecodeError chained to a user
    with pytest.raises(ConfigError):
        MemoryEngine.open(tmp_path / "store", config=path)
    with pytest.raises(TokenFileError) as token_file:
        TokenRegistry.from_toml(path)
    assert token_file.value.reason_code == "not_utf8"


@pytest.mark.parametrize(
    ("statement", "fields", "code", "parameter"),
    [
        ("Alice likes tea. " * 200, {}, "statement_too_long", "statement"),
        ("Alice likes tea.", {"subject": 3}, "schema_invalid", "subject"),
        ("Alice likes tea.", {"value": ["x"]}, "schema_invalid", "value"),
        ("Alice likes tea.", {"tags": ["tenant:bob"]}, "namespace_key_in_tags", "tags"),
        ("Alice likes tea.", {"subject": "Al\x1bice"}, "forbidden_character", "subject"),
        ("Alice likes tea.", {"tags": "drinks"}, "invalid_tags", "tags"),
    ],
)
def test_a_rejected_remember_names_the_parameter(
    tmp_path: Path, statement: str, fields: dict[str, Any], code: str, parameter: str
) -> None:
    from memory_ledger.commands.errors import CommandRejectedError

    with memory_ledger.open(tmp_path / "store") as mem:
        with pytest.raises(CommandRejectedError) as raised:
            mem.remember(Namespace("acme", "alice", "assistant"), statement, **fields)
        assert raised.value.reason_code == code and raised.value.parameter == parameter
        assert mem.head == 0
