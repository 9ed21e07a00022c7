"""Exact knowledge binding: hard limits, fail closed, exclusive, recorded, resumed."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.context import (
    BoundKnowledge,
    ContextAssembler,
    KnowledgeBinding,
    KnowledgeBindingError,
)
from memory_ledger.commands.context.assembler import StaticContextProvider
from memory_ledger.commands.context.knowledge_binding import KnowledgeLimits
from memory_ledger.commands.recall import RecallScope
from memory_ledger.commands.session import SessionMemoryProvider, WorkspaceOptions
from memory_ledger.ledger.events import KnowledgeBound, KnowledgeServed, SessionOpened
from memory_ledger.replay import EventFilter, describe_event, explain, filter_events
from memory_ledger.replay.cli.app import app
from tests.conftest import make_item
from tests.knowledge_helpers import PackageProvider, binding, digest


def bound(generation: int = 3, **limits: int) -> tuple[BoundKnowledge, PackageProvider]:
    provider = PackageProvider(binding(generation, **limits))
    return BoundKnowledge(provider.binding, provider), provider


def reason(excinfo: pytest.ExceptionInfo[KnowledgeBindingError]) -> str:
    return excinfo.value.reason_code


# The binding -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "limits",
    [
        {"max_documents": 5},
        {"max_document_bytes": 6 * 1024 + 1},
        {"max_total_bytes": 6 * 1024 + 1},
        {"max_documents": 0},
        {"max_total_bytes": True},
    ],
)
def test_hard_limits_cannot_be_raised(limits: dict[str, int]) -> None:
    with pytest.raises(KnowledgeBindingError) as caught:
        KnowledgeLimits(**limits)
    assert reason(caught) == "invalid_binding"


def test_defaults_are_the_hard_limits_and_smaller_ones_are_allowed() -> None:
    assert KnowledgeLimits() == KnowledgeLimits(
        max_documents=4, max_document_bytes=6144, max_total_bytes=6144
    )
    assert binding(max_documents=1).limits.max_documents == 1


@pytest.mark.parametrize(
    "field",
    [
        {"package_id": " "},
        {"generation": 0},
        {"generation": True},
        {"generation_digest": "abc"},
        {"capability_digest": "SHA256:" + "0" * 64},
    ],
)
def test_malformed_bindings_are_refused(field: dict[str, object]) -> None:
    fields = msgspec.structs.asdict(binding())
    fields.update(field)
    with pytest.raises(KnowledgeBindingError) as caught:
        KnowledgeBinding(**fields)  # type: ignore[arg-type]
    assert reason(caught) == "invalid_binding"


def test_a_provider_of_another_binding_is_refused() -> None:
    provider = PackageProvider(binding(3))
    with pytest.raises(KnowledgeBindingError) as caught:
        BoundKnowledge(binding(3, max_documents=2), provider)
    assert reason(caught) == "binding_mismatch"
    with pytest.raises(KnowledgeBindingError) as caught:
        BoundKnowledge(binding(4), provider)
    assert reason(caught) == "generation_drift"


# A bound session -----------------------------------------------------------------------------


def test_the_binding_is_recorded_with_the_session_start(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    knowledge, _ = bound()
    session = engine.session(namespace, "ops-1", knowledge=knowledge)
    stream = list(filter_events(engine, EventFilter(session_id="ops-1")))
    assert [type(e) for _, e in stream] == [SessionOpened, KnowledgeBound]
    opened, recorded = stream[0][1], stream[1][1]
    assert stream[1][0] == stream[0][0] + 1 and opened.recorded_at == recorded.recorded_at
    assert isinstance(recorded, KnowledgeBound)
    assert recorded.binding_id == knowledge.binding.binding_id()
    assert (recorded.generation, recorded.max_documents, recorded.max_total_bytes) == (3, 4, 6144)
    assert session.state.knowledge == recorded
    assert "acme/runbooks@2.1.0#3" in describe_event(recorded)


def test_bound_context_is_the_packages_cited_documents(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    engine.remember(namespace, "The release freeze starts Friday.")
    knowledge, provider = bound()
    with engine.session(namespace, "ops-2", knowledge=knowledge) as session:
        context = session.assemble_context(1, "how do I deploy during the freeze?")
        request = provider.requests[0]
        assert request.binding == knowledge.binding and request.turn_id == 1
        assert [i.kind for i in context.items] == ["knowledge", "knowledge"]
        assert {i.source for i in context.items} == {"knowledge"}  # no memory item
        assert context.items[0].text.startswith("[acme/runbooks@2.1.0#3:deploy.md] Deploying\n")
        retry = session.assemble_context(1, "how do I deploy during the freeze?")
        assert provider.requests[1].request_id == request.request_id  # a retry asks the same
        assert retry.items == context.items
    served = [e for _, e in filter_events(engine, EventFilter(types=("KnowledgeServed",)))]
    assert len(served) == 2 and isinstance(served[0], KnowledgeServed)
    assert served[0].citations == (
        "acme/runbooks@2.1.0#3:deploy.md",
        "acme/runbooks@2.1.0#3:rollback.md",
    )
    assert served[0].request_id == request.request_id


@pytest.mark.parametrize(
    ("mode", "code"),
    [
        ("raise", "provider_failed"),
        ("other_request", "request_mismatch"),
        ("other_package", "request_mismatch"),
        ("drifted_response", "generation_drift"),
        ("drifted_citation", "generation_drift"),
        ("bad_digest", "malformed_citation"),
        ("empty_document_id", "malformed_citation"),
        ("duplicate", "malformed_citation"),
        ("too_many", "limit_exceeded"),
        ("too_big", "limit_exceeded"),
        ("too_big_in_all", "limit_exceeded"),
        ("not_a_response", "malformed_response"),
    ],
)
def test_every_provider_fault_fails_closed_without_fallback(
    engine: MemoryEngine, namespace: Namespace, mode: str, code: str
) -> None:
    engine.remember(namespace, "Deploy with make release.")
    knowledge, provider = bound()
    with engine.session(namespace, "ops-3", knowledge=knowledge) as session:
        provider.mode = mode  # type: ignore[assignment]
        with pytest.raises(KnowledgeBindingError) as caught:
            session.assemble_context(1, "deploy")
        assert reason(caught) == code
    assert list(filter_events(engine, EventFilter(types=("KnowledgeServed",)))) == []


def test_smaller_host_limits_are_enforced(engine: MemoryEngine, namespace: Namespace) -> None:
    knowledge, _ = bound(max_documents=1)
    with engine.session(namespace, "ops-4", knowledge=knowledge) as session:
        with pytest.raises(KnowledgeBindingError) as caught:
            session.assemble_context(1, "deploy")
    assert reason(caught) == "limit_exceeded"


def test_a_mapping_shaped_response_is_validated_too(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    knowledge, provider = bound()
    provider.mode = "as_mapping"
    with engine.session(namespace, "ops-5", knowledge=knowledge) as session:
        assert len(session.assemble_context(1, "deploy").items) == 2


def test_generation_drift_of_the_provider_after_binding_fails_closed(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    knowledge, provider = bound()
    with engine.session(namespace, "ops-6", knowledge=knowledge) as session:
        provider._binding = binding(4)
        with pytest.raises(KnowledgeBindingError) as caught:
            session.assemble_context(1, "deploy")
    assert reason(caught) == "generation_drift" and provider.requests == []


def test_a_bound_session_suppresses_memory_recall(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    engine.remember(namespace, "Alice deploys on Fridays.")
    knowledge, _ = bound()
    with engine.session(namespace, "ops-7", knowledge=knowledge) as session:
        calls = [
            lambda: session.recall("deploys"),
            lambda: session.recall_scoped("deploys", None, RecallScope()),
            lambda: session.recall_similar("deploys"),
            lambda: session.memory_recent(),
            lambda: session.recall_by_tags(["x"]),
            lambda: session.memory_map(),
        ]
        for call in calls:
            with pytest.raises(KnowledgeBindingError) as caught:
                call()
            assert reason(caught) == "recall_suppressed"
        snapshot = session.prepare(1, "user: when does Alice deploy?")
        assert snapshot.items == ()  # the turn protocol still works, without memory
        session.begin_turn(1)
        with pytest.raises(KnowledgeBindingError) as caught:
            SessionMemoryProvider(session)
        assert reason(caught) == "provider_refused"
        other = StaticContextProvider("notes", ())
        with pytest.raises(KnowledgeBindingError) as caught:
            session.assemble_context(1, "deploy", [other])
        assert reason(caught) == "provider_refused"
        forgotten = session.apply_explicit_command("forget", "deploys on Fridays", 1)
        assert forgotten.target is not None  # commands still find their target by words
        session.finish()
    assert len(engine.recall(namespace, "deploys")) == 0


def test_a_knowledge_provider_is_refused_in_the_generic_list_and_beside_a_workspace(
    engine: MemoryEngine, namespace: Namespace, tmp_path: Path
) -> None:
    knowledge, provider = bound()
    for candidate in (provider, knowledge):
        with pytest.raises(KnowledgeBindingError) as caught:
            ContextAssembler([candidate])  # type: ignore[list-item]
        assert reason(caught) == "provider_refused"
    with pytest.raises(KnowledgeBindingError) as caught:
        engine.session(
            namespace, "ops-8", knowledge=knowledge, workspace=WorkspaceOptions(tmp_path)
        )
    assert reason(caught) == "provider_refused"
    assert list(filter_events(engine, EventFilter(session_id="ops-8"))) == []


def test_resume_requires_the_same_binding(tmp_path: Path, namespace: Namespace) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store) as engine:
        knowledge, _ = bound(3)
        engine.session(namespace, "ops-9", knowledge=knowledge).close()
        engine.session(namespace, "plain").close()
    with MemoryEngine.open(store) as engine:  # another process, later
        same, _ = bound(3)
        engine.session(namespace, "ops-9", knowledge=same).close()
        cases = [
            ("ops-9", None, "binding_missing"),
            ("ops-9", bound(4)[0], "binding_mismatch"),
            ("ops-9", bound(3, max_total_bytes=1024)[0], "binding_mismatch"),
            ("plain", bound(3)[0], "binding_not_recorded"),
        ]
        for session_id, knowledge_or_none, code in cases:
            with pytest.raises(KnowledgeBindingError) as caught:
                engine.session(namespace, session_id, knowledge=knowledge_or_none)
            assert reason(caught) == code, session_id
        bound_events = list(filter_events(engine, EventFilter(types=("KnowledgeBound",))))
        assert len(bound_events) == 1


def test_extraction_still_records_and_explain_shows_the_binding(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    knowledge, _ = bound()
    session = engine.session(namespace, "ops-10", knowledge=knowledge)
    session.extractor.provide(1, [make_item("Alice owns the deploy runbook.")])  # type: ignore[attr-defined]
    session.observe_final_transcript(1, "user: I own the deploy runbook.")
    report = session.finish()
    lineage = explain(engine, str(report.activated[0]))
    context = lineage.origins[0].context
    assert [c.type for c in context] == ["KnowledgeBound"]
    assert "acme/runbooks@2.1.0#3" in context[0].detail
    result = CliRunner().invoke(
        app,
        ["explain", str(report.activated[0])[:8], "--store", str(engine.path)],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0 and "KnowledgeBound" in result.stdout


def test_binding_ids_differ_for_any_field() -> None:
    base = binding()
    assert base.binding_id() == binding().binding_id()
    changed = msgspec.structs.replace(base, capability_digest=digest("other"))
    assert changed.binding_id() != base.binding_id()


def test_context_errors_are_typed_and_survive_pickling() -> None:
    import pickle

    from memory_ledger.commands.context.compaction import CompactionError
    from memory_ledger.commands.context.summarizers import SummarizerError
    from memory_ledger.commands.workspace import WorkspaceError
    from memory_ledger.commands.workspace.files import OutsideRootError
    from memory_ledger.ledger.errors import MemoryLedgerError

    errors = [
        KnowledgeBindingError("generation_drift", "drifted"),
        WorkspaceError("closed", "closed"),
        CompactionError("no room", "summarizer_failed"),
        SummarizerError("timeout", "slow"),
        OutsideRootError("a symbolic link"),
    ]
    for error in errors:
        again = pickle.loads(pickle.dumps(error))
        assert isinstance(again, MemoryLedgerError) and type(again) is type(error)
        assert (again.reason_code, str(again)) == (error.reason_code, str(error))
    assert isinstance(errors[4], OSError) and errors[4].reason_code == "outside_workspace_root"
