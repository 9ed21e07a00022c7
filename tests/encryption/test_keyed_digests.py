"""Digests that reveal nothing after an erasure (issue 36, item 2; ``ledger/digests.py``).

Ids derived from names (stream ids, ``namespace:``/``key:`` tags, the key store's records)
are keyed: after an erasure, someone holding every file of the store who guesses the exact
statements, subjects and names finds no matching digest, by the public derivation (uuid5)
or by the keyed one under any key the files hold. Ids stay deterministic for the key holder,
the store records its id format, and a store written by the release before (id format 1,
``tests/ledger/fixtures/format1-stores.tar.gz``) keeps working and migrates.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import tarfile
from collections.abc import Callable, Iterable
from pathlib import Path
from uuid import UUID

import duckdb
import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_ledger.commands import MemoryEngine, RecordedExtractor
from memory_ledger.ledger import ids, tags
from memory_ledger.ledger.digests import (
    ID_FORMAT_KEYED,
    ID_FORMAT_UNKEYED,
    IdDigests,
    keyed_uuid,
)
from memory_ledger.ledger.ids import Namespace, normalize_statement
from memory_ledger.ledger.key_errors import KeyStoreError
from memory_ledger.ledger.key_store import FileKeyStore, KeyStoreState
from memory_ledger.ledger.keyring import namespace_ids
from memory_ledger.replay.audit.migrate import migrate_store
from tests.conftest import make_item

FIXTURE = Path(__file__).parent.parent / "ledger" / "fixtures" / "format1-stores.tar.gz"
FIXTURE_KEY = bytes(range(32))
ERASED = Namespace("zorblax", "quintessa vandermeer", "diary")
KEPT = Namespace("zorblax", "bartholomew", "diary")
FACTS = [  # (statement, subject, predicate)
    ("Quintessa Vandermeer lives in Lisbon.", "Quintessa Vandermeer", "lives_in"),
    ("Quintessa Vandermeer was born in 1990.", "Quintessa Vandermeer", "born_in"),
    ("Quintessa Vandermeer likes green tea.", None, None),
]
SESSIONS = ["s1", "diary-2026-01-05"]


def _fill(engine: MemoryEngine) -> None:
    for ns in (ERASED, KEPT):
        for statement, subject, predicate in FACTS:
            text = statement.replace("Quintessa Vandermeer", ns.principal.title())
            engine.remember(ns, text, subject=subject and ns.principal.title(), predicate=predicate)
        for sid in SESSIONS:
            extractor = RecordedExtractor()
            with engine.session(ns, sid, extractor=extractor) as session:
                extractor.provide(1, [make_item(f"{ns.principal.title()} keeps bees.")])
                session.observe_final_transcript(1, "user: I keep bees")
                session.finish()
        engine.recall(ns, "bees tea Lisbon", 5)
    engine.forget_all(KEPT)  # a bulk-forget stream too


def _guesses(digests: IdDigests, ns: Namespace) -> dict[str, bytes | UUID]:
    """Every id ``digests`` derives from the names and statements of ``ns`` an attacker
    would guess."""
    found: dict[str, bytes | UUID] = {}
    found["namespace"] = digests.namespace_id(ns)
    found["tenant"] = digests.tenant_id(ns.tenant)
    found["principal"] = digests.principal_id(ns.tenant, ns.principal)
    found["namespace tag"] = digests.namespace_tag(ns).encode()
    statements = [f[0] for f in FACTS] + ["Quintessa Vandermeer keeps bees."]
    for statement in statements:
        found[f"memory {statement}"] = digests.memory_id(ns, normalize_statement(statement))
    for _, subject, predicate in FACTS:
        if subject and predicate:
            key = (subject.lower(), predicate)
            found[f"key {key}"] = digests.key_tag(ns, key).encode()
    for sid in SESSIONS:
        stream = digests.session_stream_id(ns, sid)
        found[f"session {sid}"] = stream
        for statement in statements:
            found[f"command {sid}"] = digests.command_id(ns, stream, 1, "remember", statement)
    return found


def _needles(value: bytes | UUID) -> list[bytes]:
    if isinstance(value, UUID):
        return [value.bytes, str(value).encode(), value.hex.encode()]
    return [value]


def _store_derived(key: bytes) -> Callable[[Namespace], bytes]:
    return lambda ns: hmac.digest(key, b"namespace-key\x1f" + ns.key().encode(), hashlib.sha256)


def _data_derived(key: bytes) -> Callable[[Namespace], bytes]:
    return lambda ns: hmac.digest(key, b"memory-ledger ids\x1f" + ns.key().encode(), hashlib.sha256)


def _attacker_digests(state: KeyStoreState) -> list[IdDigests]:
    """The public derivation, and the keyed one under every key-like byte string the key
    store holds (what the files give someone without the master key)."""
    candidates: list[bytes] = [b for b in (state.id_key, state.id_key_wrapped) if b]
    candidates += [r.wrapped for r in state.keys if r.wrapped]
    candidates += [c[:32] for c in candidates] + [c[-32:] for c in candidates]
    found = [IdDigests(ID_FORMAT_UNKEYED)]
    for key in candidates:
        for inside in (lambda _ns, k=key: k, _store_derived(key), _data_derived(key)):
            found.append(IdDigests(ID_FORMAT_KEYED, lambda k=key: k, inside))
    return found


def _sql_values(store: Path) -> set[str]:
    """Every value of every column of every table of the store's DuckDB files, as text
    (DuckDB may compress strings and keeps UUIDs in its own byte order)."""
    values: set[str] = set()
    for path in store.rglob("*.duckdb"):
        conn = duckdb.connect(str(path), read_only=True)
        try:
            for (table,) in conn.execute("SELECT table_name FROM duckdb_tables()").fetchall():
                columns = conn.execute(f'SELECT * FROM "{table}" LIMIT 0').description or []
                for column in columns:
                    rows = conn.execute(
                        f'SELECT DISTINCT CAST("{column[0]}" AS VARCHAR) FROM "{table}"'  # noqa: S608
                    ).fetchall()
                    values.update(str(v) for (v,) in rows if v is not None)
        finally:
            conn.close()
    return values


def _found(store: Path, guesses: Iterable[tuple[str, bytes | UUID]]) -> list[str]:
    files = [(p, p.read_bytes()) for p in sorted(store.rglob("*")) if p.is_file()]
    sql = _sql_values(store)
    hits = []
    for label, value in guesses:
        for needle in _needles(value):
            hits += [f"{label} in {p.name}" for p, data in files if needle in data]
            text = needle.decode("ascii", "replace")
            hits += [f"{label} in a DuckDB row" for v in sql if text in v]
    return hits


def test_after_an_erasure_no_guessed_name_or_statement_matches_a_digest(tmp_path: Path) -> None:
    store, master = tmp_path / "store", os.urandom(32)
    with MemoryEngine.open(store, master_key=master, sync=False) as engine:
        _fill(engine)
        holder = engine.keyring.digests
        erased_before = _guesses(holder, ERASED)
        kept = _guesses(holder, KEPT)
    # The scan finds what is there: the key holder's ids of both namespaces, before.
    real = [("memory", erased_before[f"memory {FACTS[0][0]}"])]
    assert _found(store, real)
    with MemoryEngine.open(store, master_key=master, sync=False) as engine:
        engine.erase(ERASED.tenant, ERASED.principal)
        engine.recall(KEPT, "bees", 5)
        after = _guesses(engine.keyring.digests, ERASED)
    state = FileKeyStore(store / "keys", read_only=True).read()
    assert state.id_key is None and state.id_key_wrapped  # the store key is wrapped
    for digests in _attacker_digests(state):
        guesses = _guesses(digests, ERASED)
        assert _found(store, guesses.items()) == [], digests.id_format
    # Even the master key's holder no longer derives the ids inside the erased namespace
    # (their key went with the data key); the namespace's own id stays derivable by them.
    inside = {k: v for k, v in after.items() if k.startswith(("memory", "key", "session"))}
    assert _found(store, inside.items()) == []
    assert all(after[k] != erased_before[k] for k in inside)
    # The kept namespace's ids are still found (the stream ids are in its records).
    assert _found(store, [("kept session", kept["session s1"])])


def test_ids_are_deterministic_for_the_key_holder_and_differ_between_stores(
    tmp_path: Path,
) -> None:
    ns, text = Namespace("t", "p", "s"), "Alice likes green tea."
    with MemoryEngine.open(tmp_path / "a", sync=False) as engine:
        first = engine.remember(ns, text).memory_id
        session_stream = engine.keyring.digests.session_stream_id(ns, "s1")
    with MemoryEngine.open(tmp_path / "a", sync=False) as engine:
        again = engine.remember(ns, "alice likes  green tea")  # an exact normalized duplicate
        assert again.memory_id == first and again.report.reinforced == (first,)
        assert engine.keyring.digests.session_stream_id(ns, "s1") == session_stream
    with MemoryEngine.open(tmp_path / "b", sync=False, master_key=os.urandom(32)) as engine:
        other = engine.remember(ns, text).memory_id
    assert first is not None and other is not None
    assert first != other != ids.memory_id(ns, normalize_statement(text))
    assert first.version == other.version == 8  # noqa: PLR2004 (RFC 9562 version 8)


@settings(max_examples=50, deadline=None)
@given(st.binary(min_size=32, max_size=32), st.binary(min_size=32, max_size=32), st.text())
def test_keyed_uuid_is_a_deterministic_version_8_uuid_per_key(
    key: bytes, other: bytes, name: str
) -> None:
    name = name.encode("utf-8", "replace").decode("utf-8")
    derived = keyed_uuid(key, name)
    assert derived == keyed_uuid(key, name) == UUID(str(derived))
    assert derived.version == 8 and derived.variant == "specified in RFC 4122"  # noqa: PLR2004
    digest = hmac.digest(key, name.encode(), hashlib.sha256)[:16]
    assert (derived.int ^ int.from_bytes(digest)) & ~((0xC000 << 48) | (0xF000 << 64)) == 0
    if other != key:
        assert keyed_uuid(other, name) != derived


def test_a_new_store_records_its_id_format_and_key(tmp_path: Path) -> None:
    ns = Namespace("t", "p", "s")
    with MemoryEngine.open(tmp_path / "clear", sync=False) as engine:
        engine.remember(ns, "Alice likes tea.")
    clear = FileKeyStore(tmp_path / "clear" / "keys", read_only=True).read()
    assert clear.id_format == ID_FORMAT_KEYED and clear.format == 2  # noqa: PLR2004
    assert clear.id_key is not None and len(clear.id_key) == 32  # noqa: PLR2004
    assert clear.master_key_id is None and clear.keys == ()
    with MemoryEngine.open(tmp_path / "enc", sync=False, master_key=os.urandom(32)) as engine:
        engine.remember(ns, "Alice likes tea.")
        assert engine.keyring.namespace_id(ns) != namespace_ids(ns)[0]
    enc = FileKeyStore(tmp_path / "enc" / "keys", read_only=True).read()
    assert enc.id_format == ID_FORMAT_KEYED and enc.id_key is None and enc.id_key_wrapped
    assert [r.ids_from_data_key for r in enc.keys] == [True]


def test_a_keyed_store_without_its_key_store_refuses_to_open(tmp_path: Path) -> None:
    with MemoryEngine.open(tmp_path / "s", sync=False) as engine:
        engine.remember(Namespace("t", "p", "s"), "Alice likes tea.")
    (tmp_path / "s" / "keys" / "data-keys.msgpack").unlink()
    with pytest.raises(KeyStoreError) as e:
        MemoryEngine.open(tmp_path / "s", sync=False)
    assert e.value.reason_code == "key_store_missing"


@pytest.fixture
def format1(tmp_path: Path) -> Path:
    """The stores the release before keyed digests wrote (see the fixture's script)."""
    out = tmp_path / "format1"
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(out, filter="data")
    return out


ALICE, BOB = Namespace("acme", "alice", "chat"), Namespace("acme", "bob", "chat")


def test_a_format_1_store_keeps_its_unkeyed_ids_for_reads_and_writes(format1: Path) -> None:
    tea = ids.memory_id(ALICE, normalize_statement("Alice likes green tea"))
    lisbon = ids.memory_id(ALICE, normalize_statement("Alice lives in Lisbon"))
    with MemoryEngine.open(format1 / "clear", sync=False) as engine:
        assert engine.keyring.digests.id_format == ID_FORMAT_UNKEYED
        assert [h.memory_id for h in engine.recall(ALICE, "green tea", 5).results] == [str(tea)]
        again = engine.remember(ALICE, "alice likes green tea.")
        assert again.memory_id == tea and again.report.reinforced == (tea,)
        porto = engine.remember(
            ALICE, "Alice lives in Porto", subject="Alice", predicate="lives_in", value="Porto"
        )  # found the old value through its unkeyed key: tag
        assert porto.memory_id == ids.memory_id(ALICE, normalize_statement("Alice lives in Porto"))
        assert porto.report.superseded == (lisbon,)
        tag = tags.key_tag(ALICE, ("alice", "lives_in"))
        assert len(engine.read_tagged(tag)) == 2  # noqa: PLR2004
    with MemoryEngine.open(format1 / "encrypted", sync=False, master_key=FIXTURE_KEY) as engine:
        assert engine.keyring.digests.id_format == ID_FORMAT_UNKEYED
        assert engine.remember(ALICE, "Alice likes green tea").memory_id == tea
        engine.erase(BOB.tenant, BOB.principal)  # a key store write records the format
        assert engine.recall(ALICE, "tea", 5).results
    state = FileKeyStore(format1 / "encrypted" / "keys", read_only=True).read()
    assert state.id_format == ID_FORMAT_UNKEYED and state.id_key is None
    # What keyed digests prevent: in a format 1 store, the erased statement's public digest
    # is still in the files.
    cello = ids.memory_id(BOB, normalize_statement("Bob plays the cello"))
    assert _found(format1 / "encrypted", [("cello", cello)])


def test_migrate_carries_the_id_format_and_the_store_key(
    format1: Path, tmp_path: Path, pg_url: str
) -> None:
    old = migrate_store(format1 / "encrypted", pg_url, master_key=FIXTURE_KEY)
    assert old.ok and old.copied == old.head
    tea = ids.memory_id(ALICE, normalize_statement("Alice likes green tea"))
    with MemoryEngine.open(
        tmp_path / "host", ledger=pg_url, master_key=FIXTURE_KEY, follow=False
    ) as engine:
        assert engine.keyring.digests.id_format == ID_FORMAT_UNKEYED
        assert engine.remember(ALICE, "Alice likes green tea").report.reinforced == (tea,)


def test_migrating_a_keyed_store_keeps_its_ids(tmp_path: Path, pg_url: str) -> None:
    store, ns = tmp_path / "store", Namespace("t", "p", "s")
    with MemoryEngine.open(store, sync=False) as engine:
        tea = engine.remember(ns, "Alice likes tea.").memory_id
    report = migrate_store(store, pg_url)
    assert report.ok
    with MemoryEngine.open(tmp_path / "host", ledger=pg_url, follow=False) as engine:
        assert engine.keyring.digests.id_format == ID_FORMAT_KEYED
        assert engine.remember(ns, "alice likes tea").report.reinforced == (tea,)
    assert msgspec.to_builtins(report)["ok"]


def test_a_store_that_turns_encryption_on_keeps_the_ids_of_its_clear_records(
    tmp_path: Path,
) -> None:
    ns, store, master = Namespace("t", "p", "s"), tmp_path / "s", os.urandom(32)
    with MemoryEngine.open(store, sync=False) as engine:
        tea = engine.remember(ns, "Alice likes tea.").memory_id
    with MemoryEngine.open(store, sync=False, master_key=master) as engine:
        assert engine.remember(ns, "alice likes tea").report.reinforced == (tea,)
        other = Namespace("t", "p", "new")
        jazz = engine.remember(other, "Bob likes jazz.").memory_id
    state = FileKeyStore(store / "keys", read_only=True).read()
    assert state.clear_until > 0 and state.id_key is None and state.id_key_wrapped
    assert not any(r.ids_from_data_key for r in state.keys)  # derived from the store key
    with MemoryEngine.open(store, sync=False, master_key=master) as engine:
        assert engine.remember(other, "bob likes jazz").report.reinforced == (jazz,)
