"""Word targets through the engine (issue 34 item 1): a ``correct`` or ``forget`` that names
its target by words never acts on a memory the words are not about, on every surface (the
direct commands sync and async, batches, a session's explicit commands)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import memory_ledger
from memory_ledger import Forget
from memory_ledger.commands import MemoryEngine, RecordedExtractor
from memory_ledger.commands.errors import UnknownMemoryError

NS = memory_ledger.Namespace("acme", "alice", "assistant")

OTHER_SUBJECT = [
    ("Alice is allergic to peanuts.", "Bob is allergic to shellfish."),
    ("Carol's favourite colour is blue.", "Erin's favourite colour is green."),
    ("Dana's manager is Frank.", "Bob's manager is Grace."),
    ("The production database port is 5432.", "The staging database port is 5433."),
]


def active(mem: MemoryEngine) -> set[str]:
    return {doc.statement for doc in mem.retrievable_memories(NS)}


@pytest.mark.parametrize(("stored", "correction"), OTHER_SUBJECT)
def test_a_correction_never_supersedes_another_subjects_memory(
    tmp_path: Path, stored: str, correction: str
) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        mem.remember(NS, stored)
        done = mem.correct(NS, correction)
        assert done.target is None and done.report.superseded == ()
        assert active(mem) == {stored, correction}  # remembered beside it


def test_the_readme_correction_keeps_working(tmp_path: Path) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        old = mem.remember(NS, "Alice lives in Lisbon.", subject="Alice", predicate="lives in")
        mem.remember(NS, "Bob lives in Faro.", subject="Bob", predicate="lives in")
        fixed = mem.correct(NS, "Alice lives in Porto.")
        assert fixed.target == old.memory_id
        assert fixed.report.superseded == (old.memory_id,)
        assert active(mem) == {"Alice lives in Porto.", "Bob lives in Faro."}


def test_an_unkeyed_memory_is_corrected_by_the_same_subject_and_attribute(
    tmp_path: Path,
) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        peanuts = mem.remember(NS, "Alice is allergic to peanuts.")
        mem.remember(NS, "Bob is allergic to shellfish.")
        fixed = mem.correct(NS, "Alice is allergic to walnuts.")
        assert fixed.target == peanuts.memory_id
        assert active(mem) == {"Alice is allergic to walnuts.", "Bob is allergic to shellfish."}


def test_a_subject_given_by_the_caller_decides(tmp_path: Path) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        alice = mem.remember(NS, "Alice lives in Lisbon.", subject="Alice", predicate="lives in")
        bob = mem.remember(NS, "Bob lives in Faro.", subject="Bob", predicate="lives in")
        fixed = mem.correct(NS, "Lives in Porto now.", subject="Bob")
        assert fixed.target == bob.memory_id
        assert mem.correct(NS, "Alice lives in Braga.", subject="Carol").target is None
        assert alice.memory_id not in {*fixed.report.superseded}


def test_an_unclear_correction_writes_nothing_and_lists_the_candidates(tmp_path: Path) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        teacher = mem.remember(NS, "Alice is a teacher.")
        head = mem.head
        with pytest.raises(UnknownMemoryError) as caught:
            mem.correct(NS, "Alice is a nurse.")
        assert caught.value.reason_code == "no_clear_target"
        assert str(teacher.memory_id) in str(caught.value)
        assert mem.head == head
        assert mem.correct(NS, "Alice is a nurse.", target=teacher.memory_id).target == (
            teacher.memory_id
        )


def test_a_forget_by_words_needs_every_content_word(tmp_path: Path) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        lisbon = mem.remember(NS, "Alice lives in Lisbon.")
        head = mem.head
        with pytest.raises(UnknownMemoryError) as caught:
            mem.forget(NS, "where Bob lives")
        assert caught.value.reason_code == "no_clear_target"
        assert str(lisbon.memory_id) in str(caught.value)
        assert caught.value.candidates == ((str(lisbon.memory_id), "Alice lives in Lisbon."),)
        assert mem.head == head and active(mem) == {"Alice lives in Lisbon."}
        espresso = mem.remember(NS, "Alice only drinks espresso.")
        assert mem.forget(NS, "espresso").target == espresso.memory_id
        assert mem.forget(NS, "where Alice lives").target == lisbon.memory_id
        assert active(mem) == set()


def test_a_batch_forget_by_words_follows_the_same_rule(tmp_path: Path) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        mem.remember(NS, "Alice lives in Lisbon.")
        head = mem.head
        with pytest.raises(UnknownMemoryError) as caught:
            mem.apply_batch(NS, ["Bob likes tea.", Forget(target="where Bob lives")])
        assert caught.value.reason_code == "no_clear_target"
        assert mem.head == head and active(mem) == {"Alice lives in Lisbon."}


def test_the_async_engine_follows_the_same_rule(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with memory_ledger.AsyncMemoryEngine.open(tmp_path / "store") as mem:
            await mem.remember(NS, "Alice is allergic to peanuts.")
            other = await mem.correct(NS, "Bob is allergic to shellfish.")
            assert other.target is None and other.report.superseded == ()
            with pytest.raises(UnknownMemoryError):
                await mem.forget(NS, "where Bob lives")
            mine = await mem.correct(NS, "Is allergic to walnuts.", subject="Alice")
            assert mine.target is not None

    asyncio.run(scenario())


def test_a_sessions_explicit_commands_follow_the_same_rule(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "store") as engine:
        peanuts = engine.remember(NS, "Alice is allergic to peanuts.")
        lisbon = engine.remember(NS, "Alice lives in Lisbon.")
        session = engine.session(NS, "s1", extractor=RecordedExtractor())
        other = session.apply_explicit_command("correct", "Bob is allergic to shellfish.", 1)
        assert other.target is None
        with pytest.raises(UnknownMemoryError) as caught:
            session.apply_explicit_command("forget", "where Bob lives", 1)
        assert caught.value.reason_code == "no_clear_target"
        fixed = session.apply_explicit_command("correct", "Alice lives in Porto.", 2)
        assert fixed.target == lisbon.memory_id
        report = session.finish()
        assert report.superseded == (lisbon.memory_id,)
        assert peanuts.memory_id not in report.superseded
        assert {doc.statement for doc in engine.retrievable_memories(NS)} == {
            "Alice is allergic to peanuts.",
            "Bob is allergic to shellfish.",
            "Alice lives in Porto.",
        }


def test_the_engines_word_readers_follow_the_same_rule(tmp_path: Path) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        mem.remember(NS, "Alice lives in Lisbon.")
        mem.remember(NS, "Alice is allergic to peanuts.")
        assert mem.best_match(NS, "where Bob lives") is None
        found = mem.best_match(NS, "where Alice lives")
        assert found is not None and found.statement == "Alice lives in Lisbon."
        corrected = mem.named_memories(NS, "Bob is allergic to shellfish.", strict=True)
        assert corrected == []
        same = mem.named_memories(NS, "Alice is allergic to walnuts.", strict=True)
        assert [doc.statement for doc in same] == ["Alice is allergic to peanuts."]


def test_an_ambiguous_description_lists_its_candidates(tmp_path: Path) -> None:
    with memory_ledger.open(tmp_path / "store") as mem:
        alice = mem.remember(NS, "Alice only drinks espresso.")
        bob = mem.remember(NS, "Bob only drinks espresso.")
        head = mem.head
        with pytest.raises(UnknownMemoryError) as caught:
            mem.forget(NS, "espresso")
        assert caught.value.reason_code == "ambiguous_match"
        assert set(caught.value.candidates) == {
            (str(alice.memory_id), "Alice only drinks espresso."),
            (str(bob.memory_id), "Bob only drinks espresso."),
        }
        assert mem.head == head
