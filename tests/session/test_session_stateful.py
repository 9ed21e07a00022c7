"""Random sequences of the session API; after every step the projections equal a rebuild."""

from __future__ import annotations

import shutil
import tempfile
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from memory_ledger.commands import MemoryEngine, Namespace, RecordedExtractor
from memory_ledger.commands.errors import CommandRejectedError, SessionSealedError
from memory_ledger.projections import table_digests
from tests.conftest import make_item
from tests.projections.test_projections import fresh_digests

NAMESPACES = [Namespace("acme", "alice", "chat"), Namespace("globex", "bob", "chat")]
FACTS = [
    ("Alice's nickname is Al.", "Alice", "nickname"),
    ("Alice's nickname is Ally.", "Alice", "nickname"),
    ("Alice likes tea.", "Alice", None),
    ("Alice lives in Lisbon.", "Alice", "lives_in"),
    ("Alice lives in Porto.", "Alice", "lives_in"),
    ("Bob sings in a choir.", "Bob", None),
]


class SessionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.mkdtemp(prefix="stateful_")
        self.engine = MemoryEngine.open(self.folder, sync=False)
        self.sessions: dict[tuple[int, int], Any] = {}
        self.turns: dict[tuple[int, int], int] = {}
        self.counter = 0

    def teardown(self) -> None:
        self.engine.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    def _session(self, ns: int, sid: int) -> Any:
        key = (ns, sid)
        if key not in self.sessions:
            extractor = RecordedExtractor()
            session = self.engine.session(NAMESPACES[ns], f"s{sid}", extractor=extractor)
            self.sessions[key] = (session, extractor)
        return self.sessions[key]

    @rule(
        ns=st.integers(0, 1),
        sid=st.integers(0, 2),
        facts=st.lists(st.sampled_from(FACTS), max_size=3),
    )
    def observe(self, ns: int, sid: int, facts: list[tuple[str, str, str | None]]) -> None:
        session, extractor = self._session(ns, sid)
        turn = self.turns.get((ns, sid), 0) + 1
        self.turns[(ns, sid)] = turn
        extractor.provide(turn, [make_item(s, subject=subj, predicate=p) for s, subj, p in facts])
        try:
            session.observe_final_transcript(turn, f"user: turn {turn}")
        except SessionSealedError:
            pass

    @rule(ns=st.integers(0, 1), sid=st.integers(0, 2))
    def finish(self, ns: int, sid: int) -> None:
        session, _ = self._session(ns, sid)
        session.finish()

    @rule(
        ns=st.integers(0, 1),
        sid=st.integers(0, 2),
        intent=st.sampled_from(["remember", "forget", "correct", "pin"]),
        fact=st.sampled_from(FACTS),
    )
    def command(self, ns: int, sid: int, intent: str, fact: tuple[str, str, str | None]) -> None:
        session, _ = self._session(ns, sid)
        try:
            session.apply_explicit_command(intent, fact[0], self.turns.get((ns, sid), 0))
        except (SessionSealedError, CommandRejectedError):
            pass

    @rule(
        ns=st.integers(0, 1),
        sid=st.integers(0, 2),
        query=st.sampled_from(["nickname", "tea Lisbon", "choir"]),
    )
    def recall_and_admit(self, ns: int, sid: int, query: str) -> None:
        session, _ = self._session(ns, sid)
        turn = self.turns.get((ns, sid), 0)
        session.prepare(turn, query)
        session.begin_turn(turn)
        result = session.recall(query, turn)
        for hit in result.results:
            assert hit.memory_id  # namespace isolation is checked by the invariant below
        if not session.state.sealed:
            session.admit(turn, [h for h in result.results if h.revision])

    @precondition(lambda self: bool(self.sessions))
    @rule()
    def flush(self) -> None:
        for session, _ in self.sessions.values():
            session.flush_reads()

    @invariant()
    def projections_equal_a_rebuild(self) -> None:
        self.engine.catch_up()
        assert table_digests(self.engine.projections.conn) == fresh_digests(self.engine)

    @invariant()
    def incremental_recall_index_equals_a_fresh_one(self) -> None:
        from memory_ledger.commands.recall.index import NamespaceRecallIndex
        from memory_ledger.commands.recall.lexical import ConversationWindows
        from memory_ledger.projections import CanonicalMemory

        position = self.engine.catch_up()
        canonical = CanonicalMemory(self.engine.projections.conn)
        fresh = NamespaceRecallIndex(
            canonical,
            context_of=self.engine.transcripts,
            windows=ConversationWindows(self.engine.transcripts, canonical.session_turns),
        )
        for ns in NAMESPACES:
            query = "nickname tea Lisbon Porto choir Alice"
            assert self.engine.recall(ns, query, 20).results == tuple(
                fresh.search(ns, query, 20, position)
            )

    @invariant()
    def recall_never_crosses_a_namespace(self) -> None:
        for index, ns in enumerate(NAMESPACES):
            other = NAMESPACES[1 - index]
            for hit in self.engine.recall(ns, "nickname tea Lisbon Porto choir", 20).results:
                row = self.engine.canonical.get(hit.memory_id)
                assert row is not None and row["tenant"] == ns.tenant != other.tenant


SessionMachine.TestCase.settings = settings(
    max_examples=20,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestSessionMachine = SessionMachine.TestCase
