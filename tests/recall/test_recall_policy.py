"""The durable recall policy (seed 000, "Active recall"): a typed, validated policy with a
result bound and a minimum lexical score, bounded one-hop relation reads returned as
annotations (default none), and the maintenance health of the semantic channel, from
Python and from ``memory-ledger stats``."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.errors import MemoryLedgerError
from memory_ledger.commands.recall import RecallPolicy
from memory_ledger.commands.recall.policy import (
    DEFAULT_RECALL_POLICY,
    MAX_RELATED_LOOKUPS,
    RecallPolicyError,
)
from memory_ledger.replay import store_stats
from memory_ledger.replay.cli.app import app
from tests.conftest import make_item
from tests.recall.test_semantic_recall import BagProvider, remember

NS = Namespace("acme", "alice", "assistant")


@pytest.mark.parametrize(
    "settings",
    [
        {"limit": 0},
        {"limit": 1001},
        {"limit": 2.5},
        {"limit": True},
        {"min_lexical_score": -0.1},
        {"min_lexical_score": math.nan},
        {"min_lexical_score": math.inf},
        {"min_lexical_score": "0.4"},
        {"related_lookups": -1},
        {"related_lookups": MAX_RELATED_LOOKUPS + 1},
        {"related_lookups": 1.0},
    ],
)
def test_a_policy_is_validated_on_construction(settings: dict[str, object]) -> None:
    with pytest.raises(RecallPolicyError) as caught:
        RecallPolicy(**settings)  # type: ignore[arg-type]
    assert isinstance(caught.value, MemoryLedgerError)
    assert caught.value.reason_code == "invalid_recall_policy"


def test_with_related_lookups_validates_too() -> None:
    policy = RecallPolicy(limit=5, min_lexical_score=0.4).with_related_lookups(8)
    assert (policy.limit, policy.min_lexical_score, policy.related_lookups) == (5, 0.4, 8)
    with pytest.raises(RecallPolicyError):
        DEFAULT_RECALL_POLICY.with_related_lookups(MAX_RELATED_LOOKUPS + 1)
    assert DEFAULT_RECALL_POLICY.related_lookups == 0


def test_the_policy_bounds_results_and_drops_weak_lexical_matches(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "store") as engine:
        for text in (
            "Alice likes espresso in the morning.",
            "Alice drinks espresso after lunch and espresso at night.",
            "Alice walks in the park in the morning.",
        ):
            engine.remember(NS, text)
        assert len(engine.recall(NS, "espresso morning")) == 3  # default limit 5
        engine.recall_policy = RecallPolicy(limit=2)
        assert len(engine.recall(NS, "espresso morning")) == 2
        assert len(engine.recall(NS, "espresso morning", 3)) == 3  # an explicit k wins
        everything = engine.recall(NS, "espresso morning", 3, policy=RecallPolicy())
        weakest = min(hit.score for hit in everything)
        strict = RecallPolicy(min_lexical_score=weakest + 1e-6)
        kept = engine.recall(NS, "espresso morning", 3, policy=strict)
        assert 0 < len(kept) < 3
        assert all(hit.score >= weakest + 1e-6 for hit in kept)


def test_relations_are_read_only_when_the_policy_allows_and_within_its_budget(
    tmp_path: Path,
) -> None:
    with MemoryEngine.open(tmp_path / "store") as engine:
        old_tea = engine.remember(NS, "Alice drinks green tea every day.")
        new_tea = engine.correct(NS, "Alice drinks black tea every day.", target=old_tea.memory_id)
        old_city = engine.remember(NS, "Alice lives in Lisbon by the sea.")
        new_city = engine.correct(NS, "Alice lives in Porto by the sea.", target=old_city.memory_id)
        plain = engine.recall(NS, "Alice tea Porto sea", 2)
        assert {h.memory_id for h in plain} == {str(new_tea.memory_id), str(new_city.memory_id)}
        assert all(h.related == () for h in plain)  # default: zero lookups

        annotated = engine.recall(
            NS, "Alice tea Porto sea", 2, policy=RecallPolicy(related_lookups=4)
        )
        by_id = {h.memory_id: h for h in annotated}
        (tea,) = by_id[str(new_tea.memory_id)].related
        assert (tea.relation, tea.memory_id) == ("supersedes", str(old_tea.memory_id))
        assert (tea.statement, tea.status) == ("Alice drinks green tea every day.", "superseded")
        (city,) = by_id[str(new_city.memory_id)].related
        assert city.memory_id == str(old_city.memory_id)

        one = engine.recall(NS, "Alice tea Porto sea", 2, policy=RecallPolicy(related_lookups=1))
        assert sum(len(h.related) for h in one) == 1
        assert one[0].related  # the budget goes to hits in rank order


def test_maintenance_health_from_python(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "lexical") as engine:
        health = engine.maintenance_health()
        assert (health.state, health.model, health.pending) == ("off", None, 0)
    provider = BagProvider()
    with MemoryEngine.open(
        tmp_path / "store", embeddings=provider, index_in_background=False
    ) as engine:
        remember(
            engine, NS, "s1", make_item("Alice likes espresso."), make_item("Alice has a dog.")
        )
        behind = engine.maintenance_health()
        assert behind.state == "behind" and behind.model == provider.descriptor.model_key()
        assert behind.pending == 4  # two statements, two source turns
        assert behind.lag_positions > 0
        assert behind.last_refresh_at is None and behind.failures == 0
        engine.index_vectors()
        ready = engine.maintenance_health()
        assert (ready.state, ready.pending, ready.lag_positions) == ("ready", 0, 0)
        assert {(c.field, c.eligible, c.embedded) for c in ready.coverage} == {
            ("statement", 2, 2),
            ("source", 2, 2),
        }
        assert ready.last_refresh_at is not None
        assert ready.last_refresh_position == ready.projection_position == ready.ledger_head
        provider.mode = "raise"
        engine.remember(NS, "Alice flies to Tokyo on Friday.")
        with pytest.raises(MemoryLedgerError):
            engine.index_vectors()
        failing = engine.maintenance_health()
        assert (failing.state, failing.failures, failing.consecutive_failures) == ("degraded", 1, 1)
        assert failing.last_error == "provider_failed" and failing.pending == 1  # no transcript


def test_maintenance_health_in_stats_without_a_provider(tmp_path: Path) -> None:
    store = tmp_path / "store"
    provider = BagProvider()
    with MemoryEngine.open(store, embeddings=provider, index_in_background=False) as engine:
        remember(engine, NS, "s1", make_item("Alice likes espresso."))
        engine.index_vectors()
        provider.mode = "raise"
        engine.remember(NS, "Alice flies to Tokyo on Friday.")  # its vector failed: pending
    with MemoryEngine.open(store) as engine:  # the CLI's way: no model loaded
        (health,) = store_stats(engine).vectors
    assert health.model == provider.descriptor.model_key()
    assert health.state == "behind" and health.pending >= 1 and health.lag_positions > 0
    assert health.failures is None  # known only to the process that indexes
    assert health.last_refresh_at is not None  # the newest vector's time
    result = CliRunner().invoke(app, ["stats", "--store", str(store)])
    assert result.exit_code == 0, result.output
    assert "semantic vectors" in result.output and "behind" in result.output
    as_json = CliRunner().invoke(app, ["stats", "--store", str(store), "--json"])
    assert '"lag_positions"' in as_json.output
