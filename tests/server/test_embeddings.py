"""Embeddings on a tiny BERT built on the spot: the openai SDK and raw httpx against real uvicorn,
and the model itself for the invariants (unit length, batching changes nothing)."""

from __future__ import annotations

import base64
import math
import struct
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tabby_fixed.embeddings import BATCH_SIZE, EmbeddingModel
from tests.embedding_model import DIMENSIONS, MAX_TOKENS, WORDS, build_embedding_model
from tests.live_server import LiveServer
from tests.server.conftest import ADMIN_KEY, API_KEY, make_models, serve

ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}
API = {"authorization": f"Bearer {API_KEY}"}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = make_models(tmp_path_factory.mktemp("embeddings")).parent
    build_embedding_model(root / "embedders" / "tiny-embed")
    build_embedding_model(root / "embedders" / "tiny-cls", pooling="cls_token")
    (root / "embedders" / "not-a-model").mkdir()
    return root


@pytest.fixture(scope="module")
def embedder(root: Path) -> Iterator[LiveServer]:
    yield from serve(root, "tester", "--embedding-model-dir", str(root / "embedders"),
                     "--embedding-model-name", "tiny-embed")


@pytest.fixture(scope="module")
def model(root: Path) -> EmbeddingModel:
    return EmbeddingModel(root / "embedders" / "tiny-embed")


def post(server: LiveServer, body: dict, headers: dict = API) -> httpx.Response:
    return httpx.post(server.v1 + "/embeddings", headers=headers, json=body, timeout=60)


def test_the_openai_sdk_gets_unit_vectors(embedder: LiveServer):
    with openai.OpenAI(base_url=embedder.v1, api_key=API_KEY, max_retries=0) as client:
        result = client.embeddings.create(model="text-embedding-3-small", input=["the cat sat", "a dog ran"])
    assert result.model == "tiny-embed" and [item.index for item in result.data] == [0, 1]
    for item in result.data:
        assert len(item.embedding) == DIMENSIONS
        assert math.isclose(math.fsum(x * x for x in item.embedding), 1.0, rel_tol=1e-5)
    assert result.data[0].embedding != result.data[1].embedding
    assert result.usage.prompt_tokens == result.usage.total_tokens == 10  # [CLS] w w w [SEP] twice


def test_base64_is_the_float32_bytes_of_the_float_answer(embedder: LiveServer):
    floats = post(embedder, {"input": "hello world", "encoding_format": "float"}).json()["data"][0]["embedding"]
    encoded = post(embedder, {"input": "hello world", "encoding_format": "base64"}).json()["data"][0]["embedding"]
    decoded = struct.unpack(f"<{DIMENSIONS}f", base64.b64decode(encoded))
    assert decoded == pytest.approx(floats, abs=1e-7)


def test_one_string_and_many_batches(embedder: LiveServer):
    single = post(embedder, {"input": "vector search"}).json()
    assert len(single["data"]) == 1 and single["object"] == "list"
    texts = [f"{WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]}" for i in range(BATCH_SIZE + 9)]
    many = post(embedder, {"input": texts}).json()["data"]
    assert [item["index"] for item in many] == list(range(len(texts)))
    alone = post(embedder, {"input": texts[-1]}).json()["data"][0]["embedding"]
    assert many[-1]["embedding"] == pytest.approx(alone, abs=1e-5)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join), min_size=1, max_size=6))
def test_batching_and_padding_change_no_vector(model: EmbeddingModel, texts: list[str]):
    together = model.embed(texts)
    for text, vector in zip(texts, together.vectors, strict=True):
        assert vector == pytest.approx(model.embed([text]).vectors[0], abs=1e-5)
        assert math.isclose(math.fsum(x * x for x in vector), 1.0, rel_tol=1e-5)
    assert together.tokens == sum(len(text.split()) + 2 for text in texts)


def test_cls_pooling_is_read_from_the_folder(root: Path, model: EmbeddingModel):
    cls = EmbeddingModel(root / "embedders" / "tiny-cls")
    assert (cls.pooling, model.pooling) == ("cls", "mean")
    inputs = cls.tokenizer(["the big red house"], return_tensors="pt")
    with torch.inference_mode():
        first = cls.model(**inputs).last_hidden_state[0, 0]
    expected = (first / first.norm()).tolist()
    assert cls.embed(["the big red house"]).vectors[0] == pytest.approx(expected, abs=1e-5)
    assert model.embed(["the big red house"]).vectors[0] != pytest.approx(expected, abs=1e-3)


def test_bad_input_is_a_clear_400(embedder: LiveServer):
    cases = {"empty list": {"input": []}, "empty string": {"input": ["fine", ""]},
             "token ids": {"input": [1, 2, 3]}, "token id lists": {"input": [[1, 2]]},
             "format": {"input": "x", "encoding_format": "int8"}, "missing": {}}
    for name, body in cases.items():
        response = post(embedder, body)
        assert response.status_code == 400, name
        assert response.json()["error"]["param"].startswith(("input", "encoding_format")), name
    too_long = post(embedder, {"input": ["short", "the " * MAX_TOKENS]})
    assert too_long.status_code == 400 and too_long.json()["error"]["code"] == "context_length_exceeded"
    assert "input[1]" in too_long.json()["error"]["message"]
    assert "check_embedding_ctx_length" in post(embedder, {"input": [1]}).json()["error"]["message"]


def test_without_an_embedding_model_the_answer_is_503(server: LiveServer):
    response = httpx.post(server.v1 + "/embeddings", headers=API, json={"input": "x"})
    assert response.status_code == 503 and "No embedding models" in response.json()["error"]["message"]
    assert httpx.get(server.v1 + "/model/embedding", headers=API).status_code == 503


def test_list_load_and_unload(embedder: LiveServer):
    def get(path: str, headers: dict = API) -> httpx.Response:
        return httpx.get(embedder.v1 + path, headers=headers)

    assert [card["id"] for card in get("/model/embedding/list", ADMIN).json()["data"]] == [
        "not-a-model", "tiny-cls", "tiny-embed"]
    assert [card["id"] for card in get("/model/embedding/list").json()["data"]] == ["tiny-embed"]
    card = get("/model/embedding").json()
    assert card["id"] == "tiny-embed" and card["parameters"]["dimensions"] == DIMENSIONS
    assert httpx.post(embedder.v1 + "/model/embedding/load", headers=API,
                      json={"embedding_model_name": "tiny-cls"}).status_code == 401
    loaded = httpx.post(embedder.v1 + "/model/embedding/load", headers=ADMIN, timeout=60,
                        json={"embedding_model_name": "tiny-cls", "embeddings_device": "cpu"})
    assert loaded.json() == {"model_type": "embedding_model", "module": 1, "modules": 1, "status": "finished"}
    assert post(embedder, {"input": "x"}).json()["model"] == "tiny-cls"
    missing = httpx.post(embedder.v1 + "/model/embedding/load", headers=ADMIN, json={"embedding_model_name": "nope"})
    assert missing.status_code == 404
    broken = httpx.post(embedder.v1 + "/model/embedding/load", headers=ADMIN,
                        json={"embedding_model_name": "not-a-model"})
    assert broken.status_code == 400 and broken.json()["error"]["code"] == "model_load_failed"
    assert post(embedder, {"input": "x"}).json()["model"] == "tiny-cls"  # a failed load keeps the one in use
    assert httpx.post(embedder.v1 + "/model/embedding/load", headers=ADMIN, json={}).status_code == 400
    if not torch.cuda.is_available():
        no_gpu = httpx.post(embedder.v1 + "/model/embedding/load", headers=ADMIN,
                            json={"embedding_model_name": "tiny-embed", "embeddings_device": "cuda"})
        assert no_gpu.status_code == 400 and "no CUDA device" in no_gpu.json()["error"]["message"]
    unloaded = httpx.post(embedder.v1 + "/model/embedding/unload", headers=ADMIN)
    assert unloaded.status_code == 200 and unloaded.json() is None
    assert post(embedder, {"input": "x"}).status_code == 503
    assert httpx.post(embedder.v1 + "/model/embedding/unload", headers=ADMIN).status_code == 503
    httpx.post(embedder.v1 + "/model/embedding/load", headers=ADMIN, timeout=60,
               json={"embedding_model_name": "tiny-embed"})
    assert post(embedder, {"input": "x"}).json()["model"] == "tiny-embed"
