"""The ExLlamaV3 engine: EXL3 models on NVIDIA GPUs, with MTP, draft-model and n-gram drafting.

``exllamav3`` (and torch) are imported only when this engine is used, so the rest of the server
runs without them. The pieces that turn our settings into library calls (context sizes, cache,
load and generator arguments, the sampler stack, output constraints, jobs) are plain functions,
checked on CPU against the real library's classes and signatures: the library accepts and
silently ignores misspelt keyword arguments, so nothing else would catch one.

Generation runs on one synchronous ``Generator`` owned by its own thread (``worker.py``).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import importlib.util
import io
import json
import logging
import math
import threading
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from ..config import DraftModelConfig, MemoryConfig, ModelConfig
from ..domain_errors import ConstraintRejected, ImagesUnsupported, ImageUnreadable
from ..reasoning_budget import BudgetWatch, ReasoningBudget
from ..sampling.constraints import CONSTRAINT_FIELDS, compiled
from ..templating import find_chat_template
from .base import (
    Constraint,
    EngineUnavailable,
    Finish,
    GenerationRequest,
    ImageInput,
    ModelInfo,
    Step,
    TokenLogprob,
    completion_budget,
    read_added_tokens,
)
from .worker import GeneratorFailed, GeneratorLike, GeneratorWorker

logger = logging.getLogger(__name__)

PAGE = 256  # the paged cache's page size: cache sizes are multiples of it
LOOP_WINDOW_MIN = 3  # Job(stop_on_loop=(window, 2)) asserts 2 < window

#: Sampler fields this engine applies (the others are accepted and logged as ignored).
SAMPLER_FIELDS = frozenset({
    "max_tokens", "min_tokens", "stop", "banned_strings", "banned_tokens", "token_healing", "temperature",
    "temperature_last", "top_k", "top_p", "min_p", "xtc_probability", "xtc_threshold", "frequency_penalty",
    "presence_penalty", "repetition_penalty", "penalty_range", "repetition_decay", "dry_multiplier", "dry_base",
    "dry_allowed_length", "dry_range", "dry_sequence_breakers", "logit_bias", "ban_eos_token", "json_schema",
    "regex_pattern", "grammar_string", "adaptive_target", "adaptive_decay", "loop_detect_window", "seed",
    "logprobs", "top_logprobs",
})

#: Families whose EXL3 checkpoints can carry an MTP head (``draft_mode: mtp``), by ExLlamaV3 module.
MTP_FAMILIES = {
    "qwen3_5_mtp": "Qwen3.5 / 3.6 (the *ForConditionalGeneration checkpoints)",
    "glm4_moe_lite_mtp": "GLM-4.7-Flash",
    "glm_moe_dsa_mtp": "GLM-5 (GlmMoeDsa)",
    "glm5_next_mtp": "GLM-5 Next",
    "hy_v3_mtp": "Hy3 (Hunyuan 3)",
    "mimo_v2_mtp": "MiMo-V2",
    "nemotronh_mtp": "Nemotron-H",
    "qwen4_exp_mtp": "Qwen4 (experimental)",
    "bailing_hybrid_mtp": "Ling 3.x",
    "deepseek_v4_mtp": "DeepSeek-V4",
}


def runnable() -> bool:
    """Whether this machine can run the engine: exllamav3 installed and a CUDA device visible."""
    if importlib.util.find_spec("exllamav3") is None or importlib.util.find_spec("torch") is None:
        return False
    import torch

    return bool(torch.cuda.is_available())


# -- settings to library arguments (pure, checked on CPU) ----------------------------------------

def context_sizes(settings: ModelConfig, model_max: int) -> tuple[int, int]:
    """``(max_seq_len, cache_size)``: blank or -1 means the model's own length; the cache holds at
    least one sequence, in whole pages, and the sequence never exceeds the cache."""
    max_seq_len = model_max if settings.max_seq_len in (None, -1) else int(settings.max_seq_len)
    cache_size = settings.cache_size or -(-max_seq_len // PAGE) * PAGE
    return min(max_seq_len, cache_size), cache_size


def cache_layer(cache_mode: str) -> tuple[str | None, dict[str, int]]:
    """The cache layer class name and its arguments: FP16, or quantised K/V bits ("8,6"; Q8/Q6/Q4)."""
    mode = cache_mode.upper()
    if mode == "FP16":
        return None, {}
    if mode in ("Q8", "Q6", "Q4"):
        bits = int(mode[1])
        return "CacheLayer_quant", {"k_bits": bits, "v_bits": bits}
    k_bits, v_bits = (int(part) for part in mode.split(","))
    return "CacheLayer_quant", {"k_bits": k_bits, "v_bits": v_bits}


def batch_slots(settings: ModelConfig, recurrent: bool) -> int:
    """Concurrent jobs: the configured number, else 4 for recurrent models (their state slots
    are scarce) and 128 otherwise, as upstream."""
    return settings.max_batch_size or (4 if recurrent else 128)


def chunk_size(settings: ModelConfig) -> int:
    return max(PAGE, -(-settings.chunk_size // PAGE) * PAGE)


def output_chunk(settings: ModelConfig) -> int | None:
    """A job's ``max_rq_tokens``: with output chunking its cache pages are taken a chunk at a time,
    so one long reply cannot starve the others; without it, all at once (upstream's switch)."""
    return chunk_size(settings) if settings.output_chunking else None


def nccl_available() -> bool:
    """Whether tensor parallelism can use NCCL here: CUDA and a torch built with NCCL, not Windows."""
    import platform

    import torch

    return platform.system() != "Windows" and torch.cuda.is_available() and torch.distributed.is_nccl_available()


def tensor_parallel_backend(settings: ModelConfig) -> str:
    """The configured backend, or native when NCCL is asked for but missing (upstream's fallback)."""
    if settings.tensor_parallel_backend == "nccl" and not nccl_available():
        logger.warning("tensor_parallel_backend is nccl, but NCCL is not available here; using native")
        return "native"
    return settings.tensor_parallel_backend


def load_kwargs(settings: ModelConfig, max_batch_size: int, callback: Callable[[int, int], None] | None) -> dict:
    """``Model.load`` arguments. One GPU also loads through the split path, because only that
    path reports progress to the callback.

    As upstream: a non-empty ``gpu_split`` is used whatever ``gpu_split_auto`` says, with or
    without tensor parallelism; otherwise tensor parallelism splits on its own, and a layer split
    keeps ``autosplit_reserve`` free on each GPU."""
    kwargs: dict[str, Any] = {"max_chunk_size": chunk_size(settings), "max_batch_size": max_batch_size,
                              "callback": callback, "progressbar": True}
    if settings.tensor_parallel:
        kwargs.update(tensor_p=True, tp_backend=tensor_parallel_backend(settings))
    if settings.gpu_split:
        kwargs["use_per_device"] = list(settings.gpu_split)
    elif not settings.tensor_parallel:
        kwargs["reserve_per_device"] = [mb / 1024 for mb in settings.autosplit_reserve]
    return kwargs


def draft_load_kwargs(settings: ModelConfig, draft: DraftModelConfig, max_batch_size: int) -> dict:
    """``Model.load`` arguments for a draft model or MTP head: always a layer split (no MTP head
    supports tensor parallelism, and a small drafter gains nothing from it), on ``draft_gpu_split``
    when given, else the same autosplit reserve as the target."""
    return layer_split_kwargs(settings, draft.draft_gpu_split, max_batch_size)


def vision_load_kwargs(settings: ModelConfig) -> dict:
    """``Model.load`` arguments for a vision tower: a layer split on the model's manual split when
    there is one, else the autosplit reserve (it loads first, as upstream loads it)."""
    return layer_split_kwargs(settings, [] if settings.gpu_split_auto else settings.gpu_split, 1)


def layer_split_kwargs(settings: ModelConfig, split: list[float], max_batch_size: int) -> dict:
    kwargs: dict[str, Any] = {"max_chunk_size": chunk_size(settings), "max_batch_size": max_batch_size,
                              "progressbar": True}
    if split:
        kwargs["use_per_device"] = list(split)
    else:
        kwargs["reserve_per_device"] = [mb / 1024 for mb in settings.autosplit_reserve]
    return kwargs


def vision_tower(x: Any, config: Any, settings: ModelConfig, name: str) -> Any | None:
    """The model's vision tower (unloaded) when ``model.vision`` is on and ExLlamaV3 has one for the
    architecture; either way the log says whether requests with images will be answered."""
    present = "vision" in config.model_classes
    if settings.vision and present:
        return x.Model.from_config(config, component="vision")
    if settings.vision:
        logger.warning("model.vision is on, but %s has no vision tower ExLlamaV3 can load: requests with images "
                       "get a 400", name)
    elif present:
        logger.info("%s has a vision tower; model.vision is off, so requests with images get a 400", name)
    return None


def draft_tokens(draft: DraftModelConfig, default: int) -> int:
    return draft.draft_num_tokens or default


def generator_kwargs(settings: ModelConfig, draft: DraftModelConfig, memory: MemoryConfig, max_batch_size: int,
                     num_draft_tokens: int | None) -> dict[str, Any]:
    """``Generator`` arguments besides the model, cache, tokenizer and draft parts."""
    kwargs: dict[str, Any] = {"max_batch_size": max_batch_size, "max_chunk_size": chunk_size(settings),
                              "recurrent_cache_size": memory.sysmem_recurrent_cache * 1024**2,
                              "cpu_cache_size": memory.sysmem_kv_cache * 1024**2}
    if num_draft_tokens:
        kwargs.update(num_draft_tokens=num_draft_tokens, dynamic_draft_tokens=draft.dynamic_draft)
    if draft.draft_mode == "ngram":
        kwargs["ngram_match_min"] = draft.ngram_match_min
    return kwargs


def mtp_available(config: Any) -> bool:
    return "mtp" in getattr(config, "model_classes", {})


def check_draft_mode(config: Any, draft: DraftModelConfig, folder: Path) -> str:
    """The drafting this load will use: ``model``, ``mtp``, ``ngram`` or ``disabled``."""
    mode = draft.draft_mode
    if mode == "model" and not draft.draft_model_name:
        return "disabled"
    if mode == "mtp" and not mtp_available(config):
        raise EngineUnavailable(
            f"draft_mode is mtp, but {folder.name} has no MTP tensors (its config declares no MTP layers, or the "
            f"EXL3 quant was made without the mtp.* tensors). MTP heads exist for: "
            f"{', '.join(sorted(set(MTP_FAMILIES.values())))}. Use draft_mode: ngram or disabled.")
    return mode


@functools.lru_cache(maxsize=32)
def breaker_ids(tokenizer: Any, breakers: tuple[str, ...]) -> frozenset[int]:
    """DRY sequence breakers as the token ids ``SS_DRY`` takes: every token whose piece contains
    one of the strings (the library's resolution; it scans the whole vocabulary, so it is cached)."""
    from exllamav3.generator.sampler.custom import dry_sequence_breaker_tokens

    return dry_sequence_breaker_tokens(tokenizer, breakers)


def sampler_steps(values: Mapping[str, Any], tokenizer: Any = None, eos_ids: Sequence[int] = ()) -> list[Any]:
    """The ``CustomSampler`` stack for effective sampler values: penalties and bans first (the
    library requires it), then truncation and temperature, then the terminal sampling step.
    ``ban_eos_token`` bans the end-of-sequence ids, so they are never sampled (and never printed)."""
    from exllamav3.generator import sampler as s

    sustain = int(1e8) if values["penalty_range"] in (-1, 0) else values["penalty_range"]
    decay = values["repetition_decay"]
    steps: list[Any] = []
    if values["logit_bias"]:
        steps.append(s.SS_LogitBias({int(k): float(v) for k, v in values["logit_bias"].items()}))
    if values["repetition_penalty"] != 1.0:
        steps.append(s.SS_RepP(values["repetition_penalty"], sustain, decay))
    if values["presence_penalty"] or values["frequency_penalty"]:
        steps.append(s.SS_PresFreqP(values["presence_penalty"], values["frequency_penalty"], sustain, decay))
    if values["dry_multiplier"]:
        breakers = values["dry_sequence_breakers"]
        steps.append(s.SS_DRY(values["dry_multiplier"], values["dry_base"], values["dry_allowed_length"],
                              values["dry_range"], breaker_ids(tokenizer, tuple(breakers)) if breakers else None,
                              tokenizer))
    banned = [*values["banned_tokens"], *(eos_ids if values["ban_eos_token"] else ())]
    if banned:
        steps.append(s.SS_BanTokens(list(dict.fromkeys(banned))))
    if values["temperature"] == 0 or values["top_k"] == 1:
        return [*steps, s.SS_Argmax()]
    temperature = [s.SS_Temperature(values["temperature"])]
    steps += [] if values["temperature_last"] else temperature
    if values["top_k"] > 0:
        steps.append(s.SS_TopK(values["top_k"]))
    if values["top_p"] < 1.0:
        steps.append(s.SS_TopP(values["top_p"]))
    if values["min_p"] > 0.0:
        steps.append(s.SS_MinP(values["min_p"]))
    steps += temperature if values["temperature_last"] else []
    if values["xtc_probability"] > 0:
        steps.append(s.SS_XTC(values["xtc_probability"], values["xtc_threshold"], tokenizer=tokenizer))
    if values["adaptive_target"] < 1.0:
        return [*steps, s.SS_AdaptiveP(values["adaptive_target"], values["adaptive_decay"])]
    return [*steps, s.SS_Sample()]


def output_filters(constraint: Constraint | None, tokenizer: Any) -> list[Any]:
    """An LLGuidance filter for the request's grammar (``sampling/constraints.py`` made it: tool calls
    or structured output, after the reasoning section); it ends the job when the output is complete."""
    if constraint is None:
        return []
    from exllamav3.generator.filter import LLGuidanceFilter

    grammar = constraint.grammar or compiled(constraint).grammar
    return [LLGuidanceFilter(tokenizer, eos_after_completed=True, llg_grammar=grammar)]


def job_kwargs(values: Mapping[str, Any], budget: int, stops: list[str | int], max_rq_tokens: int | None,
               top_logprobs: int | None = None) -> dict[str, Any]:
    """``Job`` arguments besides the prompt, sampler and filters. Loop detection ends the job when
    the last ``loop_detect_window`` tokens are two or more repeats of one sequence; the library needs
    a window of at least 3 for that (a shorter one is logged and left off)."""
    window = values["loop_detect_window"] or 0
    if 0 < window < LOOP_WINDOW_MIN:
        logger.warning("loop_detect_window %d is too short to hold two repeats (%d or more): loop detection is off "
                       "for this request", window, LOOP_WINDOW_MIN)
    return {"return_probs": top_logprobs is not None, "return_top_tokens": top_logprobs or 0,
            "max_new_tokens": budget, "min_new_tokens": values["min_tokens"], "seed": values["seed"],
            "stop_conditions": stops, "decode_special_tokens": True, "token_healing": values["token_healing"],
            "banned_strings": list(values["banned_strings"]) or None, "max_rq_tokens": max_rq_tokens,
            "stop_on_loop": (window, 2) if window >= LOOP_WINDOW_MIN else None}


def wants_bos(folder: Path) -> bool:
    """``add_bos_token`` from tokenizer_config.json (true when absent, as upstream reads it)."""
    try:
        return bool(json.loads((folder / "tokenizer_config.json").read_text()).get("add_bos_token", True))
    except (OSError, ValueError, AttributeError):
        return True


def with_bos(ids: Any, bos_id: int | None, wanted: bool) -> Any:
    """Prompt ids starting with BOS exactly once: a template that writes the BOS text has it
    encoded already (special tokens are encoded), one that does not gets it added when the
    tokenizer asks for it."""
    import torch

    if not wanted or bos_id is None or (ids.shape[-1] and int(ids[0, 0]) == bos_id):
        return ids
    return torch.cat([torch.tensor([[bos_id]], dtype=ids.dtype), ids], dim=-1)


def stop_conditions(eos_ids: list[int], values: Mapping[str, Any]) -> list[str | int]:
    """End-of-sequence ids (unless ``ban_eos_token``) and the request's stop strings or ids."""
    requested = [stop for stop in values["stop"] if stop != ""]
    return ([] if values["ban_eos_token"] else list(dict.fromkeys(eos_ids))) + requested


@dataclass(frozen=True)
class ModelParts:
    """What one load puts on the GPUs: the target model and its cache, and the draft model (or MTP
    head) with its own cache. Built unloaded; ``load_parts`` loads them."""

    model: Any
    cache: Any
    draft_model: Any | None
    draft_cache: Any | None
    mode: str  # model, mtp, ngram or disabled
    num_draft: int | None
    slots: int
    max_seq_len: int
    cache_size: int
    vision_model: Any | None = None


def make_cache(x: Any, model: Any, cache_size: int, cache_mode: str, slots: int, history: int) -> Any:
    layer, bits = cache_layer(cache_mode)
    return x.Cache(model, max_num_tokens=cache_size, layer_type=getattr(x, layer) if layer else None,
                   max_batch_size=slots, max_history=history, **bits)


def build_parts(x: Any, config: Any, folder: Path, settings: ModelConfig, draft: DraftModelConfig) -> ModelParts:
    """Models and caches for a load, nothing loaded yet. Both caches get the same state slots and
    the same history: a recurrent model (target or draft) needs ``max_history`` of at least the
    draft length, and its slots bound the batch, as the library's own model_init wires them."""
    mode = check_draft_mode(config, draft, folder)
    max_seq_len, cache_size = context_sizes(settings, config.max_position_embeddings)
    model = x.Model.from_config(config)
    draft_model = None
    if mode in ("model", "mtp"):
        draft_config = config if mode == "mtp" else x.Config.from_directory(
            str(Path(draft.draft_model_dir) / str(draft.draft_model_name)))
        draft_model = x.Model.from_config(draft_config, component="mtp" if mode == "mtp" else "text")
    num_draft = draft_tokens(draft, draft_model.caps.get("default_draft_size", 4)) if draft_model is not None \
        else draft_tokens(draft, 4) if mode == "ngram" else None
    recurrent = any(bool(m.caps.get("recurrent_states")) for m in (model, draft_model) if m is not None)
    slots = batch_slots(settings, recurrent)
    cache = make_cache(x, model, cache_size, settings.cache_mode, slots, num_draft or 0)
    draft_cache = make_cache(x, draft_model, cache_size, draft.draft_cache_mode, slots, num_draft or 0) \
        if draft_model is not None else None
    return ModelParts(model, cache, draft_model, draft_cache, mode, num_draft, slots, max_seq_len, cache_size,
                      vision_tower(x, config, settings, folder.name))


def load_parts(parts: ModelParts, settings: ModelConfig, draft: DraftModelConfig,
               progress: Callable[[int, int], None] | None) -> None:
    """The vision tower and the draft first (layer split), then the target, then the warm-up passes."""
    if parts.vision_model is not None:
        parts.vision_model.load(**vision_load_kwargs(settings))
    if parts.draft_model is not None:
        parts.draft_model.load(**draft_load_kwargs(settings, draft, parts.slots))
    parts.model.load(**load_kwargs(settings, parts.slots, progress))
    parts.model.warmup(cache=parts.cache, max_chunk_size=chunk_size(settings))


def unload_parts(parts: ModelParts) -> None:
    """Free whatever of a load is on the GPUs (unloading a model that never loaded is harmless)."""
    import torch

    for model in (parts.vision_model, parts.draft_model, parts.model):
        if model is not None:
            try:
                model.unload()
            except Exception:
                logger.exception("unloading %s failed", type(model).__name__)
    parts.cache.detach_from_model()
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


# -- the engine -------------------------------------------------------------------------------

class ExLlamaV3Engine:
    """One loaded EXL3 model: target, optional draft (model, MTP head or n-gram), paged cache."""

    sampler_fields = SAMPLER_FIELDS

    def __init__(self, folder: Path, settings: ModelConfig, draft: DraftModelConfig, memory: MemoryConfig, *,
                 templates_dir: Path | None = None, progress: Callable[[int, int], None] | None = None) -> None:
        import exllamav3 as x

        config = x.Config.from_directory(str(folder))
        if settings.cpu_moe_offload_layers:
            config.infer_params.moe_cpu_offload = settings.cpu_moe_offload_layers
        parts = build_parts(x, config, folder, settings, draft)
        self._parts = parts
        # Two tokenizers: encoding flips a flag on the tokenizer it runs on, and the generator
        # thread encodes too (banned strings, when a job is queued or requeued), so requests
        # encode on their own copy, under a lock of its own.
        self._tokenizer = x.Tokenizer.from_config(config)  # the generator thread's
        self._request_tokenizer = x.Tokenizer.from_config(config)
        self._tokenizer_lock = threading.Lock()  # guards _request_tokenizer
        self._max_seq_len = parts.max_seq_len
        self._eos_ids = list(dict.fromkeys(config.eos_token_id_list))
        self._bos = (self._tokenizer.bos_token_id, wants_bos(folder))
        self._pieces = self._tokenizer.get_id_to_piece_list(True)
        self._max_rq_tokens = output_chunk(settings)
        self._vision = parts.vision_model
        generator = generator_kwargs(settings, draft, memory, parts.slots, parts.num_draft)
        # A cast: torch.inference_mode() on Generator.iterate hides its signature from type checkers.
        self._worker = GeneratorWorker(lambda: cast(GeneratorLike, x.Generator(
            model=parts.model, cache=parts.cache, tokenizer=self._tokenizer, draft_model=parts.draft_model,
            draft_cache=parts.draft_cache, **generator)))
        try:
            load_parts(parts, settings, draft, progress)
            self._worker.start()
        except BaseException:
            unload_parts(parts)  # weights already on the GPUs would stay there, unreachable
            raise
        template = find_chat_template(folder, settings.prompt_template, templates_dir)
        self.info = ModelInfo(
            name=folder.name, max_seq_len=self._max_seq_len, chat_template=template[1] if template else None,
            chat_template_name=template[0] if template else None, tool_format=None, reasoning=False,
            bos_token=self._tokenizer.bos_token, eos_token=self._tokenizer.eos_token,
            pad_token=self._tokenizer.pad_token or None, unk_token=self._tokenizer.unk_token or None,
            max_batch_size=parts.slots,
            cache_size=parts.cache_size, cache_mode=settings.cache_mode, vision=self._vision is not None,
            added_tokens=read_added_tokens(folder))
        logger.info("%s: context %d, cache %d tokens (%s), %d slots, drafting: %s%s", folder.name, self._max_seq_len,
                    parts.cache_size, settings.cache_mode, parts.slots, parts.mode,
                    f" ({parts.num_draft} tokens)" if parts.num_draft else "")

    def encode(self, text: str, *, add_bos: bool = False, special_tokens: bool = True) -> list[int]:
        return self._encode(text, add_bos, special_tokens)[0].tolist()

    def _encode(self, text: str, add_bos: bool, special_tokens: bool, embeddings: list[Any] | None = None) -> Any:
        """Token ids; each image embedding's alias in the text becomes that embedding's own token ids."""
        with self._tokenizer_lock:
            return self._request_tokenizer.encode(text, add_bos=add_bos, encode_special_tokens=special_tokens,
                                                  embeddings=embeddings or None)

    def decode(self, ids: list[int], *, special_tokens: bool = True) -> str:
        import torch

        with self._tokenizer_lock:
            return self._request_tokenizer.decode(torch.tensor(ids, dtype=torch.long),
                                                  decode_special_tokens=special_tokens)

    def active_jobs(self) -> int:
        return self._worker.active_jobs()

    def cache_usage(self) -> float:
        return self._worker.cache_usage()

    def health_issues(self) -> list[dict[str, str]]:
        return list(self._worker.issues)

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Step | Finish]:
        # The vision tower runs on the generator thread, between iterations: its forward passes
        # must not overlap the generator's on the same GPU.
        embeddings = await self._worker.call(lambda: self._image_embeddings(request.images)) \
            if request.images else []
        # Long prompts take a while to tokenize: off the event loop.
        encoded = await asyncio.to_thread(self._encode, request.prompt, False, True, embeddings)
        ids = with_bos(encoded, *self._bos)
        prompt_tokens = ids.shape[-1]
        budget = completion_budget(prompt_tokens, self._max_seq_len, request.params.max_tokens)
        values = request.params.sampler
        stops = stop_conditions(self._eos_ids, {**values, "stop": list(request.params.stop)})
        constraint = request.params.constraint
        filters = await asyncio.to_thread(self._filters, constraint) if constraint is not None else []

        def build_job() -> Any:  # on the generator thread, which alone uses self._tokenizer
            from exllamav3 import Job
            from exllamav3.generator.sampler import CustomSampler

            return Job(input_ids=ids, sampler=CustomSampler(sampler_steps(values, self._tokenizer, self._eos_ids)),
                       filters=filters, embeddings=embeddings or None,
                       **job_kwargs(values, budget, stops, self._max_rq_tokens, request.params.top_logprobs))

        reasoning = request.params.reasoning_budget
        return self._results(build_job, prompt_tokens,
                             self._budget_watch(reasoning) if reasoning is not None else None)

    def _budget_watch(self, budget: ReasoningBudget) -> Callable[[Any, dict[str, Any] | None], None]:
        """Runs on the generator thread after each result: once the job's reasoning reaches the
        budget, the message and end tag are forced as its next tokens (``Job.constrain_output_now``),
        and the model goes on from there."""
        watch = BudgetWatch(budget)

        def check(job: Any, result: dict[str, Any] | None) -> None:
            if result is None:
                due = watch.due_at_start()
            else:
                ids = result.get("token_ids")
                due = watch.feed(result.get("text") or "", int(ids.shape[-1]) if ids is not None else 0)
            if due:
                forced = self._tokenizer.encode(budget.injection, encode_special_tokens=True, add_bos=False)
                if forced.shape[-1] and int(forced[0, 0]) == self._tokenizer.bos_token_id:
                    forced = forced[:, 1:]  # tokenizers that prepend BOS whatever add_bos says
                if forced.shape[-1]:
                    job.constrain_output_now(forced)

        return check

    def _image_embeddings(self, images: tuple[ImageInput, ...]) -> list[Any]:
        """Each image through the vision tower, its embedding aliased by the image's prompt marker."""
        if self._vision is None:
            raise ImagesUnsupported("This model does not take images (no vision tower is loaded).", "messages")
        from PIL import Image, UnidentifiedImageError

        embeddings = []
        for image in images:
            try:
                picture = Image.open(io.BytesIO(image.data))
                picture.load()
            except (UnidentifiedImageError, OSError, ValueError) as error:
                raise ImageUnreadable(f"An image could not be decoded: {error}", "messages") from error
            embeddings.append(self._vision.get_image_embeddings(tokenizer=self._tokenizer, image=picture,
                                                                text_alias=image.marker))
        return embeddings

    def _filters(self, constraint: Constraint) -> list[Any]:
        """The request's output filter, built before anything is queued: a schema, regex or grammar
        LLGuidance refuses is the client's mistake, a 400 that names it."""
        try:
            with self._tokenizer_lock:
                return output_filters(constraint, self._request_tokenizer)
        except ValueError as error:
            field = CONSTRAINT_FIELDS[constraint.kind]
            raise ConstraintRejected(f"{field} cannot be used to constrain the output: {error}", field) from error

    async def _results(self, build_job: Callable[[], Any], prompt_tokens: int,
                       watch: Callable[[Any, dict[str, Any] | None], None] | None = None,
                       ) -> AsyncIterator[Step | Finish]:
        """The job's steps; it is queued on the first iteration, so a job nobody reads never runs."""
        handle = self._worker.submit(build_job, watch)
        try:
            while (result := await handle.results.get()) is not None:
                if isinstance(result, BaseException):
                    raise result
                for step in result_to_steps(result, prompt_tokens, self._pieces):
                    yield step
                if result.get("eos"):
                    return
        finally:
            if not handle.done:
                self._worker.cancel(handle)

    async def unload(self) -> None:
        """Ends running jobs, closes the generator, frees weights and caches."""
        await asyncio.to_thread(self._worker.stop)
        unload_parts(self._parts)


def token_logprobs(result: Mapping[str, Any], pieces: Sequence[str]) -> tuple[TokenLogprob, ...]:
    """Log-probabilities of a result's tokens: ExLlamaV3 reports probabilities of the raw model
    distribution (before temperature, penalties and truncation), as OpenAI's logprobs are."""
    ids, probs = result.get("token_ids"), result.get("token_probs")
    if ids is None or probs is None:
        return ()
    top_ids, top_probs = result.get("top_k_tokens"), result.get("top_k_probs")

    def piece(token: int) -> str:
        return pieces[token] if 0 <= token < len(pieces) else ""

    def log(p: float) -> float:
        return math.log(p) if p > 0 else -9999.0

    return tuple(
        TokenLogprob(piece(int(ids[0, i])), log(float(probs[0, i])),
                     tuple((piece(int(t)), log(float(p))) for t, p in zip(top_ids[0, i], top_probs[0, i], strict=True))
                     if top_ids is not None and top_probs is not None else ())
        for i in range(ids.shape[-1]))


def held_before_stop_token(result: Mapping[str, Any], pieces: Sequence[str]) -> list[Step]:
    """The output a stop token's result still holds back. The library appends each token's piece
    to its held text *before* it checks for a stop token, so on ``eos_reason == "stop_token"`` the
    ``held`` dict carries the pending output (the start of a possible stop string, a character split
    across tokens) followed by the stop token itself (``<|im_end|>``): the first is the model's
    output, the second is not."""
    held = result.get("held") or {}
    ids = held.get("token_ids")
    if ids is None or ids.shape[-1] < 2:
        return []
    text = str(held.get("text") or "").removesuffix(str(result.get("eos_triggering_token_str") or ""))
    before_stop = {key: value[:, :-1] for key, value in held.items() if key != "text"}
    return [Step(text, int(ids.shape[-1]) - 1, token_logprobs(before_stop, pieces))]


def result_to_steps(result: Mapping[str, Any], prompt_tokens: int, pieces: Sequence[str] = ()) -> list[Step | Finish]:
    """One ``iterate()`` result as our steps; a per-job error raises."""
    if result.get("stage") == "error":
        error = result.get("error")
        raise GeneratorFailed(f"generation failed: {type(error).__name__}: {error}")
    if result.get("stage") != "streaming":
        return []
    ids = result.get("token_ids")
    count = int(ids.shape[-1]) if ids is not None else 0
    text = result.get("text") or ""
    steps: list[Step | Finish] = [Step(text, count, token_logprobs(result, pieces))] if text or count else []
    if result.get("eos") and result.get("eos_reason") == "stop_token":
        steps += held_before_stop_token(result, pieces)
    if result.get("eos"):
        reason = result.get("eos_reason")
        steps.append(Finish(
            "length" if reason == "max_new_tokens" else "stop", prompt_tokens, int(result.get("new_tokens", 0)),
            cached_tokens=int(result.get("cached_tokens", 0)),
            stop_str=result.get("eos_triggering_string") if reason == "stop_string" else None,
            prompt_seconds=float(result.get("time_prefill", 0.0)),
            completion_seconds=float(result.get("time_generate", 0.0)),
            accepted_draft_tokens=int(result.get("accepted_draft_tokens", 0)),
            rejected_draft_tokens=int(result.get("rejected_draft_tokens", 0))))
    return steps
