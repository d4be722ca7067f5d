"""Our ExLlamaV3 glue against the real library: every argument we pass exists, and the objects we
build (samplers, filters, jobs) are accepted by the library's own constructors."""

from __future__ import annotations

import inspect
import logging

import exllamav3
import pytest
from exllamav3.generator.sampler import CustomSampler

from tabby_fixed.config import DraftModelConfig, MemoryConfig, ModelConfig
from tabby_fixed.engine.base import Constraint, EngineUnavailable, Finish, Step
from tabby_fixed.engine.exllamav3 import (
    cache_layer,
    check_draft_mode,
    context_sizes,
    generator_kwargs,
    job_kwargs,
    load_kwargs,
    nccl_available,
    output_chunk,
    output_filters,
    result_to_steps,
    sampler_steps,
    stop_conditions,
    wants_bos,
    with_bos,
)
from tabby_fixed.errors import ApiError
from tabby_fixed.sampling import NEUTRAL


def parameters(function) -> set[str]:
    return set(inspect.signature(function).parameters) - {"self", "kwargs"}


@pytest.mark.parametrize(("max_seq_len", "cache_size", "expected"), [
    (None, None, (3000, 3072)), (-1, None, (3000, 3072)), (1000, None, (1000, 1024)), (8192, 4096, (4096, 4096)),
    (2048, 8192, (2048, 8192)),
])
def test_context_sizes(max_seq_len, cache_size, expected):
    settings = ModelConfig(max_seq_len=max_seq_len, cache_size=cache_size)
    assert context_sizes(settings, 3000) == expected


@pytest.mark.parametrize(("mode", "expected"), [
    ("FP16", (None, {})), ("Q4", ("CacheLayer_quant", {"k_bits": 4, "v_bits": 4})),
    ("8,6", ("CacheLayer_quant", {"k_bits": 8, "v_bits": 6})),
])
def test_cache_layers_exist_with_those_arguments(mode, expected):
    layer, bits = cache_layer(mode)
    assert (layer, bits) == expected
    if layer:
        assert set(bits) <= parameters(getattr(exllamav3, layer).__init__)


def test_every_keyword_we_pass_exists_in_the_real_signatures():
    settings, draft, memory = ModelConfig(tensor_parallel=True, gpu_split=[20, 20], gpu_split_auto=False), \
        DraftModelConfig(draft_mode="ngram", dynamic_draft=True), MemoryConfig()
    assert set(load_kwargs(settings, 8, print)) <= parameters(exllamav3.Model.load_gen)
    assert set(load_kwargs(ModelConfig(), 8, None)) <= parameters(exllamav3.Model.load_gen)
    ours = set(generator_kwargs(settings, draft, memory, 8, 4)) | {"model", "cache", "tokenizer", "draft_model",
                                                                    "draft_cache"}
    assert ours <= parameters(exllamav3.Generator.__init__)
    job = set(job_kwargs(NEUTRAL, 10, [2], 2048)) | {"input_ids", "sampler", "filters"}
    assert job <= parameters(exllamav3.Job.__init__)
    assert {"max_num_tokens", "layer_type", "max_batch_size", "max_history"} <= parameters(exllamav3.Cache.__init__)
    assert {"component"} <= parameters(exllamav3.Model.from_config)
    assert {"cache", "max_chunk_size"} <= parameters(exllamav3.Model.warmup)


def test_load_arguments_by_split_mode(caplog: pytest.LogCaptureFixture) -> None:
    auto = load_kwargs(ModelConfig(autosplit_reserve=[512, 1024]), 4, None)
    assert auto["reserve_per_device"] == [0.5, 1.0] and "use_per_device" not in auto
    manual = load_kwargs(ModelConfig(gpu_split=[20, 24], gpu_split_auto=False), 4, None)
    assert manual["use_per_device"] == [20, 24] and "reserve_per_device" not in manual
    # As upstream: a non-empty gpu_split wins over gpu_split_auto, and applies under tensor parallel.
    split_wins = load_kwargs(ModelConfig(gpu_split=[20, 24], gpu_split_auto=True), 4, None)
    assert split_wins["use_per_device"] == [20, 24] and "reserve_per_device" not in split_wins
    parallel_split = load_kwargs(ModelConfig(tensor_parallel=True, gpu_split=[10, 10]), 4, None)
    assert parallel_split["tensor_p"] is True and parallel_split["use_per_device"] == [10, 10]
    parallel = load_kwargs(ModelConfig(tensor_parallel=True), 4, None)
    assert parallel["tp_backend"] == "native" and "use_per_device" not in parallel
    assert "reserve_per_device" not in parallel


def test_nccl_falls_back_to_native_where_missing(caplog: pytest.LogCaptureFixture) -> None:
    assert not nccl_available()  # this CPU-only torch has no NCCL
    with caplog.at_level(logging.WARNING):
        parallel = load_kwargs(ModelConfig(tensor_parallel=True, tensor_parallel_backend="nccl"), 4, None)
    assert parallel["tensor_p"] is True and parallel["tp_backend"] == "native"
    assert "NCCL is not available" in caplog.text


def test_output_chunking_caps_each_jobs_pages() -> None:
    assert output_chunk(ModelConfig(chunk_size=1000)) == 1024
    assert output_chunk(ModelConfig(chunk_size=1000, output_chunking=False)) is None
    assert job_kwargs(NEUTRAL, 10, [2], None)["max_rq_tokens"] is None


def test_draft_modes(exl_config, model_folder):
    assert check_draft_mode(exl_config, DraftModelConfig(draft_mode="model"), model_folder) == "disabled"
    assert check_draft_mode(exl_config, DraftModelConfig(draft_mode="ngram"), model_folder) == "ngram"
    with pytest.raises(EngineUnavailable, match=r"no MTP tensors.*Qwen3\.5"):
        check_draft_mode(exl_config, DraftModelConfig(draft_mode="mtp"), model_folder)
    generator = generator_kwargs(ModelConfig(), DraftModelConfig(draft_mode="ngram", ngram_match_min=3),
                                 MemoryConfig(), 8, 4)
    assert generator["ngram_match_min"] == 3 and generator["num_draft_tokens"] == 4


@pytest.mark.parametrize("changes", [
    {}, {"temperature": 0.0}, {"top_k": 1}, {"temperature": 0.7, "top_k": 20, "top_p": 0.8, "min_p": 0.05},
    {"temperature_last": True, "temperature": 1.5, "min_p": 0.1}, {"repetition_penalty": 1.05, "penalty_range": 512},
    {"presence_penalty": 1.5, "frequency_penalty": -0.5}, {"logit_bias": {"5": -100.0}, "banned_tokens": [7, 8]},
    {"dry_multiplier": 0.8, "dry_base": 1.75, "dry_allowed_length": 2}, {"xtc_probability": 0.5},
    {"adaptive_target": 0.5, "adaptive_decay": 0.9},
])
def test_sampler_stacks_are_accepted_by_the_library(tokenizer, changes):
    steps = sampler_steps({**NEUTRAL, **changes}, tokenizer)
    CustomSampler(steps)
    names = [type(step).__name__ for step in steps]
    greedy = changes.get("temperature") == 0.0 or changes.get("top_k") == 1
    assert names[-1] == ("SS_Argmax" if greedy else "SS_AdaptiveP" if "adaptive_target" in changes else "SS_Sample")
    penalties = {"SS_LogitBias", "SS_RepP", "SS_PresFreqP", "SS_DRY", "SS_BanTokens"}
    first_other = next((i for i, n in enumerate(names) if n not in penalties), len(names))
    assert not penalties & set(names[first_other:]), "penalties and bans come first"


@pytest.mark.parametrize("constraint", [
    Constraint("json"), Constraint("json_schema", {"type": "object", "properties": {"a": {"type": "integer"}}}),
    Constraint("regex", "[a-z]+"), Constraint("grammar", 'start: "yes" | "no"'),
    Constraint("grammar", 'root ::= "yes" | "no"'),
])
def test_constraints_become_llguidance_filters(tokenizer, constraint):
    (output_filter,) = output_filters(constraint, tokenizer)
    assert type(output_filter).__name__ == "LLGuidanceFilter"


def test_a_bad_grammar_is_a_400_naming_its_field(tokenizer):
    with pytest.raises(ApiError) as error:
        output_filters(Constraint("grammar", "root ::= ("), tokenizer)
    assert error.value.status == 400 and error.value.param == "grammar_string"


def test_a_grammar_naming_a_token_the_model_lacks_is_refused_by_the_library(tokenizer):
    with pytest.raises(ValueError):
        output_filters(Constraint("grammar", "start: <|no_such_token|>"), tokenizer)


def test_the_tool_call_grammar_steers_the_library_filter(tokenizer, model_folder):
    """tool_choice required with parallel calls off, through the library's own LLGuidanceFilter:
    the call's tokens are accepted, then the filter is complete (the job ends), and a reply
    in prose is masked out from the first token."""
    from tabby_fixed.engine.base import read_added_tokens
    from tabby_fixed.sampling.constraints import compiled
    from tabby_fixed.sampling.tool_grammar import tool_call_grammar
    from tabby_fixed.toolcalls.conformance import TOOLS
    from tabby_fixed.toolcalls.formats import get_format

    added = read_added_tokens(model_folder)
    lark = tool_call_grammar(get_format("qwen3_coder").syntax, TOOLS, "required", False, added)
    (output_filter,) = output_filters(compiled(Constraint("tools", lark), None, added), tokenizer)
    call = "<tool_call>\n<function=Bash>\n<parameter=command>\nls\n</parameter>\n</function>\n</tool_call>"
    ids = tokenizer.encode(call, encode_special_tokens=True)[0].tolist()
    mask = output_filter.get_next_logit_mask()[0]
    allowed = [t for t in range(tokenizer.actual_vocab_size) if int(mask[t // 32]) >> (t % 32) & 1]
    assert allowed == [ids[0]], "only the call's opening tag may start the answer"
    for token in ids:
        output_filter.accept_token(token)
    assert output_filter.is_completed()


def test_jobs_build_from_our_arguments(tokenizer, exl_config):
    ids = tokenizer.encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n", encode_special_tokens=True)
    values = {**NEUTRAL, "stop": ["</tool_call>"], "banned_strings": ["bad"], "seed": 1}
    stops = stop_conditions(exl_config.eos_token_id_list, values)
    assert stops[:2] == [2, 0] and stops[-1] == "</tool_call>"
    exllamav3.Job(input_ids=ids, sampler=CustomSampler(sampler_steps(values, tokenizer)),
                  filters=output_filters(Constraint("json"), tokenizer), **job_kwargs(values, 100, stops, 2048))
    assert stop_conditions([2], {**values, "ban_eos_token": True}) == ["</tool_call>"]


def test_eos_list_takes_generation_config_into_account(exl_config, tokenizer):
    assert set(exl_config.eos_token_id_list) >= {2, 0}
    ids = tokenizer.encode("<tool_call>x</tool_call>", encode_special_tokens=True)
    assert tokenizer.decode(ids[0], decode_special_tokens=True) == "<tool_call>x</tool_call>"


class _Tokens:
    def __init__(self, count: int) -> None:
        self.shape = (1, count)


@pytest.mark.parametrize(("result", "expected"), [
    ({"stage": "started", "eos": False}, []),
    ({"stage": "streaming", "eos": False, "text": "hi", "token_ids": _Tokens(1)}, [Step("hi", 1)]),
    ({"stage": "streaming", "eos": True, "eos_reason": "max_new_tokens", "new_tokens": 5, "cached_tokens": 256,
      "time_prefill": 0.5, "time_generate": 1.0, "accepted_draft_tokens": 3, "rejected_draft_tokens": 1},
     [Finish("length", 10, 5, 256, None, 0.5, 1.0, 3, 1)]),
    ({"stage": "streaming", "eos": True, "eos_reason": "stop_string", "eos_triggering_string": "END",
      "held": {"text": "END"}, "new_tokens": 2}, [Finish("stop", 10, 2, stop_str="END")]),
    ({"stage": "streaming", "eos": True, "eos_reason": "max_new_tokens", "new_tokens": 7}, [Finish("length", 10, 7)]),
])
def test_results_become_steps(result, expected):
    """Counters and reasons; what a stop token's result holds is checked on the library's own
    results in test_worker.py."""
    assert result_to_steps(result, 10) == expected


def test_a_job_error_result_raises():
    with pytest.raises(RuntimeError, match="boom"):
        result_to_steps({"stage": "error", "error": ValueError("boom")}, 10)


def test_bos_once(tmp_path, model_folder):
    import torch

    ids = torch.tensor([[5, 6]])
    assert with_bos(ids, 1, True).tolist() == [[1, 5, 6]]
    assert with_bos(torch.tensor([[1, 5]]), 1, True).tolist() == [[1, 5]], "the template already wrote it"
    assert with_bos(ids, None, True).tolist() == [[5, 6]] and with_bos(ids, 1, False).tolist() == [[5, 6]]
    assert wants_bos(model_folder) is False and wants_bos(tmp_path) is True


def test_token_logprobs_from_probabilities():
    import math

    import torch

    from tabby_fixed.engine.exllamav3 import token_logprobs

    result = {"token_ids": torch.tensor([[1, 2]]), "token_probs": torch.tensor([[0.5, 0.25]]),
              "top_k_tokens": torch.tensor([[[1, 3], [2, 1]]]),
              "top_k_probs": torch.tensor([[[0.5, 0.3], [0.25, 0.2]]])}
    first, second = token_logprobs(result, ["a", "b", "c", "d"])
    assert first.token == "b" and math.isclose(first.logprob, math.log(0.5))
    assert [t for t, _ in second.top] == ["c", "b"] and math.isclose(second.top[1][1], math.log(0.2), rel_tol=1e-6)
    assert token_logprobs({"token_ids": torch.tensor([[1]])}, ["a"]) == ()


def test_dry_sequence_breakers_become_the_token_ids_of_pieces_containing_them(tokenizer):
    steps = sampler_steps({**NEUTRAL, "dry_multiplier": 0.8, "dry_sequence_breakers": ["\n", "("]}, tokenizer)
    CustomSampler(steps)
    (dry,) = [step for step in steps if type(step).__name__ == "SS_DRY"]
    pieces = tokenizer.get_id_to_piece_list(True)
    expected = {token for token, piece in enumerate(pieces) if "\n" in piece or "(" in piece}
    assert expected and set(dry.breakers.token_ids) == expected


def test_dry_without_breakers_keeps_the_library_defaults(tokenizer):
    (dry,) = sampler_steps({**NEUTRAL, "dry_multiplier": 0.8}, tokenizer)[:1]
    assert type(dry).__name__ == "SS_DRY" and dry.breakers is not None and dry.breakers.token_ids


@pytest.mark.parametrize("window", [0, 1, 2, 3, 800])
def test_every_loop_window_builds_a_job(tokenizer, window):
    ids = tokenizer.encode("hi", encode_special_tokens=True)
    values = {**NEUTRAL, "loop_detect_window": window}
    job = exllamav3.Job(input_ids=ids, sampler=CustomSampler(sampler_steps(values, tokenizer)),
                        **job_kwargs(values, 10, [2], 2048))
    assert (job.loop_detector is not None) == (window >= 3)


def test_ban_eos_token_never_samples_an_end_of_sequence_token(tokenizer):
    import torch

    logits = torch.zeros((1, 1, 320))
    logits[..., 2], logits[..., 0], logits[..., 7] = 9.0, 8.0, 1.0
    greedy = {**NEUTRAL, "temperature": 0.0}
    assert CustomSampler(sampler_steps(greedy, tokenizer, [2, 0])).forward(logits.clone()).item() == 2
    banned = sampler_steps({**greedy, "ban_eos_token": True}, tokenizer, [2, 0])
    assert CustomSampler(banned).forward(logits.clone()).item() == 7
