"""The tiny model scripts/gpu-check makes for the device (with torch alone, no transformers) is one
ExLlamaV3's own Config and Model accept, with exactly the weights its modules look for: a mistake
here would otherwise surface only on a GPU, after the kernel build."""

from __future__ import annotations

import exllamav3
from safetensors import safe_open

from tests.test_gpu_check import gpu_check


def leaves(module) -> list:
    children = getattr(module, "modules", None) or []
    return [leaf for child in children for leaf in leaves(child)] if children else [module]


def test_the_tiny_source_model_has_the_weights_the_library_expects(tmp_path):
    source = gpu_check.tiny_source_model(tmp_path)
    config = exllamav3.Config.from_directory(str(source))
    model = exllamav3.Model.from_config(config)
    expected = {f"{leaf.key}.weight" for top in model.modules for leaf in leaves(top)}
    with safe_open(str(source / "model.safetensors"), "pt") as weights:
        assert set(weights.keys()) == expected
    tokenizer = exllamav3.Tokenizer.from_config(config)
    assert tokenizer.single_id("<tool_call>") is not None and 2 in config.eos_token_id_list
    call = tokenizer.encode(gpu_check.FORCED_CALL, encode_special_tokens=True)
    assert tokenizer.decode(call, decode_special_tokens=True)[0] == gpu_check.FORCED_CALL


def test_the_forced_tool_call_regex_is_accepted_by_python_and_llguidance(tokenizer):
    import re

    from exllamav3.generator.filter import LLGuidanceFilter

    pattern = gpu_check.literal_regex(gpu_check.FORCED_CALL)
    assert re.fullmatch(pattern, gpu_check.FORCED_CALL) and "\n" not in pattern
    LLGuidanceFilter(tokenizer, regex=pattern, eos_after_completed=True)
