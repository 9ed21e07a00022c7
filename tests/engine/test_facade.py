"""The short way in: ``memory_ledger.open`` and the engine's direct commands."""

from __future__ import annotations

from pathlib import Path
from uuid import UUID, uuid4

import pytest

import memory_ledger
from memory_ledger import replay
from memory_ledger.commands.errors import CommandRejectedError, UnknownMemoryError
from memory_ledger.ledger.events import (
    DirectCommandApplied,
    MemoryActivated,
    MemoryForgotten,
    MemorySuperseded,
)

NS = memory_ledger.Namespace("acme", "alice", "assistant")
OTHER = memory_ledger.Namespace("acme", "bob", "assistant")


def events_of(store: Path) -> list[object]:
    with memory_ledger.open(store, create=False) as engine:
        return [e for _, e in replay.filter_events(engine)]


def test_three_line_start_prints_the_statement(tmp_path: Path) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        mem.remember(NS, "Alice only drinks espresso.")
        assert mem.recall(NS, "what does Alice drink?")[0].statement == (
            "Alice only drinks espresso."
        )


def test_remember_is_durable_and_recorded_with_session_lineage(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with memory_ledger.open(store) as mem:
        done = mem.remember(NS, "Alice keeps a cat named Miso.", tags=("pets",))
    kinds = [type(e) for e in events_of(store)]
    assert kinds == [DirectCommandApplied, MemoryActivated]  # one record per command
    assert done.report.activated == (done.memory_id,)
    with memory_ledger.open(store, create=False) as mem:  # a new process sees it
        result = mem.recall(NS, "cat")
        hit = result[0]
        assert (hit.memory_id, hit.statement) == (
            str(done.memory_id),
            "Alice keeps a cat named Miso.",
        )
        assert hit.tags == ("pets",)
        assert hit.score > 0 and hit.occurred_at is None and isinstance(hit.evidence, tuple)
        lineage = replay.explain(mem, str(done.memory_id))
        assert lineage.origins and lineage.origins[0].session_id == done.session_id


def test_recall_result_reads_like_a_list(tmp_path: Path) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        for statement in ("Alice plays chess.", "Alice plays the cello.", "Bob plays golf."):
            mem.remember(NS, statement)
        result = mem.recall(NS, "plays", k=2)
        assert len(result) == 2
        assert [h.statement for h in result] == [h.statement for h in result.results]
        assert result[-1] is result.results[-1]
        assert len(mem.recall(NS, "plays", k=5)) == 3


def test_keyed_remember_supersedes_and_correct_keeps_the_key(tmp_path: Path) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        first = mem.remember(
            NS, "Alice lives in Lisbon.", subject="Alice", predicate="lives in", value="Lisbon"
        )
        fixed = mem.correct(NS, "Alice lives in Porto now.")
        assert fixed.target == first.memory_id
        assert fixed.report.superseded == (first.memory_id,)
        statements = [h.statement for h in mem.recall(NS, "where does Alice live")]
        assert statements == ["Alice lives in Porto now."]


def test_correct_by_id_targets_that_memory(tmp_path: Path) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        tea = mem.remember(NS, "Alice drinks tea in the morning.")
        mem.remember(NS, "Alice drinks coffee in the morning.")
        fixed = mem.correct(NS, "Alice drinks matcha in the morning.", target=str(tea.memory_id))
        assert fixed.target == tea.memory_id
        left = {h.statement for h in mem.recall(NS, "morning drinks", k=5)}
        assert left == {
            "Alice drinks coffee in the morning.",
            "Alice drinks matcha in the morning.",
        }


def test_forget_by_words_and_by_id(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with memory_ledger.open(store) as mem:
        espresso = mem.remember(NS, "Alice only drinks espresso.")
        sister = mem.remember(NS, "Alice's sister visits from Porto in May.")
        by_words = mem.forget(NS, "espresso")
        assert by_words.target == espresso.memory_id
        by_id = mem.forget(NS, sister.memory_id)
        assert by_id.target == sister.memory_id
        assert len(mem.recall(NS, "espresso sister Porto")) == 0
    forgotten = [e for e in events_of(store) if isinstance(e, MemoryForgotten)]
    assert {e.originator_id for e in forgotten} == {espresso.memory_id, sister.memory_id}


def test_foreign_id_behaves_exactly_like_an_unknown_id(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with memory_ledger.open(store) as mem:
        bobs = mem.remember(OTHER, "Bob collects stamps.")
        head = mem.head
        errors = []
        for wanted in (bobs.memory_id, uuid4()):
            with pytest.raises(UnknownMemoryError) as caught:
                mem.forget(NS, wanted)
            errors.append(caught.value)
        assert [e.reason_code for e in errors] == ["unknown_memory", "unknown_memory"]
        assert str(errors[0]).replace(str(bobs.memory_id), "ID") == str(errors[1]).replace(
            str(errors[1]).split()[-1], "ID"
        )
        with pytest.raises(UnknownMemoryError):
            mem.correct(NS, "Bob collects coins.", target=bobs.memory_id)
        assert mem.head == head  # nothing written
        assert [h.statement for h in mem.recall(OTHER, "stamps")] == ["Bob collects stamps."]


def test_forget_with_no_match_writes_nothing(tmp_path: Path) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        mem.remember(NS, "Alice plays chess.")
        head = mem.head
        with pytest.raises(UnknownMemoryError) as caught:
            mem.forget(NS, "volcano")
        assert caught.value.reason_code == "no_match"
        assert mem.head == head


@pytest.mark.parametrize(
    ("statement", "code"),
    [("", "empty_statement"), ("   ", "empty_statement"), (None, "invalid_statement")],
)
def test_bad_statements_are_typed_errors(tmp_path: Path, statement: object, code: str) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        with pytest.raises(CommandRejectedError) as caught:
            mem.remember(NS, statement)  # type: ignore[arg-type]
        assert caught.value.reason_code == code
        assert isinstance(caught.value, memory_ledger.MemoryLedgerError)
        assert mem.head == 0


def test_a_secret_is_refused_and_never_stored(tmp_path: Path) -> None:
    store = tmp_path / "store"
    key = "sk-proj-" + "Q7h2Lm9Xc4Vb8Nz1Kp5Rt3Wy6Ud0Fg2Hj"
    with memory_ledger.open(store) as mem:
        with pytest.raises(CommandRejectedError) as caught:
            mem.remember(NS, f"Alice's OpenAI key is {key}")
        assert key not in str(caught.value)
    assert key.encode() not in b"".join(p.read_bytes() for p in (store / "ledger").iterdir())


def test_correct_supersedes_in_the_ledger(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with memory_ledger.open(store) as mem:
        old = mem.remember(
            NS,
            "Alice's favourite colour is green.",
            subject="Alice",
            predicate="favourite colour",
            value="green",
        )
        mem.correct(NS, "Alice's favourite colour is blue.")
    superseded = [e for e in events_of(store) if isinstance(e, MemorySuperseded)]
    assert [e.originator_id for e in superseded] == [old.memory_id]
    assert isinstance(old.memory_id, UUID)


def test_correct_never_retires_another_subjects_fact(tmp_path: Path) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        carol = mem.remember(NS, "Carol's birthday is in May.", subject="Carol")
        bob = mem.remember(NS, "Bob hates espresso.", subject="Bob")
        dave = mem.correct(NS, "Dave's birthday is on 9 June.")
        paris = mem.correct(NS, "Bob lives in Paris.")
        assert (dave.target, paris.target) == (None, None)  # named nothing: remembered
        assert dave.report.superseded == () and paris.report.superseded == ()
        kept = {h.memory_id for h in mem.recall(NS, "birthday espresso Bob Carol", k=10)}
        assert {str(carol.memory_id), str(bob.memory_id)} <= kept


def test_forget_by_words_naming_several_memories_is_refused(tmp_path: Path) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        mem.remember(NS, "Alice only drinks espresso.", subject="Alice")
        mem.remember(NS, "Bob hates espresso.", subject="Bob")
        head = mem.head
        with pytest.raises(UnknownMemoryError) as caught:
            mem.forget(NS, "espresso")
        assert caught.value.reason_code == "ambiguous_match"
        assert mem.head == head
        assert mem.forget(NS, "Bob espresso").report.forgotten  # the subject makes it one


@pytest.mark.parametrize(
    ("statement", "code"),
    [
        ("Alice's key is sk-proj-Q7h2Lm9Xc4Vb8Nz1Kp5Rt3Wy6Ud0Fg2Hj", "secret_detected"),
        ("Alice \ud800 likes tea", "not_utf8"),
    ],
)
def test_refused_statements_write_nothing_and_are_not_echoed(
    tmp_path: Path, statement: str, code: str
) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        for call in (mem.remember, mem.forget, mem.correct):
            with pytest.raises(CommandRejectedError) as caught:
                call(NS, statement)
            assert caught.value.reason_code == code
            assert "sk-proj" not in str(caught.value)
        assert mem.head == 0  # not even a SessionOpened


def test_no_match_message_does_not_repeat_the_words(tmp_path: Path) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        mem.remember(NS, "Alice plays chess.")
        with pytest.raises(UnknownMemoryError) as caught:
            mem.forget(NS, "volcanoes of Iceland")
        assert "volcano" not in str(caught.value)


def test_bad_arguments_get_typed_errors(tmp_path: Path) -> None:
    from memory_ledger.ledger.errors import InvalidArgumentTypeError
    from memory_ledger.ledger.ids import InvalidNamespaceError

    with pytest.raises(InvalidArgumentTypeError):
        memory_ledger.open(42)  # type: ignore[arg-type]
    with pytest.raises(InvalidNamespaceError):
        memory_ledger.Namespace("t", "p", "s\ud800").validated()
    with memory_ledger.open(tmp_path / "store") as mem:
        done = mem.remember(NS, "Alice plays chess.")
        assert replay.explain(mem, done.memory_id).statement == "Alice plays chess."  # a UUID
        with pytest.raises(InvalidArgumentTypeError):
            replay.verify_store(str(tmp_path / "store"))  # type: ignore[arg-type]
        session = mem.session(NS, "s1")
        with pytest.raises(UnknownMemoryError):
            session.record_use(1, "garbage")
        with pytest.raises(InvalidArgumentTypeError):
            session.admit(1, None)  # type: ignore[arg-type]


def test_invisible_characters_do_not_make_a_second_memory(tmp_path: Path) -> None:
    """ "Alice likes tea." with a U+200B inside, a leading U+FEFF or a trailing U+200D looks
    the same and is the same memory; forgetting it by its words finds one memory."""
    from memory_ledger.ledger.ids import normalize_statement

    variants = [
        "Alice likes tea.",
        "Alice li\u200bkes tea.",
        "\ufeffAlice likes tea.",
        "Alice likes tea.\u200d",
        "Alice\u2060 likes\u200c tea.",
    ]
    assert len({normalize_statement(v) for v in variants}) == 1
    with memory_ledger.open(tmp_path / "store") as mem:
        ids = {mem.remember(NS, v).memory_id for v in variants}
        assert len(ids) == 1
        assert mem.forget(NS, "Alice likes tea.").report.forgotten


def test_statement_keys_without_invisible_characters_are_unchanged() -> None:
    """Dropping zero-width characters leaves every other key as it was (ids are stable)."""
    from uuid import UUID

    from memory_ledger.ledger.ids import memory_id, normalize_statement

    assert normalize_statement("  Alice  LIKES ｔｅａ!! ") == "alice likes tea"
    assert memory_id(NS, normalize_statement("Alice likes tea.")) == UUID(
        "e5f14ef1-057b-50b0-91ef-089c009a47e5"  # the id before U+200B etc. were dropped
    )


def test_a_soft_hyphen_does_not_make_a_second_memory_and_keeps_other_ids() -> None:
    """U+00AD (soft hyphen) is dropped like the zero-width characters: "Alice li\u00adkes
    tea." is "Alice likes tea."; a statement without one keeps its id."""
    from uuid import UUID

    from memory_ledger.ledger.ids import memory_id, normalize_statement

    assert normalize_statement("Alice li\u00adkes tea.") == normalize_statement("Alice likes tea.")
    assert memory_id(NS, normalize_statement("Alice li\u00adkes tea.")) == UUID(
        "e5f14ef1-057b-50b0-91ef-089c009a47e5"
    )
    assert normalize_statement("Alice likes ma-tcha") == "alice likes ma-tcha"


def test_an_ambiguous_correction_lists_the_five_best_and_counts_the_rest(tmp_path: Path) -> None:
    """The message of ``ambiguous_match`` does not grow with the store: five memories listed,
    the others counted ("at least": the search reads the best ten)."""
    with memory_ledger.open(tmp_path / "store") as mem:
        for i in range(30):
            mem.remember(NS, f"Alice's souvenir from the summer trip is gift number {i}.")
        with pytest.raises(UnknownMemoryError) as caught:
            mem.correct(NS, "Alice's souvenir from the summer trip is gift number 99.")
        message = str(caught.value)
        assert caught.value.reason_code == "ambiguous_match"
        assert message.startswith("the words name at least 10 memories, pass one memory id: ")
        assert message.count("Alice's souvenir from the summer trip") == 5
        assert message.endswith("; and at least 5 more")
        mem.remember(NS, "Bob likes tea in the garden.", subject="Bob")
        mem.remember(NS, "Bob likes tea at the office.", subject="Bob")
        with pytest.raises(UnknownMemoryError) as two:
            mem.forget(NS, "tea")
        assert str(two.value).startswith("the words name 2 memories, pass one memory id: ")
        assert "more" not in str(two.value)
