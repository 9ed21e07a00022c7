"""The session API against a plain in-memory model of canonical memory (the oracle).

Random sequences of observe / finish / recall over two namespaces; after every step:
canonical memory equals the model, positions are gapless, no stored event holds the planted
secret, and no recall crosses a namespace.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.commands.errors import SessionSealedError
from memory_ledger.ledger.digests import IdDigests
from memory_ledger.ledger.ids import normalize_statement
from tests.conftest import make_item

NAMESPACES = [Namespace("acme", "alice", "chat"), Namespace("globex", "alice", "chat")]
SECRET = "sk-proj-" + "Zq8" * 14
FACTS = [
    ("Alice's nickname is Al.", "nickname"),
    ("Alice's nickname is Ally.", "nickname"),
    ("alice's NICKNAME is al", "nickname"),
    ("Alice likes tea.", None),
    ("Alice lives in Lisbon.", "lives_in"),
    ("Alice lives in Porto.", "lives_in"),
    (f"Alice's key is {SECRET}.", None),  # rejected: never stored
]


class Model:
    """Canonical memory as the reconciliation rules say it should be."""

    def __init__(self, digests: IdDigests) -> None:
        self.digests = digests  # how the store under test derives memory ids
        self.active: dict[int, dict[str, tuple[str, str] | None]] = {0: {}, 1: {}}
        self.pending: dict[tuple[int, int], list[tuple[str, str | None]]] = {}
        self.sealed: set[tuple[int, int]] = set()

    def observe(self, ns: int, sid: int, facts: list[tuple[str, str | None]]) -> None:
        if (ns, sid) in self.sealed:
            return
        kept = [f for f in facts if SECRET not in f[0]]
        self.pending.setdefault((ns, sid), []).extend(kept)

    def finish(self, ns: int, sid: int) -> None:
        if (ns, sid) in self.sealed:
            return
        self.sealed.add((ns, sid))
        active = self.active[ns]
        for statement, predicate in self.pending.pop((ns, sid), []):
            mid = str(self.digests.memory_id(NAMESPACES[ns], normalize_statement(statement)))
            if mid in active:
                continue  # exact duplicate: reinforced
            key = ("alice", predicate) if predicate else None
            if key is not None:
                for other in [m for m, k in active.items() if k == key]:
                    del active[other]  # superseded by the newer value
            active[mid] = key


class OracleMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.mkdtemp(prefix="oracle_")
        self.engine = MemoryEngine.open(self.folder, sync=False)
        self.model = Model(self.engine.keyring.digests)
        self.sessions: dict[tuple[int, int], Any] = {}
        self.turns: dict[tuple[int, int], int] = {}

    def teardown(self) -> None:
        self.engine.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _session(self, ns: int, sid: int) -> Any:
        if (ns, sid) not in self.sessions:
            extractor = RecordedExtractor()
            session = self.engine.session(NAMESPACES[ns], f"s{sid}", extractor=extractor)
            self.sessions[(ns, sid)] = (session, extractor)
        return self.sessions[(ns, sid)]

    @rule(
        ns=st.integers(0, 1),
        sid=st.integers(0, 2),
        facts=st.lists(st.sampled_from(FACTS), max_size=3),
        leak=st.booleans(),
    )
    def observe(self, ns: int, sid: int, facts: list[tuple[str, str | None]], leak: bool) -> None:
        session, extractor = self._session(ns, sid)
        turn = self.turns.get((ns, sid), 0) + 1
        self.turns[(ns, sid)] = turn
        items = [make_item(s, predicate=p) for s, p in facts]
        extractor.provide(turn, items)
        transcript = f"user: turn {turn}" + (f" my key is {SECRET}" if leak else "")
        try:
            session.observe_final_transcript(turn, transcript)
        except SessionSealedError:
            pass
        self.model.observe(ns, sid, facts)

    @rule(ns=st.integers(0, 1), sid=st.integers(0, 2))
    def finish(self, ns: int, sid: int) -> None:
        session, _ = self._session(ns, sid)
        session.finish()
        self.model.finish(ns, sid)

    @rule(ns=st.integers(0, 1), query=st.sampled_from(["nickname", "Lisbon Porto", "tea"]))
    def recall(self, ns: int, query: str) -> None:
        for hit in self.engine.recall(NAMESPACES[ns], query, 10).results:
            row = self.engine.canonical.get(hit.memory_id)
            assert row is not None and row["tenant"] == NAMESPACES[ns].tenant

    @invariant()
    def canonical_memory_equals_the_model(self) -> None:
        self.engine.catch_up()
        for index, ns in enumerate(NAMESPACES):
            rows = self.engine.canonical.active_memories(ns.tenant, ns.principal, ns.scope_id)
            assert {r["memory_id"] for r in rows} == set(self.model.active[index])

    @invariant()
    def positions_are_gapless_and_no_secret_is_stored(self) -> None:
        head = self.engine.head
        notifications = self.engine.recorder.select_notifications(start=1, limit=head + 1)
        assert [n.id for n in notifications] == list(range(1, head + 1))
        for n in notifications:
            assert SECRET.encode() not in n.state


OracleMachine.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestOracleMachine = OracleMachine.TestCase
