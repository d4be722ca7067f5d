"""The ExLlamaV3 engine's vision path against the real library (only its CUDA extension stubbed):
images become embeddings on the generator thread, aliased by their prompt markers, and the job's
prompt holds each embedding's own token ids where its marker was."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import io
import logging
import pkgutil
import threading
import types
from pathlib import Path

import exllamav3
import exllamav3.architecture
import pytest
import torch
from exllamav3.tokenizer import MMEmbedding
from PIL import Image

from tabby_fixed.config import ModelConfig
from tabby_fixed.engine.base import Finish, GenerationParams, GenerationRequest, ImageInput
from tabby_fixed.engine.exllamav3 import vision_load_kwargs, vision_tower
from tabby_fixed.engine.worker import GeneratorFailed
from tabby_fixed.errors import ApiError
from tabby_fixed.sampling import NEUTRAL
from tests.engine.conftest import make_model_folder
from tests.engine.scripted_generator import ScriptedGenerator
from tests.engine.test_worker import engine_on, script

START, END, ROWS = 5, 6, 3  # the stand-in tower's vision start/end ids and rows per image


def parameters(function) -> set[str]:
    return set(inspect.signature(function).parameters)


class VisionTower:
    """A vision tower's ``get_image_embeddings`` as Qwen3-VL's builds its result: a real
    ``MMEmbedding`` of ``ROWS`` rows between the start and end ids, aliased by ``text_alias``;
    the forward pass (CUDA) is replaced by zeros."""

    def __init__(self, hidden: int) -> None:
        self.hidden = hidden
        self.calls: list[tuple[tuple[int, int], str, threading.Thread]] = []

    def get_image_embeddings(self, tokenizer, image, text_alias=None):
        self.calls.append((image.size, text_alias, threading.current_thread()))
        token_string = torch.tensor([[START] + [-1] * ROWS + [END]], dtype=torch.long)
        return MMEmbedding(embeddings=torch.zeros(ROWS, self.hidden), token_string=token_string,
                           text_alias=text_alias, grid_thw=(1, 2, 6), mrope_merge_size=2)


def png(size: tuple[int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, "red").save(out, format="PNG")
    return out.getvalue()


def test_the_library_takes_what_we_pass():
    assert {"embeddings"} <= parameters(exllamav3.Job.__init__)
    assert {"embeddings"} <= parameters(exllamav3.Tokenizer.encode)
    assert set(vision_load_kwargs(ModelConfig(gpu_split_auto=False, gpu_split=[10]))) <= parameters(
        exllamav3.Model.load_gen)
    towers = []
    for info in pkgutil.iter_modules(exllamav3.architecture.__path__):
        module = importlib.import_module(f"exllamav3.architecture.{info.name}")
        towers += [cls for _, cls in inspect.getmembers(module, inspect.isclass)
                   if cls.__module__ == module.__name__ and hasattr(cls, "get_image_embeddings")]
    assert len(towers) >= 3
    for tower in towers:
        assert {"tokenizer", "image", "text_alias"} <= parameters(tower.get_image_embeddings), tower


def test_the_tower_loads_only_when_asked_and_present(exl_config, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="tabby_fixed.engine.exllamav3")
    assert vision_tower(exllamav3, exl_config, ModelConfig(vision=True), "tiny") is None
    assert "model.vision is on, but tiny has no vision tower" in caplog.text
    built = []
    library = types.SimpleNamespace(Model=types.SimpleNamespace(
        from_config=lambda config, component: built.append(component) or "tower"))
    with_tower = types.SimpleNamespace(model_classes={"text": object, "vision": object})
    assert vision_tower(library, with_tower, ModelConfig(vision=True), "vl") == "tower" and built == ["vision"]
    assert vision_tower(library, with_tower, ModelConfig(vision=False), "vl") is None
    assert "vl has a vision tower; model.vision is off" in caplog.text


@pytest.fixture(scope="module")
def vl_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model with the text side of a Qwen3-VL: multimodal rotary positions (mrope_section)."""
    return make_model_folder(tmp_path_factory.mktemp("exl3-vl") / "tiny-vl", rope_scaling={
        "rope_type": "default", "mrope_section": [2, 3, 3], "mrope_interleaved": True})


@pytest.fixture
def seeing(vl_folder: Path):
    tokenizer = exllamav3.Tokenizer.from_config(exllamav3.Config.from_directory(str(vl_folder)))
    generator = ScriptedGenerator(vl_folder, script(tokenizer, "red"))
    jobs = []
    enqueue = generator.enqueue
    generator.enqueue = lambda job: jobs.append(job) or enqueue(job)
    engine = engine_on(lambda: generator, tokenizer)
    engine._vision = VisionTower(tokenizer.config.hidden_size)
    yield engine, generator, jobs
    engine._worker.stop()


def test_images_become_embeddings_where_their_markers_are(seeing):
    engine, generator, jobs = seeing
    tokenizer = engine._tokenizer
    marker = "<$IMG_abc123_0$>"
    before, after = "<|im_start|>user\nwhat colour is ", " here<|im_end|>\n"
    request = GenerationRequest(before + marker + after, GenerationParams(max_tokens=20, sampler=NEUTRAL),
                                images=(ImageInput(marker, png((7, 5)), "image/png"),))

    async def run() -> list:
        return [item async for item in await engine.generate(request)]

    items = asyncio.run(run())
    assert "".join(getattr(item, "text", "") for item in items) == "red"
    size, alias, thread = engine._vision.calls[0]
    assert (size, alias) == ((7, 5), marker)
    assert thread is generator.thread  # the tower ran between the generator's iterations
    (embedding,) = jobs[0].embeddings
    ids = jobs[0].sequences[0].input_ids.torch()[0].tolist()
    text_ids = [tokenizer.encode(part, encode_special_tokens=True)[0].tolist() for part in (before, after)]
    assert ids == text_ids[0] + embedding.token_list + text_ids[1]
    assert embedding.token_list == [START, *range(embedding.first_index, embedding.first_index + ROWS), END]
    finish = items[-1]
    assert isinstance(finish, Finish) and finish.prompt_tokens == len(ids)


def test_bytes_that_do_not_decode_are_a_400(seeing):
    engine, _, jobs = seeing
    broken = ImageInput("<$IMG_x_0$>", b"\x89PNG\r\n\x1a\nnot really", "image/png")
    request = GenerationRequest("look <$IMG_x_0$>", GenerationParams(sampler=NEUTRAL), images=(broken,))
    with pytest.raises(ApiError) as refused:
        asyncio.run(engine.generate(request))
    assert refused.value.status == 400 and jobs == []


def test_a_call_after_unload_fails_instead_of_waiting(seeing):
    engine, _, _ = seeing
    assert asyncio.run(engine._worker.call(lambda: threading.current_thread().name)) == "exllamav3-generator"
    with pytest.raises(ZeroDivisionError):
        asyncio.run(engine._worker.call(lambda: 1 / 0))
    engine._worker.stop()
    with pytest.raises(GeneratorFailed):
        asyncio.run(engine._worker.call(lambda: "never"))
