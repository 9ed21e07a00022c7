"""Synthetic but realistic memories for the scale benchmarks (recall, memory map, finish, RSS).

Statements read like facts an assistant learns about people ("Maya Chen works at Northwind
as a nurse.", "Omar Silva's favorite food is ramen."): thousands of subjects (first x last
names), a few dozen predicates with their own sentence templates and value lists. Every
(subject, predicate) pair is used at most once, so no memory would supersede another, and
every statement is distinct, so every memory id is distinct. Deterministic for a seed.

:func:`fill` appends the memories as ``MemoryActivated`` events (what reconciliation writes)
in large batches, straight through ``engine.append``: the fast way to reach 100,000 active
memories without replaying sessions (open the engine with ``sync=False`` for that).
"""

from __future__ import annotations

import random
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import NAMESPACE_URL, uuid5

from memory_ledger.commands import MemoryEngine
from memory_ledger.ledger.events import (
    CandidateExtracted,
    ExtractedItem,
    LedgerEvent,
    MemoryActivated,
)
from memory_ledger.ledger.ids import Namespace, memory_id, normalize_statement

__all__ = [
    "BENCH_NAMESPACE",
    "Memory",
    "activation",
    "fill",
    "item",
    "memories",
    "queries",
    "scratch",
    "snapshot_queries",
    "subject_count",
    "variant",
]

BENCH_NAMESPACE = Namespace("bench", "user-1", "assistant")
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)

FIRST = (
    "Maya Omar Lena Ravi Sofia Kenji Amara Lucas Priya Mateo Hana Noah Zara Elias Ines Tariq "
    "Chloe Felix Aisha Jonas Mei Diego Nadia Hugo Leila Arjun Clara Yusuf Elena Samir Freya "
    "Tomas Alina Kofi Rosa Ivan Laila Marco Yara Emil Sana Pablo Nora Dmitri Asha Leo Greta "
    "Idris Mila Rafael Olga Kwame Julia Haruto Lucia Malik Anya Bruno Keiko Andre Selma Viktor "
    "Dalia Oscar Ingrid Reza Beatriz Finn Amina Luca Sigrid Caleb Noor Theo Esra Milo Paula"
).split()
LAST = (
    "Chen Silva Novak Patel Rossi Tanaka Okafor Muller Garcia Kim Johansson Haddad Costa "
    "Nguyen Fischer Kowalski Ibrahim Moreau Sato Petrov Mendes Larsen Ahmed Romano Walsh "
    "Duarte Berg Yilmaz Santos Lindqvist Farouk Morales Hoffmann Reyes Nakamura Adeyemi Bianchi "
    "Dubois Ortiz Kaur Schmidt Alvarez Eriksen Park Murphy Rahman Vargas Weber Ito Kovacs "
    "Bauer Castro Lund Osei Pereira Quinn Rocha Singh Torres Volkov"
).split()

CITIES = (
    "Lisbon Osaka Denver Toronto Nairobi Krakow Austin Seoul Dublin Porto Lyon Bergen Hanoi "
    "Cusco Tbilisi Valencia Quebec Cairo Tallinn Sapporo Perth Zurich Oaxaca Marrakesh Reykjavik "
    "Edinburgh Ljubljana Kyoto Montreal Seattle Boston Munich Vienna Prague Athens Helsinki"
).split()
COMPANIES = (
    "Northwind Contoso Globex Initech Umbrella Hooli Vandelay Acme Stark Wayne Tyrell Cyberdyne "
    "Soylent Gringotts Wonka Pied-Piper Aperture Massive-Dynamic Monarch Oscorp"
).split()
ROLES = (
    "nurse teacher data-engineer architect chef paramedic accountant designer pilot lawyer "
    "carpenter pharmacist journalist biologist translator electrician librarian"
).split()
FOODS = (
    "ramen lasagna tacos paella sushi pho falafel risotto dumplings curry shakshuka pierogi "
    "ceviche bibimbap moussaka gnocchi biryani empanadas"
).split()
HOBBIES = (
    "hiking pottery climbing chess birdwatching surfing knitting photography gardening "
    "woodworking salsa-dancing kayaking baking painting cycling fencing archery"
).split()
ANIMALS = "dog cat parrot rabbit tortoise hamster ferret goldfish gecko horse".split()
PET_NAMES = (
    "Biscuit Luna Pepper Mochi Rusty Olive Ziggy Pickles Nova Waffles Bean Echo Juniper Taco "
    "Pixel Sunny Clover Bandit"
).split()
INSTRUMENTS = "piano cello violin guitar drums saxophone flute ukulele trumpet harp".split()
LANGUAGES = "Spanish Japanese Arabic Portuguese Korean Italian Swahili Dutch Greek Polish".split()
SPORTS = "tennis football basketball rugby volleyball badminton cricket squash rowing golf".split()
GENRES = "jazz techno folk opera reggae punk blues k-pop bossa-nova hip-hop".split()
BOOKS = (
    "Dune Middlemarch Beloved Neuromancer Rebecca Persuasion Solaris Ulysses Emma Kindred "
    "Frankenstein Ishiguro-novels"
).split()
ALLERGIES = "peanuts shellfish pollen penicillin cats gluten dust-mites bee-stings".split()
DRINKS = "espresso oat-latte green-tea cold-brew chai flat-white matcha rooibos".split()
CARS = "Volvo Subaru Tesla Fiat Toyota Skoda Mini Jeep Honda Kia".split()
MONTHS = (
    "January February March April May June July August September October November December"
).split()
DEGREES = "physics history nursing economics linguistics chemistry law music philosophy".split()
TOOLS = "Vim Emacs VS-Code IntelliJ Zed Neovim Sublime Helix".split()

# predicate -> (statement template, question template, value generator)
PREDICATES: dict[str, tuple[str, str, tuple[str, ...]]] = {
    "works_at": ("{s} works at {v}.", "Where does {s} work?", tuple(COMPANIES)),
    "job": ("{s} has a job as a {v}.", "What is {s}'s job?", tuple(ROLES)),
    "lives_in": ("{s} lives in {v}.", "Which city does {s} live in?", tuple(CITIES)),
    "hometown": ("{s} grew up in {v}.", "Where did {s} grow up?", tuple(CITIES)),
    "favorite_food": ("{s}'s favorite food is {v}.", "What food does {s} love?", tuple(FOODS)),
    "hobby": ("{s} enjoys {v} on weekends.", "What does {s} do on weekends?", tuple(HOBBIES)),
    "pet": (
        "{s} has a pet {v}.",
        "What pet does {s} have?",
        tuple(f"{a} named {n}" for a in ANIMALS for n in PET_NAMES),
    ),
    "instrument": ("{s} plays the {v}.", "Which instrument does {s} play?", tuple(INSTRUMENTS)),
    "learning_language": (
        "{s} is learning {v}.",
        "Which language is {s} learning?",
        tuple(LANGUAGES),
    ),
    "sport": ("{s} plays {v} every Tuesday.", "What sport does {s} play?", tuple(SPORTS)),
    "music": ("{s} listens to a lot of {v}.", "What music does {s} like?", tuple(GENRES)),
    "favorite_book": ("{s}'s favorite book is {v}.", "Which book does {s} love?", tuple(BOOKS)),
    "allergy": ("{s} is allergic to {v}.", "What is {s} allergic to?", tuple(ALLERGIES)),
    "drink": ("{s} usually orders {v}.", "What does {s} drink?", tuple(DRINKS)),
    "car": ("{s} drives a {v}.", "What car does {s} drive?", tuple(CARS)),
    "birthday": (
        "{s} was born in {v}.",
        "When is {s}'s birthday?",
        tuple(f"{m} {d}" for m in MONTHS for d in range(1, 29)),
    ),
    "degree": ("{s} studied {v} at university.", "What did {s} study?", tuple(DEGREES)),
    "editor": ("{s} writes code in {v}.", "Which editor does {s} use?", tuple(TOOLS)),
    "visited": (
        "{s} visited {v}.",
        "Where did {s} travel?",
        tuple(f"{c} in {y}" for c in CITIES for y in range(2015, 2025)),
    ),
    "sibling": (
        "{s} has a sibling called {v}.",
        "What is the name of {s}'s sibling?",
        tuple(FIRST),
    ),
    "partner": ("{s} is married to {v}.", "Who is {s}'s partner?", tuple(FIRST)),
    "goal": (
        "{s} wants to run a marathon in {v}.",
        "Where does {s} want to run a marathon?",
        tuple(CITIES),
    ),
    "volunteer": (
        "{s} volunteers at the {v} shelter.",
        "Where does {s} volunteer?",
        tuple(f"{c} animal" for c in CITIES),
    ),
    "commute": (
        "{s} commutes by {v}.",
        "How does {s} get to work?",
        ("bike", "train", "bus", "car", "ferry", "scooter", "foot"),
    ),
    "diet": (
        "{s} follows a {v} diet.",
        "What diet does {s} follow?",
        ("vegetarian", "vegan", "keto", "pescatarian", "low-sodium", "gluten-free"),
    ),
    "team": (
        "{s} supports the {v} football club.",
        "Which club does {s} support?",
        tuple(f"{c} United" for c in CITIES),
    ),
    "fear": (
        "{s} is afraid of {v}.",
        "What is {s} afraid of?",
        ("heights", "spiders", "flying", "deep-water", "thunderstorms", "clowns"),
    ),
    "kids": (
        "{s} has {v}.",
        "How many children does {s} have?",
        ("no children", "one child", "two children", "three children", "four children"),
    ),
    "mentor": (
        "{s} is mentored by {v}.",
        "Who mentors {s}?",
        tuple(f"{f} {ln}" for f in FIRST[:20] for ln in LAST[:10]),
    ),
    "project": (
        "{s} leads the {v} migration project.",
        "Which project does {s} lead?",
        tuple(f"{c}-{t}" for c in COMPANIES for t in ("billing", "search", "ledger", "mobile")),
    ),
}


@dataclass(frozen=True)
class Memory:
    """One synthetic memory: subject, predicate, value, statement and a question about it."""

    subject: str
    predicate: str
    value: str
    statement: str
    question: str

    def item(self, *, reason: str, importance: float, evidence: str) -> ExtractedItem:
        """This memory as an extractor's semantic fact (confidence 0.9)."""
        return ExtractedItem(
            kind="semantic",
            subject=self.subject,
            predicate=self.predicate,
            value=self.value,
            statement=self.statement,
            source="fact",
            scope="user",
            reason=reason,
            importance=importance,
            confidence=0.9,
            evidence=(evidence,),
        )


INITIALS = "ABCDEFGHIJKLMNOPRSTVW"
"""Middle initials that multiply the subjects beyond first x last names (only for corpora
larger than those allow: a million memories)."""


def _people(n: int) -> list[str]:
    plain = [f"{f} {ln}" for f in FIRST for ln in LAST]
    if n <= len(plain) * len(PREDICATES):
        return plain  # the corpora of every earlier figure, unchanged
    return plain + [f"{f} {i}. {ln}" for i in INITIALS for f in FIRST for ln in LAST]


def subject_count(n: int) -> int:
    """Distinct subjects for a corpus of ``n`` memories (thousands at 16,000 and above)."""
    return max(50, min(len(_people(n)), n // 8))


def memories(n: int, seed: int = 7) -> list[Memory]:
    """``n`` distinct memories over :func:`subject_count` subjects (deterministic). Up to
    138,600 memories the subjects are first x last names; beyond, middle initials too."""
    rng = random.Random(seed)
    people = _people(n)
    rng.shuffle(people)
    subjects = people[: subject_count(n)]
    predicates = list(PREDICATES)
    if n > len(subjects) * len(predicates):
        msg = f"at most {len(subjects) * len(predicates)} memories, asked {n}"
        raise ValueError(msg)
    pairs = [(s, p) for s in subjects for p in predicates]
    rng.shuffle(pairs)
    out: list[Memory] = []
    for subject, predicate in pairs[:n]:
        template, question, values = PREDICATES[predicate]
        value = rng.choice(values).replace("-", " ")
        statement = template.format(s=subject, v=value)
        out.append(Memory(subject, predicate, value, statement, question.format(s=subject)))
    return out


def variant(m: Memory, seed: int = 0) -> Memory:
    """The same subject and predicate with another value (a memory that supersedes ``m``)."""
    template, question, values = PREDICATES[m.predicate]
    others = [v.replace("-", " ") for v in values if v.replace("-", " ") != m.value]
    value = others[seed % len(others)]
    return Memory(m.subject, m.predicate, value, template.format(s=m.subject, v=value), m.question)


def item(m: Memory, evidence: str, importance: float = 0.8) -> dict[str, Any]:
    """``m`` as the raw item an extractor returns (docs/design.md)."""
    return {
        "kind": "semantic",
        "subject": m.subject,
        "predicate": m.predicate,
        "value": m.value,
        "statement": m.statement,
        "source": "fact",
        "scope": "user",
        "reason": "helps answer questions about this person later",
        "importance": importance,
        "confidence": 0.9,
        "tags": [],
        "supersedes": [],
        "conflicts_with": [],
        "evidence": [evidence],
    }


def queries(corpus: list[Memory], count: int, seed: int = 11) -> list[str]:
    """Questions about memories of ``corpus``: half by full name, half by first name only."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        m = rng.choice(corpus)
        first_name = m.subject.split()[0]
        out.append(m.question if i % 2 == 0 else m.question.replace(m.subject, first_name))
    return out


def snapshot_queries(corpus: list[Memory], count: int, seed: int = 13) -> list[tuple[str, str]]:
    """``(transcript, query)`` pairs where the query repeats words of the prepared transcript,
    so a snapshot prepared from the transcript covers the query."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        m = rng.choice(corpus)
        transcript = f"user: tell me about {m.subject}; {m.statement}"
        out.append((transcript, f"{m.subject} {m.value}"))
    return out


def activation(ns: Namespace, m: Memory, index: int) -> MemoryActivated:
    """The ``MemoryActivated`` event reconciliation would write for ``m``."""
    normalized = normalize_statement(m.statement)
    when = EPOCH + timedelta(seconds=index)
    return MemoryActivated(
        originator_id=memory_id(ns, normalized),
        originator_version=1,
        recorded_at=when,
        namespace=ns,
        session_id=f"seed-{index // 100}",
        turn_id=index % 100 + 1,
        candidate_id=uuid5(NAMESPACE_URL, f"bench-candidate/{ns.key()}/{index}"),
        decision="auto",
        item=m.item(
            reason="benchmark corpus",
            importance=0.5 + (index % 5) / 10,
            evidence=f"seed-{index // 100}:{index % 100 + 1}",
        ),
        normalized=normalized,
        occurred_at=when,
    )


def fill(
    engine: MemoryEngine,
    corpus: list[Memory],
    namespace: Namespace = BENCH_NAMESPACE,
    batch: int = 5000,
) -> int:
    """Append one ``MemoryActivated`` per memory of ``corpus``; return the ledger head."""
    for start in range(0, len(corpus), batch):
        events: list[LedgerEvent] = [
            activation(namespace, m, start + i) for i, m in enumerate(corpus[start : start + batch])
        ]
        engine.append(events)
    return engine.head


@contextmanager
def scratch(prefix: str, parent: str | None = None) -> Iterator[Path]:
    """A temporary folder (on disk, under ``parent`` if given), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix=prefix, dir=parent))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def candidate_batches(batch: int, count: int, label: str) -> list[list[CandidateExtracted]]:
    """``count`` batches of ``batch`` ``CandidateExtracted`` events of the bench namespace,
    each batch one new stream (``uuid5`` of ``label`` and the batch number), the items
    cycling through :func:`memories`: what the append benchmarks write."""
    corpus = memories(max(batch * count, 50))
    when = datetime(2024, 1, 1, tzinfo=UTC)
    out: list[list[CandidateExtracted]] = []
    n = 0
    for b in range(count):
        stream = uuid5(NAMESPACE_URL, f"bench-{label}/{b}")
        events: list[CandidateExtracted] = []
        for version in range(1, batch + 1):
            m = corpus[n % len(corpus)]
            n += 1
            events.append(
                CandidateExtracted(
                    originator_id=stream,
                    originator_version=version,
                    recorded_at=when,
                    namespace=BENCH_NAMESPACE,
                    session_id=f"{label}-{b}",
                    turn_id=version,
                    candidate_id=uuid5(stream, str(version)),
                    index=0,
                    extractor_id="recorded",
                    item=m.item(
                        reason="the user said so in this conversation",
                        importance=0.8,
                        evidence=f"{label}-{b}:{version}",
                    ),
                    occurred_at=when,
                )
            )
        out.append(events)
    return out
