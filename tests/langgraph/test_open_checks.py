"""A LangGraph store is refused at open, with a typed error naming the setting, for an
``index`` or ``ttl`` it could not use (before, the first put raised a builtin
``AttributeError`` or ``TypeError``, and a provider string LangGraph cannot load a builtin
``ValueError``); the ``langgraph`` commands answer a PostgreSQL store that refuses them and a
factory that raises with typed errors, never the driver's class or the URL's password."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.ledger.errors import InvalidArgumentError, InvalidArgumentTypeError
from memory_ledger.replay.cli.app import app
from memory_ledger.replay.langgraph_store import LedgerStore

TENANT = Namespace("acme", "alice", "agent")


def embed(texts: Sequence[str]) -> list[list[float]]:
    return [[1.0, float(len(t)), 0.0, 0.5] for t in texts]


BAD: list[tuple[dict[str, Any], str, type[Exception]]] = [
    ({"ttl": "x"}, "ttl", InvalidArgumentTypeError),
    ({"ttl": {"default_ttl": "5"}}, "ttl", InvalidArgumentTypeError),
    ({"ttl": {"default_ttl": -1}}, "ttl", InvalidArgumentError),
    ({"ttl": {"sweep_interval_minutes": 0}}, "ttl", InvalidArgumentError),
    ({"ttl": {"refresh_on_read": "no"}}, "ttl", InvalidArgumentTypeError),
    ({"index": "text"}, "index", InvalidArgumentTypeError),
    ({"index": {"fields": [5]}}, "index", InvalidArgumentTypeError),
    ({"index": {"fields": "text"}}, "index", InvalidArgumentTypeError),
    ({"index": {"fields": [""]}}, "index", InvalidArgumentError),
    ({"index": {"dims": 0, "embed": embed}}, "index", InvalidArgumentError),
    ({"index": {"dims": 4, "embed": 5}}, "index", InvalidArgumentTypeError),
    ({"index": {"dims": 4, "embed": "nosuchprovider:model"}}, "index", InvalidArgumentError),
]


@pytest.mark.parametrize(("options", "parameter", "kind"), BAD)
def test_a_setting_the_store_cannot_use_is_refused_at_open(
    tmp_path: Path, options: dict[str, Any], parameter: str, kind: type[Exception]
) -> None:
    folder = tmp_path / "store"
    with pytest.raises(kind) as raised:
        LedgerStore.open(folder, TENANT, **options)
    assert isinstance(raised.value, InvalidArgumentError)
    assert raised.value.parameter == parameter
    assert raised.value.reason_code == f"invalid_{parameter}_config"
    assert not folder.exists()  # refused before the folder was created


@pytest.mark.parametrize(("options", "parameter", "kind"), BAD[:9])
def test_the_constructor_checks_them_too(
    engine: MemoryEngine, options: dict[str, Any], parameter: str, kind: type[Exception]
) -> None:
    with pytest.raises(kind) as raised:
        LedgerStore(engine, Namespace("open", "checks", uuid.uuid4().hex), **options)
    assert getattr(raised.value, "parameter", None) == parameter


def test_usable_settings_open_and_serve(tmp_path: Path) -> None:
    with LedgerStore.open(
        tmp_path / "store",
        TENANT,
        index={"fields": ["text", "tags[*]"], "dims": 4, "embed": embed},
        ttl={"default_ttl": 5, "refresh_on_read": False, "sweep_interval_minutes": 1},
    ) as store:
        store.put(("a",), "k", {"text": "tea", "tags": ["x"]})
        assert [i.key for i in store.search(("a",), query="tea")] == ["k"]


NS = ["--tenant", "acme", "--principal", "alice", "--scope-id", "agent"]


def test_a_factory_that_raises_is_a_typed_error(tmp_path: Path) -> None:
    args = ["langgraph", "import", "os:system", *NS, "--store", str(tmp_path / "s")]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 2
    assert done.stderr.startswith("error: InvalidArgumentError:"), done.stderr
    assert "Traceback" not in done.output


def test_a_postgresql_store_that_refuses_is_a_typed_error_without_the_password(
    tmp_path: Path,
) -> None:
    """Whether the server is up (the role does not exist) or down (the connection fails),
    the driver's error is answered typed, and the password never shown."""
    from tests.pg import BASE_URL

    host = BASE_URL.split("@", 1)[-1].split("/", 1)[0]
    folder = str(tmp_path / "s")
    for password in ("Pw-4f9c2e7a1b", "Pw#4f9c/2e7a?1b"):
        url = f"postgresql://nosuchrole_{uuid.uuid4().hex[:8]}:{password}@{host}/test"
        done = CliRunner().invoke(app, ["langgraph", "export", url, *NS, "--store", folder])
        assert done.exit_code == 2
        assert done.stderr.startswith("error: StoreUnavailableError:"), done.stderr
        assert "4f9c" not in done.output and "2e7a" not in done.output
        assert "1b@" not in done.output  # the tail a driver quotes when '?' cut the URL
        assert "psycopg" not in done.output
