"""The session API as plain scenarios: supersede, shadowing, commands, snapshots, admission."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import UUID

import msgspec
import pytest

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.commands.config import ConfigError, load_config
from memory_ledger.commands.context import ContextAssembler, ContextItem, ContextQuery
from memory_ledger.commands.context.assembler import StaticContextProvider
from memory_ledger.commands.errors import (
    CommandRejectedError,
    ExtractionFailedError,
    NotAdmittedError,
    StoreUnavailableError,
)
from memory_ledger.commands.extraction import ExtractionRequest
from memory_ledger.commands.recall import RecallScope
from memory_ledger.commands.session import SessionMemoryProvider
from memory_ledger.ledger.events import (
    AdmissionRevoked,
    CandidateRejected,
    ExtractionAbandoned,
    MemoryActivated,
    MemoryAdmitted,
    MemoryConflictMarked,
    MemoryPruned,
    MemorySuperseded,
    MemoryUsed,
    RecallServed,
)
from memory_ledger.ledger.ids import InvalidNamespaceError
from memory_ledger.projections import table_digests
from memory_ledger.replay.audit.timeline import iter_events
from tests.conftest import make_item
from tests.projections.test_projections import fresh_digests


def types_of(engine: MemoryEngine, cls: type) -> list[Any]:
    return [e for _, e in iter_events(engine) if isinstance(e, cls)]


class Chat:
    """A session plus its recorded extractor, for short scenarios."""

    def __init__(self, engine: MemoryEngine, ns: Namespace, sid: str, **kw: Any) -> None:
        self.extractor = RecordedExtractor()
        self.session = engine.session(ns, sid, extractor=self.extractor, **kw)
        self.turn = 0

    def say(self, text: str, *items: dict[str, Any]) -> Any:
        self.turn += 1
        self.extractor.provide(self.turn, list(items))
        return self.session.observe_final_transcript(self.turn, text)


def statements(engine: MemoryEngine, ns: Namespace) -> set[str]:
    engine.catch_up()
    return {r["statement"] for r in engine.canonical.active_memories(*msgspec.structs.astuple(ns))}


def test_a_name_stated_twice_leaves_one_active_value(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    first = Chat(engine, namespace, "s1")
    first.say(
        "user: call me Bob",
        make_item("Alice's nickname is Bob.", predicate="nickname", value="Bob"),
    )
    first.session.finish()
    second = Chat(engine, namespace, "s2")
    second.say(
        "user: actually Rob",
        make_item("Alice's nickname is Rob.", predicate="nickname", value="Rob"),
    )
    report = second.session.finish()
    assert len(report.activated) == 1 and len(report.superseded) == 1
    assert statements(engine, namespace) == {"Alice's nickname is Rob."}
    (superseded,) = types_of(engine, MemorySuperseded)
    assert superseded.cause == "same_subject_predicate"
    old = engine.canonical.get(str(superseded.originator_id))
    assert old is not None and old["status"] == "superseded"
    assert old["superseded_by"] == str(report.activated[0])
    new = engine.canonical.get(str(report.activated[0]))
    assert new is not None and new["supersedes"] == [str(superseded.originator_id)]


def test_love_then_hate_never_leaves_the_subject_without_a_value(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    chat = Chat(engine, namespace, "s1")
    chat.say(
        "user: I love jazz",
        make_item("Alice loves jazz.", predicate="feeling_about_jazz", value="love"),
    )
    chat.session.finish()
    assert statements(engine, namespace) == {"Alice loves jazz."}
    chat2 = Chat(engine, namespace, "s2")
    chat2.say(
        "user: I hate jazz now",
        make_item("Alice hates jazz.", predicate="feeling_about_jazz", value="hate"),
    )
    chat2.session.finish()
    assert statements(engine, namespace) == {"Alice hates jazz."}
    # Without predicates both stay: still never empty.
    chat3 = Chat(engine, namespace, "s3")
    chat3.say("user: I love opera", make_item("Alice loves opera."))
    chat3.say("user: I hate opera", make_item("Alice hates opera."))
    chat3.session.finish()
    assert {"Alice loves opera.", "Alice hates opera."} <= statements(engine, namespace)


def test_additive_fact_under_another_predicate_supersedes_nothing(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    chat = Chat(engine, namespace, "s1")
    chat.say("u", make_item("Alice lives in Lisbon.", predicate="lives_in", value="Lisbon"))
    chat.say("u2", make_item("Alice works in Porto.", predicate="works_in", value="Porto"))
    report = chat.session.finish()
    assert len(report.activated) == 2 and report.superseded == ()


def test_identical_item_twice_and_finish_twice_change_nothing(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    chat = Chat(engine, namespace, "s1")
    item = make_item("Alice's cat is called Miso.", predicate="cat_name", value="Miso")
    chat.say("u1", item)
    chat.session.finish()
    digests = None
    for n in range(2):
        again = Chat(engine, namespace, f"again-{n}")
        again.say("u1", item)
        again.session.finish()
        again.session.finish()
        engine.catch_up()
        (row,) = engine.canonical.active_memories(*msgspec.structs.astuple(namespace))
        assert row["statement"] == item["statement"]
        if digests is None:
            digests = row["status"], row["predicate"], row["value"]
        assert (row["status"], row["predicate"], row["value"]) == digests
    assert len(types_of(engine, MemoryActivated)) == 1
    assert types_of(engine, MemorySuperseded) == []


def test_declared_conflict_stays_visible_on_both(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    chat = Chat(engine, namespace, "s1")
    chat.say("u", make_item("Alice was born in 1990."))
    chat.session.finish()
    (first,) = engine.recall(namespace, "born", 1).results

    class Conflicting:
        extractor_id = "model"

        def extract(self, request: ExtractionRequest) -> list[Any]:
            assert [r.memory_id for r in request.related] == [first.memory_id]
            return [make_item("Alice was born in 1991.", conflicts_with=[first.memory_id])]

    session = engine.session(namespace, "s2", extractor=Conflicting())
    session.observe_final_transcript(1, "user: I was born in 1991, Alice born")
    report = session.finish()
    assert len(report.conflicts) == 2
    assert len(types_of(engine, MemoryConflictMarked)) == 2
    assert {h.statement for h in engine.recall(namespace, "born", 5).results} == {
        "Alice was born in 1990.",
        "Alice was born in 1991.",
    }
    engine.catch_up()
    rows = engine.canonical.active_memories(*msgspec.structs.astuple(namespace))
    assert {r["status"] for r in rows} == {"conflicted"}


def test_chinese_transcript_recalled_by_chinese_query(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    chat = Chat(engine, namespace, "s1")
    chat.say("用户：我下个月去上海出差", make_item("Alice 下个月去上海出差。", subject="Alice"))
    chat.say("用户：我喜欢喝绿茶", make_item("Alice 喜欢喝绿茶。", subject="Alice"))
    chat.session.finish()
    hits = chat.session.recall("上海出差", turn_id=3).results
    assert hits[0].statement == "Alice 下个月去上海出差。"


def test_keyless_token_shapes_and_split_keys_never_stored(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    """The engine's own MCP token, npm and Hugging Face tokens and a key split by zero-width
    characters: redacted in the transcript, refused in items (statement or reason) and in
    explicit commands, so none reaches the ledger."""
    from memory_ledger.replay.mcp import new_token

    mlt = new_token()
    npm = "npm_" + "Q2w3E4r5T6y7U8i9O0pA1sD2fG3hJ4kL5zX6"
    hf = "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNmQwErTyUi"
    ghp = "ghp_" + "Q2w3E4r5T6y7U8i9O0pA1sD2fG3hJ4kL5zX6"
    split = ghp[:8] + "\u200b" + ghp[8:30] + "\u200d" + ghp[30:]
    chat = Chat(engine, namespace, "s1")
    outcome = chat.say(
        f"user: server token {mlt}, npm {npm}, hub {hf}, gh {split}; wifi pass is "
        "CorrectHorseBatteryStaple",
        make_item(f"Alice's MCP token is {mlt}."),
        make_item("Alice publishes packages.", reason=f"needs {npm} to publish"),
        make_item(f"Alice's GitHub token is {split}."),
        make_item("Alice uses Postgres."),
    )
    assert outcome.redactions == 5 and outcome.candidates == 1 and outcome.rejected == 3
    for statement in (
        f"my hub token {hf}",
        f"gh {split}",
        "wifi pass is CorrectHorseBatteryStaple",
    ):
        with pytest.raises(CommandRejectedError) as rejected:
            chat.session.apply_explicit_command("remember", statement, 1)
        assert rejected.value.reason_code == "secret_detected"
    chat.session.finish()
    dumped = "\n".join(msgspec.json.encode(event).decode() for _, event in iter_events(engine))
    for secret in (mlt, npm, hf, ghp[30:], "CorrectHorseBatteryStaple"):
        assert secret not in dumped


def test_pasted_api_key_never_stored_or_recalled(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    key = "sk-proj-" + "Q2w3E4r5T6y7U8i9O0pA1sD2fG3hJ4kL5zX6cV7bN8m"
    chat = Chat(engine, namespace, "s1")
    outcome = chat.say(
        f"user: my key is {key}, remember I use Postgres",
        make_item(f"Alice's OpenAI key is {key}."),
        make_item("Alice uses Postgres."),
    )
    assert outcome.redactions == 1 and outcome.candidates == 1 and outcome.rejected == 1
    with pytest.raises(CommandRejectedError) as rejected:
        chat.session.apply_explicit_command("remember", f"my key is {key}", 1)
    assert rejected.value.reason_code == "secret_detected"
    chat.session.recall(f"key {key}", turn_id=1)
    chat.session.finish()
    for _, event in iter_events(engine):
        assert key not in msgspec.json.encode(event).decode()
    engine.catch_up()
    for (table,) in engine.projections.conn.execute("SHOW TABLES").fetchall():
        dump = str(engine.projections.conn.execute(f"SELECT * FROM {table}").fetchall())
        assert key not in dump, table
    for hit in engine.recall(namespace, f"key {key} Postgres", 10).results:
        assert key not in hit.statement


def test_two_tenants_in_threads_never_see_each_other(engine: MemoryEngine) -> None:
    tenants = [Namespace("acme", "u", "x"), Namespace("globex", "u", "x")]
    errors: list[BaseException] = []

    def work(ns: Namespace) -> None:
        try:
            chat = Chat(engine, ns, "s")
            for n in range(10):
                chat.say(f"u{n}", make_item(f"{ns.tenant} secret plan number {n}."))
            chat.session.finish()
            for hit in chat.session.recall("secret plan number", k=20).results:
                assert hit.statement.startswith(ns.tenant), hit.statement
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(ns,)) for ns in tenants]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for ns in tenants:
        hits = engine.recall(ns, "secret plan number", 50).results
        assert len(hits) == 10 and all(h.statement.startswith(ns.tenant) for h in hits)
    for _, event in iter_events(engine):
        assert event.namespace in tenants


def test_correction_mid_session_visible_to_next_recall(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    chat = Chat(engine, namespace, "s1")
    chat.say(
        "u",
        make_item("Alice's favourite colour is blue.", predicate="favourite_colour", value="blue"),
    )
    chat.session.finish()
    chat2 = Chat(engine, namespace, "s2")
    result = chat2.session.apply_explicit_command(
        "correct", "Alice's favourite colour is green.", 1
    )
    assert result.target is not None
    hits = chat2.session.recall("favourite colour", turn_id=1).results
    assert [h.statement for h in hits] == ["Alice's favourite colour is green."]
    assert hits[0].origin == "session"
    assert [v.value for v in chat2.session.known_values()] == [None] or all(
        v.statement.endswith("green.") for v in chat2.session.known_values()
    )
    report = chat2.session.finish()
    assert len(report.superseded) == 1 and len(report.activated) == 1
    assert statements(engine, namespace) == {"Alice's favourite colour is green."}
    (superseded,) = types_of(engine, MemorySuperseded)
    assert superseded.cause in ("correction", "same_subject_predicate")


def test_forget_and_pin_commands(engine: MemoryEngine, namespace: Namespace) -> None:
    chat = Chat(engine, namespace, "s1")
    chat.say("u", make_item("Alice's gym is FitZone."), make_item("Alice's dentist is Dr Rui."))
    chat.session.finish()
    chat2 = Chat(engine, namespace, "s2")
    forget = chat2.session.apply_explicit_command("forget", "gym FitZone", 1)
    pin = chat2.session.apply_explicit_command("pin", "dentist Dr Rui", 1)
    again = chat2.session.apply_explicit_command("forget", "gym FitZone", 1)
    assert again.already_applied and again.command_id == forget.command_id
    assert [c.intent for c in chat2.session.pending_explicit_commands()] == ["forget", "pin"]
    assert "Alice's gym is FitZone." not in chat2.session.known_statements()
    assert all("FitZone" not in h.statement for h in chat2.session.recall("gym", 1).results)
    report = chat2.session.finish()
    assert report.forgotten == (forget.target,) and report.pinned == (pin.target,)
    assert chat2.session.pending_explicit_commands() == []
    assert statements(engine, namespace) == {"Alice's dentist is Dr Rui."}
    row = engine.canonical.get(str(pin.target))
    assert row is not None and row["pinned"]
    with pytest.raises(CommandRejectedError):
        chat2.session.apply_explicit_command("obliterate", "x", 1)  # type: ignore[arg-type]


def test_manual_policy_needs_manual_or_verification_evidence(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    chat = Chat(engine, namespace, "s1", activation_policy="manual")
    chat.say("u", make_item("Alice is allergic to peanuts.", importance=1.0, confidence=1.0))
    (candidate,) = chat.session.state.candidates
    with pytest.raises(CommandRejectedError) as denied:
        chat.session.activate_candidate(candidate.candidate_id, "auto", ["model said so"])  # type: ignore[arg-type]
    assert denied.value.reason_code == "decision_not_allowed"
    with pytest.raises(CommandRejectedError):
        chat.session.activate_candidate(candidate.candidate_id, "manual", [])
    assert statements(engine, namespace) == set()  # candidates are never served as canonical
    assert chat.session.recall_scoped("peanuts", 1, RecallScope(source="canonical")).results == ()
    result = chat.session.activate_candidate(
        candidate.candidate_id, "verification", ["doctor note"]
    )
    (activated,) = types_of(engine, MemoryActivated)
    assert activated.decision == "verification" and activated.decision_evidence == ("doctor note",)
    assert activated.originator_id == result.memory_id
    report = chat.session.finish()
    assert report.activated == () and report.left_as_candidates == 0
    assert len(types_of(engine, MemoryActivated)) == 1


def test_manual_policy_finish_leaves_candidates(engine: MemoryEngine, namespace: Namespace) -> None:
    chat = Chat(engine, namespace, "s1", activation_policy="manual")
    chat.say("u", make_item("Alice likes kayaking."), make_item("Alice owns a kayak."))
    report = chat.session.finish()
    assert report.activated == () and report.left_as_candidates == 2
    engine.catch_up()
    rows = engine.projections.conn.execute(
        "SELECT status, count(*) FROM session_candidates GROUP BY ALL"
    ).fetchall()
    assert rows == [("candidate", 2)]


def test_snapshot_generation_guard_and_recall_paths(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    seed = Chat(engine, namespace, "seed")
    seed.say(
        "u", make_item("Alice's flight to Tokyo leaves Friday."), make_item("Alice likes sushi.")
    )
    seed.session.finish()
    chat = Chat(engine, namespace, "s1")
    session = chat.session
    snapshot = session.prepare(1, "user: when does my Tokyo flight leave?")
    assert snapshot.published and snapshot.items
    generation = session.begin_turn(1)
    assert generation == 1 and session.current_turn() == 1
    assert session.active_snapshot().snapshot_id == snapshot.snapshot_id
    fast = session.recall("Tokyo flight", turn_id=1)
    assert fast.path == "snapshot"
    assert fast.results[0].statement == "Alice's flight to Tokyo leaves Friday."
    other = session.recall("sushi", turn_id=1)
    assert other.path == "fused" and other.results[0].statement == "Alice likes sushi."
    scoped = session.recall_scoped("Tokyo flight", 1, RecallScope(source="canonical"))
    assert scoped.path == "live"
    # A stale preparation (a newer turn began meanwhile) is not published.
    stale_generation = session.state.generation
    session.begin_turn(2)
    assert session.state.generation == stale_generation + 1
    late = session.prepare(2, "sushi")
    assert late.published and late.generation == session.state.generation
    session.flush_reads()
    served = types_of(engine, RecallServed)
    assert [s.path for s in served] == ["snapshot", "fused", "live"]
    assert served[0].results[0].revision == 1


def test_stale_prepare_is_not_published(engine: MemoryEngine, namespace: Namespace) -> None:
    chat = Chat(engine, namespace, "s1")
    session = chat.session
    recall = session._recall
    original = recall.live

    def slow_live(*args: Any, **kwargs: Any) -> Any:
        session.begin_turn(5)  # a newer turn begins while the preparation runs
        return original(*args, **kwargs)

    recall.live = slow_live  # type: ignore[method-assign]
    result = session.prepare(4, "anything")
    assert not result.published
    assert session.prepared_snapshot().snapshot_id is None


def test_hints_reorder_but_never_filter(engine: MemoryEngine, namespace: Namespace) -> None:
    chat = Chat(engine, namespace, "s1")
    chat.say(
        "u",
        make_item("Alice plays tennis on Sundays.", subject="Alice", predicate="sport"),
        make_item("Bob plays tennis on Mondays.", subject="Bob", predicate="sport"),
        make_item("Carol plays tennis badly.", subject="Carol", predicate="skill"),
    )
    chat.session.finish()
    plain = chat.session.recall_scoped("tennis", 1, RecallScope(), k=5)
    hinted = chat.session.recall_scoped(
        "tennis", 1, RecallScope(), about="Carol", attribute="skill", k=5
    )
    assert {h.memory_id for h in plain.results} == {h.memory_id for h in hinted.results}
    assert hinted.results[0].subject == "Carol"
    workspace = chat.session.recall_scoped("tennis", 1, RecallScope(item_scope="workspace"))
    assert workspace.results == ()


def test_session_facts_shadow_canonical_and_vocabulary(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    old = Chat(engine, namespace, "s1")
    old.say("u", make_item("Alice's diet is vegetarian.", predicate="diet", value="vegetarian"))
    old.session.finish()
    now = Chat(engine, namespace, "s2")
    now.say("u", make_item("Alice's diet is pescatarian.", predicate="diet", value="pescatarian"))
    values = now.session.known_values()
    assert [(v.predicate, v.value, v.origin) for v in values] == [
        ("diet", "pescatarian", "session")
    ]
    assert now.session.known_predicates()[0] == "diet"
    hits = now.session.recall("diet", 1).results
    assert [h.statement for h in hits] == ["Alice's diet is pescatarian."]
    assert "diet" in now.session.memory_map()
    session_only = now.session.recall_scoped("diet", 1, RecallScope(source="session"))
    assert [h.origin for h in session_only.results] == ["session"]


def test_admission_revocation_and_use(engine: MemoryEngine, namespace: Namespace) -> None:
    chat = Chat(engine, namespace, "s1")
    chat.say("u", make_item("Alice's team uses Rust.", predicate="team_language", value="Rust"))
    chat.session.finish()
    chat2 = Chat(engine, namespace, "s2")
    assembler = ContextAssembler(
        [
            StaticContextProvider(
                "instructions",
                [
                    ContextItem(
                        item_id="agents",
                        source="instructions",
                        kind="instruction",
                        text="Answer briefly.",
                        relevance=1.0,
                        required=True,
                    )
                ],
            ),
            SessionMemoryProvider(chat2.session),
        ]
    )
    context = assembler.assemble(
        ContextQuery(session_id="s2", turn_id=1, query="team language Rust")
    )
    memory_items = [i for i in context.items if i.memory_id]
    assert len(memory_items) == 1 and "Answer briefly." in context.rendered
    report = chat2.session.admit(1, memory_items)
    assert len(report.admitted) == 1 and report.revoked == ()
    mid = UUID(memory_items[0].memory_id or "")
    used = chat2.session.record_use(1, mid)
    assert used == engine.head
    with pytest.raises(NotAdmittedError):
        chat2.session.record_use(2, mid)
    # The memory is superseded in another session: a new admission of the old revision
    # is revoked before the model call.
    chat3 = Chat(engine, namespace, "s3")
    chat3.say("u", make_item("Alice's team uses Go.", predicate="team_language", value="Go"))
    chat3.session.finish()
    stale = chat2.session.admit(2, [(mid, 1)])
    assert stale.revoked == ((mid, 1),)
    (revoked,) = types_of(engine, AdmissionRevoked)
    assert revoked.reason == "inactive"
    assert len(types_of(engine, MemoryAdmitted)) == 2 and len(types_of(engine, MemoryUsed)) == 1
    engine.catch_up()
    row = engine.canonical.get(str(mid))
    assert row is not None and (row["admission_count"], row["use_count"]) == (2, 1)


def test_prune_spares_protected_items(engine: MemoryEngine, namespace: Namespace) -> None:
    chat = Chat(engine, namespace, "s1")
    chat.say(
        "u",
        make_item("Alice once mentioned a rainy Tuesday.", importance=0.7),
        make_item("Alice's passport number ends in 42.", importance=0.7),
        make_item("Alice likes maps.", importance=0.7),
        make_item("Alice's blood type is O+.", importance=0.95),
    )
    chat.session.finish()
    chat2 = Chat(engine, namespace, "s2")
    chat2.session.apply_explicit_command("pin", "passport number ends in 42", 1)
    chat2.say("u", make_item("Alice likes maps.", importance=0.7))  # reinforced: consolidated
    chat2.session.finish()
    chat3 = Chat(engine, namespace, "s3")
    pruned = chat3.session.prune(older_than=datetime.now(UTC) + timedelta(seconds=5))
    assert len(pruned) == 1
    (event,) = types_of(engine, MemoryPruned)
    row = engine.canonical.get(str(event.originator_id))
    assert row is not None and row["statement"] == "Alice once mentioned a rainy Tuesday."
    assert chat3.session.prune(older_than=datetime(2000, 1, 1, tzinfo=UTC)) == []


class SlowExtractor:
    extractor_id = "slow"

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.started = threading.Event()

    def extract(self, request: ExtractionRequest) -> list[Any]:
        self.started.set()
        time.sleep(self.delay)
        return [make_item(f"Fact from turn {request.turn_id}.")]


def test_background_extraction_does_not_delay_the_turn(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    extractor = SlowExtractor(0.3)
    session = engine.session(namespace, "bg", extractor=extractor, extraction_mode="background")
    outcome = session.observe_final_transcript(1, "user: hello")
    assert outcome.extraction_pending and outcome.evidence_position == engine.head
    report = session.finish()  # waits for accepted extraction first
    assert len(report.activated) == 1


def test_close_records_abandoned_extraction(
    engine: MemoryEngine, namespace: Namespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("memory_ledger.commands.session.memory_session.CLOSE_WAIT_SECONDS", 0.2)
    extractor = SlowExtractor(1.5)
    session = engine.session(namespace, "bg", extractor=extractor, extraction_mode="background")
    session.observe_final_transcript(1, "user: hello")
    assert extractor.started.wait(5)
    session.close()
    (abandoned,) = types_of(engine, ExtractionAbandoned)
    assert abandoned.turn_id == 1
    reopened = engine.session(namespace, "bg", extractor=RecordedExtractor())
    assert reopened.pending_extractions() == [1]
    time.sleep(1.5)  # let the abandoned worker finish before the engine closes


def test_on_turn_complete_retries_pending_and_flushes(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    chat = Chat(engine, namespace, "s1")
    chat.say("u", make_item("Alice rides a blue bike."))
    chat.session.recall("bike", 1)
    work = chat.session.on_turn_complete(1)
    kinds = [w.kind for w in work]
    assert kinds[:2] == ["turn_completed", "flush_reads"]
    assert len(types_of(engine, RecallServed)) == 1
    assert chat.session.is_idle(idle_seconds=0.0)
    assert not chat.session.is_idle(idle_seconds=3600)


def test_host_conveniences(engine: MemoryEngine, namespace: Namespace) -> None:
    chat = Chat(engine, namespace, "s1")
    chat.session.remember_success(
        "release preflight", ["bash", "search"], "checks passed after provider verification"
    )
    chat.session.remember_failure("provider verification", "missing PROVIDER_BASE_URL", ["bash"])
    assert [h.subject for h in chat.session.recall_by_tags(["bash"], 5)] == [
        "provider verification",
        "release preflight",
    ]
    assert chat.session.memory_recent(1)[0].subject == "provider verification"
    similar = chat.session.recall_similar("provider verification", 5)
    assert similar and similar[0].subject == "provider verification"
    report = chat.session.finish()
    assert len(report.activated) == 2
    engine.catch_up()
    rows = engine.canonical.active_memories(*msgspec.structs.astuple(namespace))
    assert {r["source"] for r in rows} == {"workflow", "failure"}
    assert {r["decision"] for r in rows} == {"manual"}


def test_config_from_toml_and_overrides(tmp_path: Path, namespace: Namespace) -> None:
    toml = tmp_path / "memory-ledger.toml"
    toml.write_text(
        "[memory]\nllm_extraction_max_items = 3\nactivation_policy = 'manual'\nstore_dir = 'data'\n"
    )
    config = load_config(toml)
    assert config.llm_extraction_max_items == 3 and config.store_dir == str(tmp_path / "data")
    with MemoryEngine.open(config=config) as engine:
        assert engine.path == tmp_path / "data"
        session = engine.session(namespace, "s1", llm_extraction_max_items=2)
        assert session.config().activation_policy == "manual"
        assert session.config().llm_extraction_max_items == 2
        with pytest.raises(ConfigError, match="unknown field"):
            engine.session(namespace, "s2", no_such_key=1)
    bad = tmp_path / "bad.toml"
    bad.write_text("[memory]\nrecall_k = 'many'\n")
    with pytest.raises(ConfigError, match="recall_k"):
        load_config(bad)
    blocker = tmp_path / "blocker"
    blocker.write_text("x")
    with pytest.raises(StoreUnavailableError, match="blocker"):
        MemoryEngine.open(config=load_config(toml, store_dir=str(blocker / "store")))


def test_every_locomo_fact_passes_validation(locomo_file: Path) -> None:
    from memory_ledger.commands.extraction import Rejection, validate_item
    from memory_ledger.replay.scripts.locomo import convert_sample, load_samples

    total = 0
    for sample in load_samples(locomo_file):
        for step in convert_sample(sample).steps:
            for item in step.get("extracted", []):
                total += 1
                outcome = validate_item(item)
                assert not isinstance(outcome, Rejection), (item["statement"], outcome)
    assert total > 1500


def test_api_sequence_keeps_projection_equal_to_rebuild(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    chat = Chat(engine, namespace, "s1")
    chat.say("u", make_item("Alice's nickname is Al.", predicate="nickname"))
    chat.session.prepare(2, "nickname")
    chat.session.begin_turn(2)
    chat.session.recall("nickname", 2)
    hits = chat.session.recall("nickname", 2).results
    chat.session.finish()
    chat2 = Chat(engine, namespace, "s2")
    chat2.say("u", make_item("Alice's nickname is Ally.", predicate="nickname"))
    chat2.session.apply_explicit_command("pin", "nickname Ally", 1)
    chat2.session.admit(1, [h for h in hits if h.revision])
    chat2.session.finish()
    chat2.session.flush_reads()
    engine.catch_up()
    assert table_digests(engine.projections.conn) == fresh_digests(engine)


def test_malformed_model_output_records_one_rejection(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    from memory_ledger.commands.extraction.openai import ModelOutputError

    class Broken:
        extractor_id = "model"

        def __init__(self, code: str) -> None:
            self.code = code

        def extract(self, request: ExtractionRequest) -> list[Any]:
            raise ModelOutputError(self.code, "the endpoint replied badly")  # type: ignore[arg-type]

    session = engine.session(namespace, "s1", extractor=Broken("not_json"))
    outcome = session.observe_final_transcript(1, "user: hello")
    assert outcome.candidates == 0 and outcome.rejected == 1
    assert session.pending_extractions() == []
    (rejection,) = types_of(engine, CandidateRejected)
    assert rejection.reason_code == "model_not_json"
    flaky = engine.session(namespace, "s2", extractor=Broken("timeout"))
    with pytest.raises(ExtractionFailedError):
        flaky.observe_final_transcript(1, "user: hello")
    assert flaky.pending_extractions() == [1]


def test_recall_index_survives_unrelated_writes(
    engine: MemoryEngine, namespace: Namespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    import memory_ledger.commands.recall.index as recall_module

    chat = Chat(engine, namespace, "s1")
    chat.say("u", make_item("Alice's dog is called Rex."))
    chat.session.finish()
    assert engine.recall(namespace, "dog", 5).results  # builds the namespace's index
    builds: list[int] = []
    real_build = recall_module.build_index

    def counting_build(docs: Any) -> Any:
        docs = list(docs)
        if any(d.statement.startswith("Alice") for d in docs):
            builds.append(1)  # count only this namespace's index
        return real_build(docs)

    monkeypatch.setattr(recall_module, "build_index", counting_build)
    assert engine.recall(namespace, "dog", 5).results  # built already
    assert builds == []
    other = Chat(engine, Namespace("other", "bob", "x"), "s1")
    other.say("u", make_item("Bob's dog is called Fido."))
    other.session.finish()  # another namespace's content changes
    chat.session.recall("dog", 1)
    chat.session.flush_reads()  # recall records and counters move the position too
    assert engine.recall(namespace, "dog", 5).results[0].statement == "Alice's dog is called Rex."
    assert builds == []  # none of that rebuilt this namespace's index
    again = Chat(engine, namespace, "s2")
    again.say("u", make_item("Alice's cat is called Tom."))
    again.session.finish()
    assert {h.statement for h in engine.recall(namespace, "called", 5).results} == {
        "Alice's dog is called Rex.",
        "Alice's cat is called Tom.",
    }
    assert builds == []  # its own content changed: refreshed in place, not rebuilt


def test_read_records_are_flushed_off_the_recall_path(
    engine: MemoryEngine, namespace: Namespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = Chat(engine, namespace, "s1")
    chat.say("u", make_item("Alice's dog is called Rex."))
    chat.session.finish()
    flushed_on: list[str] = []
    real_flush = chat.session.stream.flush_reads

    def recording_flush() -> int:
        flushed_on.append(threading.current_thread().name)
        return real_flush()

    monkeypatch.setattr(chat.session.stream, "flush_reads", recording_flush)
    for _ in range(70):
        chat.session.recall("dog", 1)
    deadline = time.monotonic() + 10
    while len(types_of(engine, RecallServed)) < 64 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(types_of(engine, RecallServed)) >= 64
    assert flushed_on and all(name != threading.current_thread().name for name in flushed_on)


@pytest.mark.parametrize(
    "session_id",
    [
        "s-sk-proj-T3stK3yAAAABBBBCCCCDDDDEEEEFFFFGGGG1234",  # a key inside an identifier
        "run_sk-ant-api03-AAAABBBBCCCCDDDDEEEEFFFF",
    ],
)
def test_a_session_id_built_from_a_key_is_refused(
    engine: MemoryEngine, namespace: Namespace, session_id: str
) -> None:
    """Session ids are stored in every event of the session: one holding an API key is
    refused before anything is written, and the error does not echo it."""
    head = engine.head
    with pytest.raises(InvalidNamespaceError) as refused:
        engine.session(namespace, session_id)
    assert refused.value.reason_code == "secret_detected"
    assert "T3stK3y" not in str(refused.value) and "api03" not in str(refused.value)
    assert engine.head == head


@pytest.mark.parametrize("words", ["task-proj-overview-notes-2024-final", "desk-svcacct-rotation"])
def test_words_ending_in_sk_are_not_keys(
    engine: MemoryEngine, namespace: Namespace, words: str
) -> None:
    """No false alarm for ordinary hyphenated words that merely end in "sk"."""
    engine.session(namespace, words).close()
