"""Session-owned workspace retrieval: admission, background indexing, verified search, close."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from memory_ledger.commands.workspace import (
    ByteWindows,
    LineWindows,
    WorkspaceError,
    WorkspaceRetrieval,
)
from memory_ledger.commands.workspace.files import OutsideRootError, WorkspaceRoot
from memory_ledger.commands.workspace.retrieval import AdmissionRules
from memory_ledger.commands.workspace.search import RRF_K, search_tool_schema
from tests.workspace_helpers import WordBagProvider, write_tree

SECRET = "AKIAIOSFODNN7EXAMPLE"
TREE: dict[str, str | bytes] = {
    "src/garage.py": "def park_car(slot):\n    '''Park the car in a slot.'''\n    return slot\n",
    "src/pets.py": "class Kitten:\n    def purr(self):\n        return 'purr'\n",
    "docs/notes.md": "# Notes\n\nThe ledger is opened with LMDB.\nRecall uses BM25.\n",
    "src/config.py": f"aws_access_key_id = '{SECRET}'\n",
    "node_modules/lib/index.js": "module.exports = 'car'\n",
    ".git/HEAD": "ref: refs/heads/main\n",
    "build/out.txt": "car car car\n",
    "assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00",
    "data/blob.txt": b"car\x00\x01\x02",
    "data/latin1.txt": "voiture caf\xe9 car".encode("latin-1"),
    "data/big.txt": "car " * 400,
    ".env": "TOKEN=car\n",
    "keys/server.pem": "car\n",
    "store/ledger/data.mdb": b"car",
}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return write_tree(tmp_path / "repo", TREE)


def open_ws(root: Path, **kwargs: object) -> WorkspaceRetrieval:
    kwargs.setdefault("rules", AdmissionRules(max_file_bytes=1000))
    return WorkspaceRetrieval(root, **kwargs)  # type: ignore[arg-type]


def test_admission_leaves_out_generated_binary_large_secret_and_credential_files(
    tree: Path,
) -> None:
    provider = WordBagProvider()
    with open_ws(tree, embeddings=provider) as ws:
        status = ws.wait_ready(30)
        assert status.state == "ready"
        assert status.excluded == {
            "binary": 2,  # logo.png by name, blob.txt by its NUL byte
            "credential_file": 2,  # .env, server.pem
            "generated": 3,  # .git, build, node_modules (folders)
            "not_utf8": 1,
            "secret": 1,
            "store": 1,
            "too_large": 1,
        }
        assert status.files_indexed == 3
        served = {h.path for h in ws.search("car", "lexical", 20).hits}
        assert served == {"src/garage.py"}
    assert not any(SECRET in text for text in provider.texts)  # never sent to a provider
    assert not any("voiture" in text or "TOKEN" in text for text in provider.texts)


def test_lexical_hits_cite_path_lines_and_digest_of_the_current_file(tree: Path) -> None:
    with open_ws(tree, chunking=LineWindows(lines=2)) as ws:
        ws.wait_ready(30)
        hit = ws.search("which database opens the ledger", "lexical", 1).hits[0]
    assert (hit.path, hit.line_start, hit.line_end) == ("docs/notes.md", 3, 4)
    assert hit.text == "The ledger is opened with LMDB.\nRecall uses BM25.\n"
    data = (tree / "docs/notes.md").read_bytes()
    assert data[hit.byte_start : hit.byte_end].decode() == hit.text
    assert hit.citation.startswith("docs/notes.md:L3-4@")
    assert hit.lexical_rank == 1 and hit.semantic_rank is None


def test_identifier_parts_are_searchable(tree: Path) -> None:
    with open_ws(tree) as ws:
        ws.wait_ready(30)
        assert [h.path for h in ws.search("park_car", k=1).hits] == ["src/garage.py"]
        assert [h.path for h in ws.search("park", k=1).hits] == ["src/garage.py"]


def test_semantic_and_hybrid_modes_need_a_provider(tree: Path) -> None:
    with open_ws(tree) as ws:
        assert ws.modes == ("lexical",)
        for mode in ("semantic", "hybrid"):
            with pytest.raises(WorkspaceError) as caught:
                ws.search("car", mode)  # type: ignore[arg-type]
            assert caught.value.reason_code == "mode_unavailable"
        assert ws.status().semantic_coverage is None
    schema = search_tool_schema(("lexical",))
    assert schema["parameters"]["properties"]["mode"]["enum"] == ["lexical"]  # type: ignore[index]


def test_semantic_mode_finds_synonyms_and_hybrid_fuses_one_based_ranks(tree: Path) -> None:
    provider = WordBagProvider()
    with open_ws(tree, embeddings=provider) as ws:
        assert ws.modes == ("lexical", "semantic", "hybrid")
        status = ws.wait_ready(30)
        assert status.semantic_coverage == 1.0 and status.vector_bytes > 0
        semantic = ws.search("vehicle", "semantic", 1).hits
        assert [h.path for h in semantic] == ["src/garage.py"]  # no shared word, a synonym
        assert ws.search("vehicle", "lexical", 3).hits == ()
        hybrid = ws.search("car", "hybrid", 3).hits
    top = hybrid[0]
    assert top.path == "src/garage.py" and top.lexical_rank == 1 and top.semantic_rank == 1
    assert top.score == pytest.approx(2 / (RRF_K + 1))
    for hit in hybrid:
        expected = sum(1 / (RRF_K + r) for r in (hit.lexical_rank, hit.semantic_rank) if r)
        assert hit.score == pytest.approx(expected)


def test_changed_and_deleted_files_are_never_served_then_reindexed(tree: Path) -> None:
    with open_ws(tree) as ws:
        ws.wait_ready(30)
        (tree / "docs/notes.md").write_text("# Notes\n\nThe ledger moved to SQLite.\n")
        (tree / "src/garage.py").unlink()
        result = ws.search("ledger", "lexical", 5)
        assert result.hits == ()
        assert result.rejected == {"changed": 1}
        assert ws.search("park car", "lexical", 5).rejected == {"deleted": 1}
        ws.wait_ready(30)  # the search queued both files for a re-read
        hits = ws.search("ledger", "lexical", 5).hits
        assert [h.text for h in hits] == ["# Notes\n\nThe ledger moved to SQLite.\n"]
        assert ws.search("park car", "lexical", 5).hits == ()
        assert "src/garage.py" not in ws.catalog.paths()


def test_construction_returns_before_embedding_and_partial_results_are_served(
    tree: Path,
) -> None:
    gate = threading.Event()
    provider = WordBagProvider(gate=gate)
    ws = open_ws(tree, embeddings=provider)
    try:
        assert provider.entered.wait(30)  # the indexer is inside the provider ...
        status = ws.wait_ready(0.01)  # ... so a short wait times out, keeping partial results
        assert status.state == "building"
        assert status.semantic_coverage == 0.0 and status.queue_depth > 0
        assert ws.search("car", "lexical", 1).hits[0].path == "src/garage.py"
        gate.set()
        assert ws.wait_ready(30).state == "ready"
    finally:
        gate.set()
        ws.close()


def test_close_cancels_provider_work_joins_and_releases_every_vector(tree: Path) -> None:
    gate = threading.Event()
    provider = WordBagProvider(gate=gate)
    ws = open_ws(tree, embeddings=provider, chunking=ByteWindows(size=8), batch_size=1)
    assert provider.entered.wait(30)
    waiter_status: list[str] = []
    waiter = threading.Thread(target=lambda: waiter_status.append(ws.wait_ready(30).state))
    waiter.start()
    threading.Timer(0.05, gate.set).start()  # the call in flight returns during close()
    final = ws.close(timeout=30)
    waiter.join(30)
    assert not waiter.is_alive() and waiter_status == ["closed"]  # close interrupts the wait
    assert provider.calls == 1  # dozens of batches were pending; none was sent
    assert final.state == "closed" and final.released is True
    assert final.vector_bytes == 0 and final.release_rate == 1.0
    assert ws.close() is final
    with pytest.raises(WorkspaceError) as caught:
        ws.search("car")
    assert caught.value.reason_code == "closed"


def test_release_rate_counts_the_vectors_held_before_close(tree: Path) -> None:
    with open_ws(tree, embeddings=WordBagProvider()) as ws:
        ws.wait_ready(30)
        ws.search("car", "semantic", 1)  # builds the search matrix too
        assert ws.status().vector_bytes > 0
        final = ws.close()
    assert final.release_rate == 1.0 and final.released


def test_reopen_reuses_vectors_of_unchanged_files_by_digest(tree: Path, tmp_path: Path) -> None:
    cache = tmp_path / "vectors"
    first = WordBagProvider()
    with open_ws(tree, embeddings=first, vector_cache=cache) as ws:
        assert ws.wait_ready(30).files_embedded == 3
    (tree / "src/pets.py").write_text("class Feline:\n    pass\n")
    second = WordBagProvider()
    with open_ws(tree, embeddings=second, vector_cache=cache) as ws:
        status = ws.wait_ready(30)
        assert status.files_embedded == 3 and status.cache_hits == 2
        assert ws.search("kitten", "semantic", 1).hits[0].path == "src/pets.py"
    assert [t for t in second.texts if t != "kitten"] == ["class Feline:\n    pass\n"]


def test_refresh_reconciles_new_changed_and_deleted_files_without_reembedding(
    tree: Path,
) -> None:
    provider = WordBagProvider()
    with open_ws(tree, embeddings=provider) as ws:
        ws.wait_ready(30)
        before = len(provider.texts)
        (tree / "src/new.py").write_text("SPEED = 'fast vehicle'\n")
        (tree / "docs/notes.md").write_text("Projections live in DuckDB.\n")
        (tree / "src/pets.py").unlink()
        ws.refresh()
        status = ws.wait_ready(30)
        assert status.files_indexed == 3 and status.state == "ready"
        assert sorted(provider.texts[before:]) == [
            "Projections live in DuckDB.\n",
            "SPEED = 'fast vehicle'\n",
        ]
        assert ws.catalog.paths() == ["docs/notes.md", "src/garage.py", "src/new.py"]


def test_a_failing_provider_degrades_semantic_search_but_lexical_still_serves(
    tree: Path,
) -> None:
    provider = WordBagProvider()
    provider.mode = "raise"
    with open_ws(tree, embeddings=provider) as ws:
        status = ws.wait_ready(30)
        assert status.state == "degraded"
        assert {f.reason for f in status.failures} == {"embedding:provider_failed"}
        assert status.semantic_coverage == 0.0 and status.lexical_coverage == 1.0
        assert ws.search("car", "lexical", 1).hits
        semantic = ws.search("car", "semantic", 1)
        assert semantic.hits == () and semantic.degraded == "provider_failed"
        hybrid = ws.search("car", "hybrid", 1)
        assert hybrid.degraded == "provider_failed" and hybrid.hits[0].path == "src/garage.py"
        provider.mode = "ok"  # the provider is back: the next pass retries the failed files
        ws.refresh()
        status = ws.wait_ready(30)
        assert status.state == "ready" and status.failures == ()
        assert status.semantic_coverage == 1.0


def test_rejected_vectors_are_failures_too(tree: Path) -> None:
    provider = WordBagProvider()
    provider.mode = "nan"
    with open_ws(tree, embeddings=provider) as ws:
        status = ws.wait_ready(30)
    assert status.state == "degraded"
    assert {f.reason for f in status.failures} == {"embedding:non_finite"}


def test_reads_never_leave_the_root(tree: Path, tmp_path: Path) -> None:
    outside = write_tree(tmp_path / "outside", {"secret.md": "car outside\n", "d/x.md": "car\n"})
    os.symlink(outside / "secret.md", tree / "src" / "link.md")
    os.symlink(outside / "d", tree / "linked-dir")
    with open_ws(tree) as ws:
        status = ws.wait_ready(30)
        assert status.excluded["symlink"] == 2
        assert all("outside" not in h.text for h in ws.search("car outside", k=10).hits)
        # A folder swapped for a link after indexing is not followed at serve time.
        (tree / "docs" / "notes.md").rename(tmp_path / "notes.md")
        (tree / "docs").rmdir()
        os.symlink(outside, tree / "docs")
        (outside / "notes.md").write_bytes((tmp_path / "notes.md").read_bytes())
        result = ws.search("ledger LMDB", k=3)
        assert result.hits == () and result.rejected == {"unreadable": 1}
    root = WorkspaceRoot(tree)
    try:
        for bad in ("../outside/secret.md", "/etc/passwd", "src/../src/garage.py", "src/link.md"):
            with pytest.raises(OutsideRootError):
                root.read(bad, 1000)
        assert root.read("src/garage.py", 1000).startswith(b"def park_car")
    finally:
        root.close()


def test_bad_roots_and_queries_are_refused(tree: Path) -> None:
    with pytest.raises(WorkspaceError) as caught:
        WorkspaceRetrieval(tree / "missing")
    assert caught.value.reason_code == "bad_root"
    with pytest.raises(WorkspaceError):
        WorkspaceRetrieval(tree / "docs" / "notes.md")
    with pytest.raises(TypeError):
        WorkspaceRetrieval(tree, chunking="lines")  # type: ignore[arg-type]
    with open_ws(tree) as ws:
        for query, k in (("", 3), ("   ", 3), ("car", 0), ("car", 51)):
            with pytest.raises(WorkspaceError) as caught:
                ws.search(query, k=k)
            assert caught.value.reason_code == "bad_query"


def test_a_cache_write_checks_its_owner_before_and_after(tmp_path: Path) -> None:
    """The erasure marks the namespace erased, then deletes its folder: a write that raced
    it either sees the mark first (writes nothing) or after (deletes its own file)."""
    import numpy as np

    from memory_ledger.commands.workspace.vector_cache import VectorCache

    descriptor = WordBagProvider().descriptor
    vectors = np.ones((1, descriptor.dimension), dtype=np.float32) / np.sqrt(descriptor.dimension)
    answers: list[bool] = []

    def erased() -> bool:
        return answers.pop(0)

    cache = VectorCache(tmp_path, descriptor, "lines/40/4096", erased=erased)
    answers[:] = [False, False]
    cache.put("a" * 64, vectors)
    assert cache.get("a" * 64, 1) is not None  # written, owner live throughout
    answers[:] = [True]
    cache.put("b" * 64, vectors)  # erased before: nothing written
    answers[:] = [False, True]
    cache.put("c" * 64, vectors)  # erased while writing: its own file deleted
    assert answers == []
    assert sorted(p.name[:1] for p in tmp_path.rglob("*.npy")) == ["a"]
