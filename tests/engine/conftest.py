"""The real ``exllamav3`` package on CPU: only its CUDA extension is stubbed (it cannot build here).

Everything else (Config, Tokenizer, Model.from_config, samplers, LLGuidanceFilter, Job) is the
library's own code, run against a small synthetic model folder made by these fixtures.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import types
import unittest.mock
from pathlib import Path

import numpy as np
import pytest


def partial_strings_match(text_utf32: bytes, offsets: bytes, needles_utf32: bytes) -> int:
    """The extension's stop/banned-string matcher, as its source documents it: the index of the
    earliest complete match in the text, -2 when a needle that could still complete starts
    earlier (the job holds its text back), -1 when nothing matches."""
    text = bytes(text_utf32).decode("utf-32-le")
    bounds = np.frombuffer(bytes(offsets), dtype=np.int32)
    packed = bytes(needles_utf32)
    needles = [packed[a:b].decode("utf-32-le") for a, b in itertools.pairwise(bounds) if b > a]
    nowhere = len(text) + 1
    full = min((text.find(needle) for needle in needles if needle in text), default=nowhere)
    partial = min((start for start in range(len(text)) for needle in needles
                   if len(text) - start < len(needle) and needle.startswith(text[start:])), default=nowhere)
    if partial < full:
        return -2
    return full if full < nowhere else -1


# The extension is CUDA code: stubbed, with its one host-side string matcher written out above so
# jobs with stop strings run the library's real emission code. Without the fused sampler (one CUDA
# kernel) the library samples argmax and token bans in plain torch.
_ext = unittest.mock.MagicMock()
_ext.partial_strings_match.side_effect = partial_strings_match
sys.modules.setdefault("exllamav3.ext", types.SimpleNamespace(exllamav3_ext=_ext))
os.environ.setdefault("EXL3_FUSED_SAMPLER", "0")
import exllamav3  # noqa: E402  (after the stub: the package imports its extension on import)

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool_call>", "</tool_call>", "<think>", "</think>"]
TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def make_model_folder(folder: Path, architecture: str = "Qwen3ForCausalLM", **config: object) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(["def write_file(path, content): return path + content\n"] * 20, trainer)
    tokenizer.save(str(folder / "tokenizer.json"))
    saved = json.loads((folder / "tokenizer.json").read_text())
    for added in saved["added_tokens"]:  # as in Qwen's tokenizer.json: tool and think markers are text
        added["special"] = added["content"] in SPECIAL[:3]
    (folder / "tokenizer.json").write_text(json.dumps(saved))
    (folder / "config.json").write_text(json.dumps({
        "architectures": [architecture], "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 2, "vocab_size": 320,
        "max_position_embeddings": 3000, "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "eos_token_id": 2,
        "tie_word_embeddings": False, "torch_dtype": "float16", **config}))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 0], "temperature": 0.7}))
    (folder / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<|im_end|>", "add_bos_token": False,
                                                              "chat_template": TEMPLATE}))
    return folder


@pytest.fixture(scope="session")
def model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_model_folder(tmp_path_factory.mktemp("exl3") / "tiny-qwen3")


@pytest.fixture(scope="session")
def exl_config(model_folder: Path):
    return exllamav3.Config.from_directory(str(model_folder))


@pytest.fixture(scope="session")
def tokenizer(exl_config):
    return exllamav3.Tokenizer.from_config(exl_config)
