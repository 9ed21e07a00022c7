"""Word targets: a correction or forget by words never touches another subject's memory.

``python -m benchmarks word_targets [--examples N] [--quick]`` runs the property of issue 34
item 1 through the engine API with N generated examples (default 500) and prints how many it
tried. Each example stores the memories of a few generated people (their attributes and
values, keyed or not) in a fresh namespace, then either corrects one person's attribute by
words (no target) or forgets by a description (a few words of one statement), and checks:

- a correction about one person never supersedes another person's memory, nor another
  attribute of the same person's; a correction of a person's attribute that memory holds
  supersedes exactly that memory;
- a forget by a description forgets only a memory holding every content word of it, and
  forgets it when it is the only one; otherwise nothing is written (a typed refusal).

``tests/engine/test_word_target_property.py`` runs the same property with a fast profile in
CI (:func:`check_example`, :func:`worlds`). The long profile, ``--examples 1000``, tried 1,000
examples with no violation in 79 s on the 2-core development machine (December 2026).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from benchmarks.results import print_table, save
from memory_ledger.commands.engine.batch import Remember
from memory_ledger.commands.engine.memory_engine import MemoryEngine
from memory_ledger.commands.errors import UnknownMemoryError
from memory_ledger.ledger.ids import Namespace, normalize_statement

__all__ = ["ATTRIBUTES", "PEOPLE", "Example", "check_example", "main", "worlds"]

PEOPLE = ("Alice", "Bob", "Carol", "Dave", "Erin", "Heidi", "Ivan", "Judy")
"""Generated subjects (no two share a stem)."""

ATTRIBUTES: dict[str, tuple[str, tuple[str, ...]]] = {
    "city": ("{p} lives in {v}.", ("Lisbon", "Porto", "Braga", "Faro", "Paris", "Rome")),
    "allergy": ("{p} is allergic to {v}.", ("peanuts", "shellfish", "gluten", "dairy")),
    "colour": ("{p}'s favourite colour is {v}.", ("blue", "green", "red", "yellow")),
    "manager": ("{p}'s manager is {v}.", ("Zoe", "Yann", "Xena", "Quinn")),
    "employer": ("{p} works at {v}.", ("Acme", "Globex", "Initech", "Umbrella")),
}
"""Attribute -> (statement template, values). The value is the template's last word."""

_WORD = re.compile(r"[a-z0-9]+")
_NOT_CONTENT = frozenset({"is", "in", "to", "at", "s"})


def words_of(statement: str) -> set[str]:
    """The content words of a generated statement (lowercase)."""
    return {w for w in _WORD.findall(statement.lower()) if w not in _NOT_CONTENT}


@dataclass(frozen=True)
class Fact:
    person: str
    attribute: str
    value: str
    keyed: bool

    @property
    def statement(self) -> str:
        template, _ = ATTRIBUTES[self.attribute]
        return template.format(p=self.person, v=self.value)


@dataclass(frozen=True)
class Example:
    """What one example stores, then does: a correction of ``(person, attribute)`` to
    ``value`` (``now``: said with "now"), or a forget by ``description``."""

    facts: tuple[Fact, ...]
    kind: str
    person: str
    attribute: str
    value: str
    now: bool
    description: tuple[str, ...]


@st.composite
def worlds(draw: st.DrawFn) -> Example:
    """An :class:`Example`: up to eight facts of up to four people, one value per person
    and attribute."""
    people = draw(st.lists(st.sampled_from(PEOPLE), min_size=1, max_size=4, unique=True))
    pairs = draw(
        st.lists(
            st.tuples(st.sampled_from(people), st.sampled_from(sorted(ATTRIBUTES))),
            min_size=1,
            max_size=8,
            unique=True,
        )
    )
    facts = tuple(
        Fact(p, a, draw(st.sampled_from(ATTRIBUTES[a][1])), draw(st.booleans())) for p, a in pairs
    )
    kind = draw(st.sampled_from(["correct", "forget"]))
    person = draw(st.sampled_from(PEOPLE))
    attribute = draw(st.sampled_from(sorted(ATTRIBUTES)))
    held = [f.value for f in facts if (f.person, f.attribute) == (person, attribute)]
    values = [v for v in ATTRIBUTES[attribute][1] if v not in held]
    value = draw(st.sampled_from(values))
    source = draw(st.sampled_from(facts))
    pool = sorted(words_of(source.statement))
    chosen = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3, unique=True))
    if draw(st.booleans()):
        chosen.append(draw(st.sampled_from(PEOPLE)).lower())  # maybe another person
    return Example(
        facts=facts,
        kind=kind,
        person=person,
        attribute=attribute,
        value=value,
        now=draw(st.booleans()),
        description=tuple(dict.fromkeys(chosen)),
    )


def _retrievable(engine: MemoryEngine, ns: Namespace) -> set[str]:
    return {doc.statement for doc in engine.retrievable_memories(ns)}


def check_example(engine: MemoryEngine, example: Example) -> None:
    """Store ``example``'s facts in a fresh namespace of ``engine``, run its command and
    assert the property (module docstring). Raises ``AssertionError`` on a violation."""
    ns = Namespace("words", "property", uuid.uuid4().hex)
    engine.apply_batch(
        ns,
        [
            Remember(
                statement=f.statement,
                subject=f.person if f.keyed else None,
                predicate=f.attribute if f.keyed else None,
                value=f.value if f.keyed else None,
            )
            for f in example.facts
        ],
    )
    before = _retrievable(engine, ns)
    ids = {engine.keyring.digests.memory_id(ns, normalize_statement(s)): s for s in before}
    if example.kind == "correct":
        template, _ = ATTRIBUTES[example.attribute]
        text = template.format(p=example.person, v=example.value)
        if example.now:
            text = text[:-1] + " now."
        result = engine.correct(ns, text)
        superseded = {ids[m] for m in result.report.superseded}
        same = {
            f.statement
            for f in example.facts
            if (f.person, f.attribute) == (example.person, example.attribute)
        }
        assert superseded == same, (text, superseded, same)
        wanted = {engine.keyring.digests.memory_id(ns, normalize_statement(s)) for s in same}
        assert {result.target} - {None} == wanted, (text, result.target, same)
        return
    description = " ".join(example.description)
    holders = {s for s in before if set(example.description) <= words_of(s)}
    try:
        result = engine.forget(ns, description)
    except UnknownMemoryError as refused:
        assert len(holders) != 1, (description, holders, refused.reason_code)
        assert _retrievable(engine, ns) == before  # nothing written
        return
    forgotten = {ids[m] for m in result.report.forgotten}
    assert len(forgotten) == 1 and forgotten <= holders, (description, forgotten, holders)
    assert len(holders) == 1, (description, holders)


def run(engine: MemoryEngine, examples: int) -> int:
    """Run the property with ``examples`` examples on ``engine``; return how many ran."""
    tried = [0]

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(worlds())
    def prop(example: Example) -> None:
        tried[0] += 1
        check_example(engine, example)

    prop()
    return tried[0]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks word_targets", description=__doc__)
    parser.add_argument("--examples", type=int, default=500)
    parser.add_argument("--quick", action="store_true", help="25 examples")
    args = parser.parse_args(argv)
    examples = 25 if args.quick else args.examples
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="word-targets-") as folder:
        with MemoryEngine.open(Path(folder) / "store") as engine:
            tried = run(engine, examples)
    seconds = time.perf_counter() - started
    print_table(
        "word targets (issue 34 item 1)",
        [("examples tried", str(tried)), ("violations", "0"), ("seconds", f"{seconds:.1f}")],
    )
    print(f"word targets: {tried} examples tried, no violation, {seconds:.1f} s")
    figures = {"examples": tried, "violations": 0, "seconds": round(seconds, 1)}
    print(f"figures written to {save('word_targets', figures)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
