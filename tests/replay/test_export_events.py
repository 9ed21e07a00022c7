"""Events as ``events --json`` and ``export`` render them: an event's own fields never
collide with the envelope (KnowledgeBound's package ``version``), every event class of the
catalog exports and reads back in both formats, and an export that fails leaves nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.ledger.events import EVENT_CLASSES, LedgerEvent
from memory_ledger.replay import export_store
from memory_ledger.replay.audit import export as export_module
from memory_ledger.replay.audit.export import ExportFormat, write_events
from memory_ledger.replay.audit.timeline import ENVELOPE_KEYS, event_record
from memory_ledger.replay.cli.app import app
from tests.knowledge_helpers import PackageProvider, binding
from tests.ledger.test_events_mapper import struct_strategy

runner = CliRunner()


def knowledge_store(folder: Path) -> Path:
    """A store whose ledger holds a KnowledgeBound event (package version "2.1.0")."""
    from memory_ledger.commands.context import BoundKnowledge

    provider = PackageProvider(binding(3))
    with MemoryEngine.open(folder) as engine:
        namespace = Namespace("acme", "alice", "assistant")
        with engine.session(
            namespace, "ops-1", knowledge=BoundKnowledge(provider.binding, provider)
        ) as session:
            session.observe_final_transcript(1, "user: hello\nassistant: hi")
    return folder


def test_no_event_field_is_named_like_an_envelope_key() -> None:
    base = {f.name for f in msgspec.structs.fields(LedgerEvent)}
    for cls in EVENT_CLASSES:
        own = {f.name for f in msgspec.structs.fields(cls)} - base
        assert not own & ENVELOPE_KEYS, cls.__name__


def test_events_json_keeps_knowledge_bound_version_and_the_stream_version(
    tmp_path: Path,
) -> None:
    store = knowledge_store(tmp_path / "store")
    listed = runner.invoke(
        app, ["events", "--store", str(store), "--json", "--type", "KnowledgeBound"]
    )
    assert listed.exit_code == 0, listed.output
    (record,) = [json.loads(line) for line in listed.stdout.splitlines()]
    assert record["version"] == "2.1.0"  # the package's version
    assert record["stream_version"] == 2  # after SessionOpened in the session stream
    assert record["package_id"] == "acme/runbooks"


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_a_store_with_a_knowledge_binding_exports(tmp_path: Path, fmt: str) -> None:
    store = knowledge_store(tmp_path / "store")
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["export", "--store", str(store), "--out", str(out), "--format", fmt, "--json"]
    )
    assert result.exit_code == 0, result.output
    assert (out / "manifest.json").is_file()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


# Every event class, both formats ---------------------------------------------------------

any_event = st.one_of(*(struct_strategy(cls) for cls in EVENT_CLASSES))


def as_json(value: Any) -> Any:
    """``value`` as JSON gives it back (how both formats hold it)."""
    return json.loads(msgspec.json.encode(value))


def rebuilt_fields(record: dict[str, Any]) -> dict[str, Any]:
    """The event's own fields from a record, under the event's names."""
    fields = {k: v for k, v in record.items() if k not in ENVELOPE_KEYS}
    return {
        "originator_id": record["stream_id"],
        "originator_version": record["stream_version"],
        "recorded_at": record["recorded_at"],
        **fields,
    }


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    events=st.lists(any_event, min_size=1, max_size=6), fmt=st.sampled_from(["parquet", "jsonl"])
)
def test_every_event_class_exports_and_reads_back(
    tmp_path: Path, events: list[LedgerEvent], fmt: ExportFormat
) -> None:
    path = tmp_path / f"events.{fmt}"
    pairs = list(enumerate(events, start=1))
    assert write_events(pairs, path, fmt) == len(events)
    expected = [as_json(event_record(at, event)) for at, event in pairs]
    if fmt == "jsonl":
        read = [json.loads(line) for line in path.read_bytes().split(b"\n") if line]
    else:
        rows = pq.read_table(path).to_pylist()
        read = [json.loads(row["payload"]) for row in rows]
        for row, (at, event) in zip(rows, pairs, strict=True):
            assert row["position"] == at
            assert row["stream_id"] == str(event.originator_id)
            assert row["stream_version"] == event.originator_version
            assert row["recorded_at"] == event.recorded_at
            if type(event).__name__ != "ErasedPayload":
                assert row["type"] == type(event).__name__
                space = event.namespace
                assert (row["tenant"], row["principal"], row["scope_id"]) == (
                    space.tenant,
                    space.principal,
                    space.scope_id,
                )
            session = getattr(event, "session_id", None)
            assert row["session_id"] == (session if isinstance(session, str) else None)
            occurred = getattr(event, "occurred_at", None)
            assert row["occurred_at"] == occurred
    assert read == expected
    for record, (_, event) in zip(read, pairs, strict=True):
        if type(event).__name__ == "ErasedPayload":
            continue  # only what stays in clear
        every = {name: getattr(event, name) for name in event.__struct_fields__}
        assert rebuilt_fields(record) == as_json(every)  # every field, under its own name
        # (also those a record stores without, equal to their default: DirectCommandApplied)


# All or nothing -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return knowledge_store(tmp_path_factory.mktemp("small") / "store")


def fail_events(*_: Any, **__: Any) -> int:
    raise OSError(28, "No space left on device")


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_a_failed_export_leaves_nothing(
    small_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: ExportFormat
) -> None:
    monkeypatch.setattr(export_module, "write_events", fail_events)
    out = tmp_path / "new" / "deeper" / "out"
    with MemoryEngine.open(small_store, create=False) as engine, pytest.raises(OSError):
        export_store(engine, out, fmt=fmt)
    assert list(tmp_path.iterdir()) == []  # not the folder, its parents or a partial copy
    failed = runner.invoke(
        app, ["export", "--store", str(small_store), "--out", str(out), "--format", fmt]
    )
    assert failed.exit_code == 2 and "No space left" in failed.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_failed_forced_export_leaves_the_folder_as_it_was(
    small_store: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    with MemoryEngine.open(small_store, create=False) as engine:
        export_store(engine, out, fmt="jsonl")
    (out / "notes.txt").write_text("keep me")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    monkeypatch.setattr(export_module, "write_events", fail_events)
    with MemoryEngine.open(small_store, create=False) as engine, pytest.raises(OSError):
        export_store(engine, out, fmt="jsonl", force=True)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]
