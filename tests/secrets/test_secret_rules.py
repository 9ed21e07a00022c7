"""The project's rule table (``commands/secrets/rules.py``) is data that the engine applies.

- Every rule has a unique snake_case id and reports a snake_case kind.
- Every rule finds the secret of its own ``example`` on its own (the engine applied to a
  table of that one rule), and the whole scan reports the example with the rule's kind (or,
  for the credential rule, ``password`` after a password keyword).
"""

from __future__ import annotations

import re

import pytest

from memory_ledger.commands.secrets import detect, find_secrets
from memory_ledger.commands.secrets.rule import Rule
from memory_ledger.commands.secrets.rules import RULES
from memory_ledger.commands.secrets.scan import Scan

SNAKE = re.compile(r"[a-z][a-z0-9_]*")


def test_rule_ids_are_unique_snake_case_and_kinds_are_snake_case() -> None:
    ids = [rule.id for rule in RULES]
    assert len(ids) == len(set(ids))
    for rule in RULES:
        assert SNAKE.fullmatch(rule.id), rule.id
        assert SNAKE.fullmatch(rule.kind), rule.kind
        assert rule.about and rule.example


def _alone(rule: Rule, text: str, monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, int]]:
    """The spans ``rule`` finds in ``text`` when it is the only rule of the table."""
    monkeypatch.setattr(detect, "RULES", (rule,))
    return [(start, end) for start, end, _kind, _rank in detect.rule_candidates(Scan(text))]


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.id)
def test_each_rule_finds_its_example_on_its_own(
    rule: Rule, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = _alone(rule, rule.example, monkeypatch)
    assert found, rule.id
    monkeypatch.undo()
    kinds = {span.kind for span in find_secrets(rule.example)}
    assert rule.kind in kinds or (rule.id == "credential_assignment" and "password" in kinds)
