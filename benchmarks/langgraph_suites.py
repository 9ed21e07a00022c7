"""LangGraph's own store test suites, run against LedgerStore in a scratch folder.

Not a benchmark (so not in ``python -m benchmarks``): a conformance run. It copies
LangGraph's store tests (``libs/checkpoint/tests/test_store.py`` and the store tests of
``libs/checkpoint-postgres/tests`` and ``libs/checkpoint-sqlite/tests``) out of a LangGraph
checkout into a scratch folder, swaps only what builds the store for a :class:`LedgerStore`
on a fresh temporary folder (the ``store``/``vector_store`` fixtures and the
``_create_vector_store``/``create_vector_store`` helpers, appended to the copy so they
replace LangGraph's; where a test builds its store inline, ``InMemoryStore(...)`` or
``SqliteStore.from_conn_string(":memory:")``, that call), and runs pytest there. Nothing of
LangGraph is written into this repository; the scratch folder is left for reading.

Usage::

    python -m benchmarks.langgraph_suites --scratch /tmp/lgsuite/run \\
        [--git-dir /path/to/langgraph.git | --checkout /path/to/langgraph] [pytest args]

Without ``--git-dir``/``--checkout`` it clones ``https://github.com/langchain-ai/langgraph``
(shallow) into the scratch folder. The tests need ``pytest-asyncio`` and ``pytest-mock``
(LangGraph's dev dependencies), not ours: ``--site DIR`` puts a ``pip install --target DIR``
of them on the path. Exit status: pytest's.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["SUITES", "main", "prepare"]

#: suite folder -> (LangGraph test folder, files copied)
SUITES: dict[str, tuple[str, tuple[str, ...]]] = {
    "checkpoint": ("libs/checkpoint/tests", ("test_store.py", "embed_test_utils.py")),
    "checkpoint_postgres": (
        "libs/checkpoint-postgres/tests",
        ("test_store.py", "test_async_store.py", "embed_test_utils.py"),
    ),
    "checkpoint_sqlite": (
        "libs/checkpoint-sqlite/tests",
        ("test_store.py", "test_async_store.py"),
    ),
}

CONFTEST = '''"""Ours: the LedgerStore that replaces LangGraph's stores in its suites."""
import shutil
import tempfile
import uuid

import pytest

from memory_ledger import Namespace
from memory_ledger.replay.langgraph_store import LedgerStore
try:
    from tests.embed_test_utils import CharacterEmbeddings
except ImportError:  # the SQLite suites define theirs in test_store.py
    CharacterEmbeddings = None

DEFAULT_URI = "unused://ledgerstore"
VECTOR_TYPES = ["vector"]
_OPENED = []


def ledger_store(**kwargs):
    """A LedgerStore on a fresh temporary folder (kwargs: index, ttl as LangGraph's)."""
    folder = tempfile.mkdtemp(prefix="lgsuite-")
    store = LedgerStore.open(
        folder, Namespace("lgsuite", "tests", uuid.uuid4().hex[:12]), **kwargs
    )
    _OPENED.append((store, folder))
    return store


@pytest.fixture(autouse=True)
def _close_opened():
    yield
    while _OPENED:
        store, folder = _OPENED.pop()
        store.close()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def fake_embeddings():
    return CharacterEmbeddings(dims=500)
'''

# Appended to the Postgres suites: later definitions replace LangGraph's store builders.
POSTGRES_SYNC_FIXTURES = """

# --- memory-ledger: the store builders, replaced by LedgerStore ---------------------------
from contextlib import contextmanager as _lg_contextmanager
from tests.conftest import ledger_store as _ledger_store


@pytest.fixture(scope="function")
def store(request):
    s = _ledger_store(
        ttl={"default_ttl": TTL_MINUTES, "refresh_on_read": True,
             "sweep_interval_minutes": TTL_MINUTES / 2}
    )
    s.start_ttl_sweeper()
    yield s
    s.stop_ttl_sweeper()


@_lg_contextmanager
def _create_vector_store(vector_type, distance_type, fake_embeddings, text_fields=None,
                         enable_ttl=True):
    yield _ledger_store(
        index={"dims": fake_embeddings.dims, "embed": fake_embeddings, "fields": text_fields},
        ttl={"default_ttl": 2, "refresh_on_read": True} if enable_ttl else None,
    )


@pytest.fixture(scope="function")
def vector_store(request, fake_embeddings):
    with _create_vector_store("vector", "cosine", fake_embeddings) as s:
        yield s
"""

POSTGRES_ASYNC_FIXTURES = """

# --- memory-ledger: the store builders, replaced by LedgerStore ---------------------------
from tests.conftest import ledger_store as _ledger_store


@pytest.fixture(scope="function")
async def store(request):
    s = _ledger_store(
        ttl={"default_ttl": TTL_MINUTES, "refresh_on_read": True,
             "sweep_interval_minutes": TTL_MINUTES / 2}
    )
    s.start_ttl_sweeper()
    yield s
    s.stop_ttl_sweeper()


@asynccontextmanager
async def _create_vector_store(vector_type, distance_type, fake_embeddings, text_fields=None):
    yield _ledger_store(
        index={"dims": fake_embeddings.dims, "embed": fake_embeddings, "fields": text_fields}
    )


@asynccontextmanager
async def _create_pool_store():
    yield _ledger_store()


@pytest.fixture(scope="function")
async def vector_store(request, fake_embeddings):
    async with _create_vector_store("vector", "cosine", fake_embeddings) as s:
        yield s
"""

# Appended to the SQLite suites (their index config names the fields ``text_fields``).
SQLITE_SYNC_FIXTURES = """

# --- memory-ledger: the store builders, replaced by LedgerStore ---------------------------
from tests.conftest import ledger_store as _ledger_store


@contextmanager
def _ledger_cm():
    yield _ledger_store()


@pytest.fixture(scope="function")
def store(request):
    yield _ledger_store()


@contextmanager
def create_vector_store(fake_embeddings, text_fields=None, distance_type="cosine",
                        conn_type="memory"):
    yield _ledger_store(
        index={"dims": fake_embeddings.dims, "embed": fake_embeddings, "fields": text_fields}
    )
"""

SQLITE_ASYNC_FIXTURES = """

# --- memory-ledger: the store builders, replaced by LedgerStore ---------------------------
from tests.conftest import ledger_store as _ledger_store


@pytest.fixture(scope="function")
async def store(request):
    yield _ledger_store()


@asynccontextmanager
async def create_vector_store(fake_embeddings, conn_string=":memory:", text_fields=None):
    yield _ledger_store(
        index={"dims": fake_embeddings.dims, "embed": fake_embeddings, "fields": text_fields}
    )
"""

SQLITE_INLINE = (
    'with SqliteStore.from_conn_string(":memory:") as store:\n            store.setup()',
    "with _ledger_cm() as store:\n            pass",
)

PYTEST_INI = """[pytest]
asyncio_mode = auto
asyncio_default_fixture_loop_scope = function
addopts = -p no:cacheprovider -rfEs
"""


def _adapt(suite: str, name: str, text: str) -> str:
    """LangGraph's ``name`` with its store builders swapped for LedgerStore."""
    if suite == "checkpoint" and name == "test_store.py":
        marker = "from langgraph.store.memory import InMemoryStore\n"
        text = text.replace(
            marker, marker + "from tests.conftest import LedgerStore, ledger_store\n", 1
        )
        text = text.replace(
            'mocker.spy(InMemoryStore, "batch")', 'mocker.spy(LedgerStore, "batch")'
        )
        return text.replace("InMemoryStore(", "ledger_store(")
    if suite == "checkpoint_sqlite" and name == "test_store.py":
        return text.replace(*SQLITE_INLINE) + SQLITE_SYNC_FIXTURES
    if suite == "checkpoint_sqlite":
        return text + SQLITE_ASYNC_FIXTURES
    if name == "test_store.py":
        return text + POSTGRES_SYNC_FIXTURES
    if name == "test_async_store.py":
        return text + POSTGRES_ASYNC_FIXTURES
    return text


def _read(source: Path, bare: bool, rev: str, path: str) -> str:
    if bare:
        done = subprocess.run(
            ["git", f"--git-dir={source}", "show", f"{rev}:{path}"],
            check=True,
            capture_output=True,
            text=True,
        )
        return done.stdout
    return (source / path).read_text(encoding="utf-8")


def prepare(scratch: Path, source: Path, *, bare: bool, rev: str = "HEAD") -> str:
    """Write the adapted suites under ``scratch`` (one folder per suite, each a ``tests``
    package with our conftest) and return the LangGraph commit they came from."""
    git = ["git", f"--git-dir={source}"] if bare else ["git", "-C", str(source)]
    commit = subprocess.run(
        [*git, "rev-parse", rev], check=True, capture_output=True, text=True
    ).stdout.strip()
    for suite, (folder, files) in SUITES.items():
        tests = scratch / suite / "tests"
        if tests.exists():
            shutil.rmtree(tests)
        tests.mkdir(parents=True)
        (tests / "__init__.py").write_text("", encoding="utf-8")
        (tests / "conftest.py").write_text(CONFTEST, encoding="utf-8")
        (scratch / suite / "pytest.ini").write_text(PYTEST_INI, encoding="utf-8")
        for name in files:
            text = _read(source, bare, commit, f"{folder}/{name}")
            (tests / name).write_text(_adapt(suite, name, text), encoding="utf-8")
    (scratch / "LANGGRAPH_COMMIT").write_text(commit + "\n", encoding="utf-8")
    return commit


def main(argv: list[str] | None = None) -> int:
    """Prepare the scratch suites and run pytest on each; the worst exit status."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scratch", type=Path, required=True)
    parser.add_argument("--git-dir", type=Path, help="a bare LangGraph git directory")
    parser.add_argument("--checkout", type=Path, help="a LangGraph working tree")
    parser.add_argument("--rev", default="HEAD")
    parser.add_argument("--site", type=Path, help="folder with pytest-asyncio, pytest-mock")
    args, pytest_args = parser.parse_known_args(argv)
    scratch: Path = args.scratch.resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    if args.git_dir:
        source, bare = args.git_dir, True
    elif args.checkout:
        source, bare = args.checkout, False
    else:
        source, bare = scratch / "langgraph", False
        if not source.exists():
            subprocess.run(
                [
                    "git",
                    "clone",
                    "--depth",
                    "1",
                    "https://github.com/langchain-ai/langgraph",
                    str(source),
                ],
                check=True,
            )
    commit = prepare(scratch, source, bare=bare, rev=args.rev)
    print(f"langgraph {commit}")
    env = dict(os.environ)
    paths = [str(args.site.resolve())] if args.site else []
    paths.append(env.get("PYTHONPATH", ""))
    worst = 0
    for suite in SUITES:
        env["PYTHONPATH"] = os.pathsep.join([str(scratch / suite), *paths])
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "tests", *pytest_args],
            cwd=scratch / suite,
            env=env,
            check=False,
        )
        worst = max(worst, done.returncode)
    return worst


if __name__ == "__main__":
    raise SystemExit(main())
