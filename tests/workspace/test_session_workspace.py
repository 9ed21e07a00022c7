"""Workspace retrieval owned by a session: off by default, recorded, released on close."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.context.assembler import StaticContextProvider
from memory_ledger.commands.session import WorkspaceOptions
from memory_ledger.commands.workspace import LineWindows, WorkspaceError
from memory_ledger.ledger.events import (
    WorkspaceAttached,
    WorkspaceReleased,
    WorkspaceSearched,
)
from memory_ledger.replay import EventFilter, check_projections, describe_event, filter_events
from memory_ledger.replay.cli.app import app
from tests.workspace_helpers import WordBagProvider, write_tree

TREE = {
    "src/garage.py": "def park_car(slot):\n    return slot\n",
    "docs/deploy.md": "# Deploy\n\nRun make release on Fridays.\n",
}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "repo", dict(TREE))


def test_without_options_nothing_is_built_and_no_provider_is_called(
    engine: MemoryEngine, namespace: Namespace
) -> None:
    with engine.session(namespace, "plain") as session:
        assert session.workspace is None
        assert session.workspace_status().state == "disabled"
        assert session.workspace_modes == ()
        with pytest.raises(WorkspaceError) as caught:
            session.search_workspace("car")
        assert caught.value.reason_code == "disabled"
        with pytest.raises(WorkspaceError):
            session.workspace_provider()
        assert session.wait_for_workspace(0).state == "disabled"
    types = {type(e).__name__ for _, e in filter_events(engine, EventFilter(session_id="plain"))}
    assert not types & {"WorkspaceAttached", "WorkspaceSearched", "WorkspaceReleased"}


def test_a_session_records_attach_searches_and_release(
    engine: MemoryEngine, namespace: Namespace, repo: Path
) -> None:
    provider = WordBagProvider()
    options = WorkspaceOptions(repo, chunking=LineWindows(lines=10), embeddings=provider)
    with engine.session(namespace, "coder", workspace=options) as session:
        assert session.workspace_modes == ("lexical", "semantic", "hybrid")
        assert session.wait_for_workspace(30).state == "ready"
        hits = session.search_workspace("vehicle parking", "hybrid", 3, turn_id=1).hits
        assert hits[0].path == "src/garage.py"
        context = session.assemble_context(1, "park the car", [StaticContextProvider("x")])
        assert any(i.source == "workspace" for i in context.items)
        workspace_item = next(i for i in context.items if i.source == "workspace")
        assert workspace_item.text.startswith("src/garage.py:L1-2@")
    stream = [e for _, e in filter_events(engine, EventFilter(session_id="coder"))]
    attached = [e for e in stream if isinstance(e, WorkspaceAttached)]
    searched = [e for e in stream if isinstance(e, WorkspaceSearched)]
    released = [e for e in stream if isinstance(e, WorkspaceReleased)]
    assert len(attached) == 1 and attached[0].root == str(repo.resolve())
    assert attached[0].modes == ("lexical", "semantic", "hybrid")
    assert attached[0].model == "fake/word-bag/64/n" and attached[0].chunking == "lines/10/4096"
    assert [(s.mode, s.turn_id) for s in searched] == [("hybrid", 1), ("hybrid", 1)]
    assert searched[0].hits[0].path == "src/garage.py" and searched[0].hits[0].line_start == 1
    assert len(released) == 1 and released[0].release_rate == 1.0 and released[0].released
    assert released[0].files_indexed == 2
    assert "hybrid" in describe_event(searched[0]) and "release rate 1.00" in describe_event(
        released[0]
    )
    result = CliRunner().invoke(
        app,
        ["events", "--store", str(engine.path), "--type", "WorkspaceSearched", "--json"],
    )
    assert result.exit_code == 0 and result.stdout.count("\n") == 2
    assert check_projections(engine).ok  # the read models still equal a rebuild


def test_the_store_is_never_indexed_and_vectors_are_reused_on_reopen(
    tmp_path: Path, namespace: Namespace
) -> None:
    repo = write_tree(tmp_path / "repo", dict(TREE))
    store = repo / ".memory"  # a store inside the workspace
    first = WordBagProvider()
    with MemoryEngine.open(store) as engine:
        options = WorkspaceOptions(repo, embeddings=first)
        with engine.session(namespace, "s", workspace=options) as session:
            status = session.wait_for_workspace(30)
            assert status.files_indexed == 2 and status.excluded.get("store") == 1
        assert (store / "workspace-vectors").is_dir()
    second = WordBagProvider()
    with MemoryEngine.open(store) as engine:
        with engine.session(
            namespace, "s", workspace=WorkspaceOptions(repo, embeddings=second)
        ) as session:
            status = session.wait_for_workspace(30)
            assert status.cache_hits == 2 and status.files_embedded == 2
        assert second.calls == 0
        attached = list(filter_events(engine, EventFilter(types=("WorkspaceAttached",))))
        assert len(attached) == 2  # each session object that attached


def test_a_bad_root_is_refused_before_anything_is_recorded_for_it(
    engine: MemoryEngine, namespace: Namespace, tmp_path: Path
) -> None:
    with pytest.raises(WorkspaceError) as caught:
        engine.session(namespace, "s", workspace=WorkspaceOptions(tmp_path / "missing"))
    assert caught.value.reason_code == "bad_root"
    assert list(filter_events(engine, EventFilter(types=("WorkspaceAttached",)))) == []


def test_search_queries_are_redacted_in_the_ledger(
    engine: MemoryEngine, namespace: Namespace, repo: Path
) -> None:
    secret = "AKIAIOSFODNN7EXAMPLE"
    with engine.session(namespace, "s", workspace=WorkspaceOptions(repo)) as session:
        session.wait_for_workspace(30)
        session.search_workspace(f"release key {secret}")
    searched = [e for _, e in filter_events(engine, EventFilter(types=("WorkspaceSearched",)))]
    assert isinstance(searched[0], WorkspaceSearched)
    assert secret not in searched[0].query and "release" in searched[0].query


def _head_and_sessions(engine: MemoryEngine) -> tuple[int, set[str]]:
    opened = {
        type(e).__name__ for _, e in filter_events(engine, EventFilter(types=("SessionOpened",)))
    }
    return engine.head, opened


@pytest.mark.parametrize(
    "root",
    [
        "missing",
        os.fsdecode(b"r\xffoot"),  # not UTF-8 (and missing)
        "not-utf8-\udcff-folder",  # exists: still refused, its path is recorded
        "bad\x00root",
        "",  # would be the current directory
        "a-file.md",
        b"bytes-root",
        42,
    ],
)
def test_a_refused_root_writes_nothing_and_raises_a_typed_error(
    engine: MemoryEngine,
    namespace: Namespace,
    tmp_path: Path,
    root: object,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "a-file.md").write_text("a file, not a folder\n")
    (tmp_path / os.fsdecode(b"not-utf8-\xff-folder")).mkdir()
    (tmp_path / "cwd").mkdir()
    (tmp_path / "cwd" / "notes.md").write_text("wombat\n")
    monkeypatch.chdir(tmp_path / "cwd")
    given = str(tmp_path / root) if isinstance(root, str) and root else root
    before = _head_and_sessions(engine)
    with pytest.raises(WorkspaceError) as caught:
        engine.session(namespace, "s", workspace=WorkspaceOptions(given))  # type: ignore[arg-type]
    assert caught.value.reason_code == "bad_root"
    assert _head_and_sessions(engine) == before  # no SessionOpened left open, nothing at all
    assert not any(t.name == "workspace-indexer" for t in threading.enumerate())


def test_a_root_that_is_the_store_or_inside_it_is_refused(
    tmp_path: Path, namespace: Namespace
) -> None:
    store = tmp_path / "store"
    bob = Namespace("acme", "bob", "assistant")
    with MemoryEngine.open(store) as engine:
        engine.remember(bob, "Bob's salary is BOBPRIVATEWORD ninety thousand.")
        exports = store / "exports"
        exports.mkdir()
        (exports / "events.jsonl").write_text('{"statement": "BOBPRIVATEWORD"}\n')
        link = tmp_path / "link-to-store"
        link.symlink_to(store)
        for root in (store, exports, link, store / "." / "exports" / ".."):
            before = engine.head
            with pytest.raises(WorkspaceError) as caught:
                engine.session(namespace, "s", workspace=WorkspaceOptions(root))
            assert caught.value.reason_code == "root_in_store", root
            assert engine.head == before
        # the store as a sub-folder of the root stays left out of the tree
        with engine.session(namespace, "s", workspace=WorkspaceOptions(tmp_path)) as session:
            status = session.wait_for_workspace(30)
            assert status.excluded.get("store") == 1
            assert session.search_workspace("BOBPRIVATEWORD salary", k=5).hits == ()


def test_a_file_whose_name_is_not_utf8_is_left_out_and_every_search_is_recorded(
    engine: MemoryEngine, namespace: Namespace, tmp_path: Path
) -> None:
    repo = write_tree(tmp_path / "repo", {"good.md": "quetzal two\n"})
    (repo / os.fsdecode(b"bad\xffname.md")).write_text("quetzal one\n")
    (repo / os.fsdecode(b"dir\xff")).mkdir()
    (repo / os.fsdecode(b"dir\xff") / "inside.md").write_text("quetzal three\n")
    queries = ["two", "quetzal", "one", "three"]
    with engine.session(namespace, "s", workspace=WorkspaceOptions(repo)) as session:
        status = session.wait_for_workspace(30)
        assert status.files_indexed == 1 and status.excluded.get("not_utf8") == 2
        served = [[h.path for h in session.search_workspace(q, k=5).hits] for q in queries]
        assert served == [["good.md"], ["good.md"], [], []]
        with pytest.raises(WorkspaceError) as caught:
            session.search_workspace("quetzal \udcff")
        assert caught.value.reason_code == "bad_query"
    searched = [e for _, e in filter_events(engine, EventFilter(types=("WorkspaceSearched",)))]
    assert [e.query for e in searched if isinstance(e, WorkspaceSearched)] == queries


def test_a_session_that_fails_to_open_closes_the_retrieval_it_built(
    engine: MemoryEngine, namespace: Namespace, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory_ledger.commands.session.stream import SessionStream

    class Refused(Exception):
        pass

    def refuse(self: SessionStream, plan: object) -> None:
        raise Refused

    monkeypatch.setattr(SessionStream, "append_once", refuse)
    with pytest.raises(Refused):
        engine.session(namespace, "s", workspace=WorkspaceOptions(repo))
    assert not any(t.name == "workspace-indexer" for t in threading.enumerate())
