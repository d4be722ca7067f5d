"""Loading and unloading an EXL3 model with the library's real Config, Model, Cache, Tokenizer and
Generator classes on CPU. What needs a GPU (moving weights onto it, the warm-up passes) is the
one thing stood in for, and only in the tests that need a load to get that far."""

from __future__ import annotations

from pathlib import Path

import exllamav3
import pytest
import torch

from tabby_fixed.config import DraftModelConfig, MemoryConfig, ModelConfig
from tabby_fixed.engine.exllamav3 import ExLlamaV3Engine, build_parts, draft_load_kwargs, generator_kwargs
from tests.engine.conftest import make_model_folder


def lfm2_draft(root: Path) -> DraftModelConfig:
    """A tiny LFM2 (convolution layers: recurrent state) as the draft model."""
    make_model_folder(root / "tiny-lfm2", "Lfm2ForCausalLM", norm_eps=1e-5, layer_types=["conv", "full_attention"])
    return DraftModelConfig(draft_mode="model", draft_model_dir=str(root), draft_model_name="tiny-lfm2",
                            draft_num_tokens=4)


@pytest.fixture
def unpinned(monkeypatch):
    """Drafting generators stage ids in pinned host memory, which needs a CUDA driver: plain memory here."""
    empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *args, pin_memory=False, **kwargs: empty(*args, **kwargs))


@pytest.fixture
def weights_on_gpu(monkeypatch):
    """``Model.load`` and ``warmup`` succeed without a GPU; every load and (real) unload is recorded."""
    record: dict[str, list] = {"load": [], "unload": []}
    unload = exllamav3.Model.unload
    monkeypatch.setattr(exllamav3.Model, "load", lambda self, **kwargs: record["load"].append((self, kwargs)))
    monkeypatch.setattr(exllamav3.Model, "warmup", lambda self, **kwargs: None)

    def recorded_unload(self):
        record["unload"].append(self)
        unload(self)

    monkeypatch.setattr(exllamav3.Model, "unload", recorded_unload)
    return record


def test_a_recurrent_draft_model_gets_a_cache_the_generator_accepts(tmp_path, model_folder, unpinned):
    draft = lfm2_draft(tmp_path)
    settings = ModelConfig(max_seq_len=1024)
    config = exllamav3.Config.from_directory(str(model_folder))
    parts = build_parts(exllamav3, config, model_folder, settings, draft)
    assert parts.draft_model.caps["recurrent_states"]
    generator = exllamav3.Generator(
        model=parts.model, cache=parts.cache, tokenizer=exllamav3.Tokenizer.from_config(config),
        draft_model=parts.draft_model, draft_cache=parts.draft_cache,
        **generator_kwargs(settings, draft, MemoryConfig(sysmem_kv_cache=0), parts.slots, parts.num_draft))
    assert generator.num_draft_tokens == 4 and generator.max_batch_size == parts.slots == 4
    generator.close()


def test_the_draft_model_loads_by_layer_split_under_tensor_parallel():
    settings = ModelConfig(tensor_parallel=True, gpu_split=[20, 20], gpu_split_auto=False)
    on_split = draft_load_kwargs(settings, DraftModelConfig(draft_gpu_split=[4, 0]), 4)
    assert "tensor_p" not in on_split and on_split["use_per_device"] == [4, 0]
    reserved = draft_load_kwargs(ModelConfig(autosplit_reserve=[512]), DraftModelConfig(), 4)
    assert reserved["reserve_per_device"] == [0.5] and "use_per_device" not in reserved
    import inspect

    assert set(on_split) | set(reserved) <= set(inspect.signature(exllamav3.Model.load_gen).parameters)


def test_a_load_that_fails_after_the_weights_are_in_place_unloads_them(tmp_path, model_folder, weights_on_gpu):
    """Here the real Generator refuses to start (drafting needs pinned memory, which needs CUDA):
    a failure after both models are loaded, as a CUDA error or a refused configuration would be."""
    draft = lfm2_draft(tmp_path)
    settings = ModelConfig(max_seq_len=1024, tensor_parallel=True)
    with pytest.raises(RuntimeError, match="pin_memory"):
        ExLlamaV3Engine(model_folder, settings, draft, MemoryConfig(sysmem_kv_cache=0))
    loaded = [model for model, _ in weights_on_gpu["load"]]
    assert len(loaded) == 2 and set(map(id, weights_on_gpu["unload"])) == set(map(id, loaded))
    (_, draft_kwargs), (_, target_kwargs) = weights_on_gpu["load"]
    assert draft_kwargs.get("tensor_p") is None and target_kwargs["tensor_p"] is True


def test_requests_encode_on_a_tokenizer_the_generator_thread_does_not_use(model_folder, weights_on_gpu, monkeypatch):
    """The generator thread encodes too: queueing a job with banned strings encodes them without
    special tokens, which flips a flag on the tokenizer it uses. Here that happens exactly while a
    request's prompt is being encoded; the prompt's special tokens must still be single ids."""
    engine = ExLlamaV3Engine(model_folder, ModelConfig(max_seq_len=1024), DraftModelConfig(draft_mode="disabled"),
                             MemoryConfig(sysmem_kv_cache=0))
    try:
        generator_tokenizer = engine._worker._generator.tokenizer
        inside = []
        tokenizers = {id(t): t for t in vars(engine).values() if isinstance(t, exllamav3.Tokenizer)}
        for tokenizer in tokenizers.values():
            def interleaved(texts, encode_texts=tokenizer._encode_texts):
                if not inside:  # the generator thread, queueing a job with banned strings
                    inside.append(True)
                    generator_tokenizer.encode("banned phrase")
                return encode_texts(texts)

            monkeypatch.setattr(tokenizer, "_encode_texts", interleaved)
        ids = engine.encode("<|im_start|>user\nhi<|im_end|>")
        assert ids[0] == 1 and ids[-1] == 2, "special tokens encoded as text"
    finally:
        import asyncio

        asyncio.run(engine.unload())
