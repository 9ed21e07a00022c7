"""The decider of explicit commands (``commands/canonical/explicit_command.py``) and the rule of
targets named by words (``commands/canonical/word_targets.py``), run against a small stand-in
of what a surface lets the decider read (:class:`Reads`)."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID, uuid4

import pytest

from memory_ledger.commands.canonical import (
    CommandSpec,
    MemoryStreamState,
    TargetFacts,
    correction_match,
    correction_target,
    decide_command,
    description_target,
)
from memory_ledger.commands.errors import (
    CommandRejectedError,
    SupersededTargetError,
    UnknownMemoryError,
)
from memory_ledger.commands.recall import MemoryDoc
from memory_ledger.ledger.events import ExtractedItem
from memory_ledger.ledger.ids import Namespace

NS = Namespace("acme", "alice", "assistant")


def doc(statement: str, subject: str | None = None, predicate: str | None = None) -> MemoryDoc:
    return MemoryDoc(
        memory_id=str(uuid4()),
        position=1,
        statement=statement,
        subject=subject,
        predicate=predicate,
        value=None,
        scope="user",
        tags=(),
        evidence=(),
        occurred_at=None,
        origin="canonical",
        revision=None,
        importance=0.9,
    )


def item_of(d: MemoryDoc) -> ExtractedItem:
    return ExtractedItem(
        kind="semantic",
        subject=d.subject,
        predicate=d.predicate,
        value=None,
        statement=d.statement,
        source="fact",
        scope="user",
        reason="told",
        importance=0.7,
        confidence=0.9,
        tags=("home",),
    )


class Reads:
    """A stand-in of :class:`~memory_ledger.commands.canonical.CommandReads`: memories held
    in a dict, the search answers every memory sharing a word (in insertion order)."""

    def __init__(self, *docs: MemoryDoc) -> None:
        self.docs = {UUID(d.memory_id): d for d in docs}
        self.states: dict[UUID, MemoryStreamState] = {
            mid: MemoryStreamState(
                version=1,
                status="active",
                importance=0.7,
                tags=("home", "reinforced"),
                evidence=(),
                key=None,
                namespace=NS,
                item=item_of(d),
            )
            for mid, d in self.docs.items()
        }
        self.searches: list[str] = []
        self.chosen_ids: list[str] = []

    def state(self, memory: UUID) -> MemoryStreamState | None:
        return self.states.get(memory)

    def head(self, memory: UUID) -> UUID | None:
        state = self.states.get(memory)
        return state.superseded_by if state is not None else None

    def searched(self, words: str) -> Sequence[MemoryDoc]:
        self.searches.append(words)
        wanted = set(words.lower().replace(".", "").split())
        return [
            d
            for d in self.docs.values()
            if wanted & set(d.statement.lower().replace(".", "").replace("'s", "").split())
        ]

    def chosen(self, doc: MemoryDoc) -> None:
        self.chosen_ids.append(doc.memory_id)

    def facts(self, target: UUID, doc: MemoryDoc | None) -> TargetFacts | None:
        state = self.states.get(target)
        return TargetFacts.of_state(state) if state is not None else None


LISBON = doc("Alice lives in Lisbon.", "Alice", "lives in")
PEANUTS = doc("Alice is allergic to peanuts.")
ESPRESSO = doc("Alice only drinks espresso.")


def test_a_correction_naming_its_memory_supersedes_it_and_keeps_its_key() -> None:
    reads = Reads(LISBON, PEANUTS, ESPRESSO)
    decided = decide_command(CommandSpec(intent="correct", text="Alice lives in Porto."), reads)
    assert decided.intent == "correct" and decided.target == UUID(LISBON.memory_id)
    assert decided.item is not None
    assert (decided.item.subject, decided.item.predicate) == ("Alice", "lives in")
    assert decided.item.statement == "Alice lives in Porto."
    assert decided.item.tags == ("home", "reinforced")  # the target's tags as they are now
    assert reads.chosen_ids == [LISBON.memory_id]


def test_a_correction_about_another_person_is_remembered_not_applied() -> None:
    reads = Reads(LISBON, PEANUTS, ESPRESSO)
    decided = decide_command(
        CommandSpec(intent="correct", text="Bob is allergic to shellfish."), reads
    )
    assert (decided.intent, decided.target) == ("remember", None)
    assert decided.item is not None and decided.item.subject is None
    assert reads.chosen_ids == []


def test_a_subject_given_by_the_caller_decides() -> None:
    reads = Reads(LISBON, doc("Bob lives in Faro.", "Bob", "lives in"))
    by_bob = decide_command(
        CommandSpec(intent="correct", text="Lives in Porto now.", subject="Bob"), reads
    )
    assert by_bob.target == UUID(
        next(d for d in reads.docs.values() if "Bob" in d.statement).memory_id
    )
    nobody = decide_command(
        CommandSpec(intent="correct", text="Alice lives in Porto.", subject="Carol"), reads
    )
    assert nobody.target is None


def test_a_forget_by_words_needs_every_content_word() -> None:
    reads = Reads(LISBON, PEANUTS, ESPRESSO)
    decided = decide_command(CommandSpec(intent="forget", text=None, words="espresso"), reads)
    assert decided.target == UUID(ESPRESSO.memory_id)
    assert decided.statement == ESPRESSO.statement and decided.item is None
    with pytest.raises(UnknownMemoryError) as caught:
        decide_command(CommandSpec(intent="forget", text=None, words="where Bob lives"), reads)
    assert caught.value.reason_code == "no_clear_target"
    assert LISBON.memory_id in str(caught.value) and "Bob" not in str(caught.value)
    with pytest.raises(UnknownMemoryError) as nothing:
        decide_command(CommandSpec(intent="pin", text=None, words="volcano"), reads)
    assert nothing.value.reason_code == "no_match"


def test_a_target_id_is_checked_against_the_reads() -> None:
    reads = Reads(LISBON, ESPRESSO)
    porto = uuid4()
    reads.states[UUID(LISBON.memory_id)].status = "superseded"
    reads.states[UUID(LISBON.memory_id)].superseded_by = porto
    with pytest.raises(SupersededTargetError) as superseded:
        decide_command(
            CommandSpec(intent="forget", text=None, target=UUID(LISBON.memory_id)), reads
        )
    assert superseded.value.current == porto
    with pytest.raises(UnknownMemoryError):
        decide_command(CommandSpec(intent="pin", text=None, target=uuid4()), reads)
    planned = uuid4()
    decided = decide_command(
        CommandSpec(intent="forget", text=None, target=planned), reads, {planned: "Bob is new."}
    )
    assert (decided.target, decided.statement) == (planned, "Bob is new.")
    assert reads.searches == []  # an id is never searched


def test_a_remember_is_never_searched_and_its_item_is_checked() -> None:
    reads = Reads(LISBON)
    decided = decide_command(CommandSpec(intent="remember", text="Alice lives in Porto."), reads)
    assert (decided.intent, decided.target, reads.searches) == ("remember", None, [])
    with pytest.raises(CommandRejectedError):
        decide_command(
            CommandSpec(intent="remember", text="Alice.", item={"statement": "Alice."}), reads
        )


@pytest.mark.parametrize(
    ("correction", "stored"),
    [
        ("Bob is allergic to shellfish.", "Alice is allergic to peanuts."),
        ("Erin's favourite colour is green.", "Carol's favourite colour is blue."),
        ("Bob's manager is Grace.", "Dana's manager is Frank."),
        ("The staging database port is 5433.", "The production database port is 5432."),
        ("Alice's favourite food is sushi.", "Alice's favourite colour is blue."),
        ("Alice's sister lives in Porto.", "Alice lives in Lisbon."),
        ("Bob lives in Paris.", "Bob hates espresso."),
    ],
)
def test_a_correction_never_names_another_subject_or_attribute(
    correction: str, stored: str
) -> None:
    assert correction_match(correction, doc(stored)) == "other"
    assert correction_target(correction, [doc(stored)]) is None


@pytest.mark.parametrize(
    ("correction", "stored"),
    [
        ("Alice lives in Porto.", "Alice lives in Lisbon."),
        ("Alice lives in Porto now.", "Alice lives in Lisbon."),
        ("Alice now prefers ramen.", "Alice prefers sushi."),
        ("The production database port is 5433.", "The production database port is 5432."),
        ("Alice's favourite colour is green.", "Alice's favourite colour is blue."),
    ],
)
def test_a_correction_of_the_same_attribute_names_it(correction: str, stored: str) -> None:
    assert correction_match(correction, doc(stored)) == "same"


def test_an_unclear_correction_is_refused_listing_the_near_ones() -> None:
    teacher = doc("Alice is a teacher.")
    assert correction_match("Alice is a nurse.", teacher) == "near"  # which attribute?
    with pytest.raises(UnknownMemoryError) as caught:
        correction_target("Alice is a nurse.", [teacher])
    assert caught.value.reason_code == "no_clear_target"
    assert teacher.memory_id in str(caught.value)


def test_descriptions_prefer_the_verbatim_statement_and_refuse_several() -> None:
    short, long = doc("Alice likes tea."), doc("Alice likes tea and cake.")
    assert description_target("Alice likes tea.", [long, short]) is short
    with pytest.raises(UnknownMemoryError) as caught:
        description_target("tea", [long, short])
    assert caught.value.reason_code == "ambiguous_match"
    assert str(caught.value).startswith("the words name 2 memories, pass one memory id: ")
