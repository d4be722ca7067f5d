"""The generator thread and its asyncio bridge, and ExLlamaV3Engine.generate on top of it, driven by
ExLlamaV3's own Generator and Job code with a scripted sampler (scripted_generator.py): every result
dict the engine reads is one the library built."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Callable
from pathlib import Path

import exllamav3
import pytest

from tabby_fixed.domain_errors import ContextTooLong
from tabby_fixed.engine.base import Constraint, Finish, GenerationParams, GenerationRequest, Step
from tabby_fixed.engine.exllamav3 import ExLlamaV3Engine
from tabby_fixed.engine.worker import GeneratorFailed, GeneratorWorker
from tabby_fixed.errors import ApiError
from tabby_fixed.reasoning_budget import ReasoningBudget
from tabby_fixed.sampling import NEUTRAL
from tests.engine.scripted_generator import ScriptedGenerator

EOS = 2  # <|im_end|>, the fixture model's end of turn


def script(tokenizer, text: str, end: int | None = EOS) -> list[int]:
    """Token ids for ``text``, then the end-of-turn token (``end=None``: never ends by itself)."""
    ids = tokenizer.encode(text, encode_special_tokens=True)[0].tolist()
    return ids + ([end] if end is not None else [])


def engine_on(make: Callable[[], ScriptedGenerator], tokenizer) -> ExLlamaV3Engine:
    """The real engine class without its GPU load: tokenizer, limits and worker set as __init__ does."""
    engine = ExLlamaV3Engine.__new__(ExLlamaV3Engine)
    engine._tokenizer, engine._tokenizer_lock = tokenizer, threading.Lock()
    engine._request_tokenizer = exllamav3.Tokenizer.from_config(tokenizer.config)
    engine._max_seq_len, engine._eos_ids, engine._max_rq_tokens, engine._bos = 3000, [2, 0], 2048, (None, False)
    engine._pieces = tokenizer.get_id_to_piece_list(True)
    engine._worker = GeneratorWorker(make, idle_poll=0.05)
    engine._worker.start()
    return engine


@pytest.fixture
def scripted(model_folder: Path, tokenizer):
    """``scripted(text, **options)``: an engine whose generator answers every job with ``text``."""
    engines: list[ExLlamaV3Engine] = []

    def start(text: str, end: int | None = EOS, **options) -> tuple[ExLlamaV3Engine, ScriptedGenerator]:
        generator = ScriptedGenerator(model_folder, script(tokenizer, text, end), **options)
        engines.append(engine_on(lambda: generator, tokenizer))
        return engines[-1], generator

    yield start
    for engine in engines:
        engine._worker.stop()


def request(text: str = "<|im_start|>user\nhi<|im_end|>\n", max_tokens: int = 50, stop: list[str] = (),
            **sampler) -> GenerationRequest:
    return GenerationRequest(text, GenerationParams(max_tokens=max_tokens, stop=tuple(stop),
                                                    sampler={**NEUTRAL, **sampler}))


async def collect(engine: ExLlamaV3Engine, req: GenerationRequest) -> list:
    return [item async for item in await engine.generate(req)]


def text_of(items: list) -> str:
    return "".join(item.text for item in items if isinstance(item, Step))


def test_generation_runs_on_the_generator_thread(scripted):
    engine, generator = scripted("def f():")
    items = asyncio.run(collect(engine, request(temperature=0.7, top_k=20)))
    assert text_of(items) == "def f():"
    assert isinstance(items[-1], Finish) and items[-1].reason == "stop"
    assert items[-1].completion_tokens == len(generator.script), "the end-of-turn token counts, as upstream"
    assert generator.thread is not None and generator.thread is not threading.main_thread()
    assert engine.active_jobs() == 0
    engine._worker.stop()
    assert generator.closed


@pytest.mark.parametrize("stream_text", ["write_file(path)", "<tool_call>\n{}\n</tool_call>", "content </"])
def test_no_end_of_turn_text_in_the_output(scripted, stream_text):
    """The library's result for a stop token holds the stop token's own piece (<|im_end|>) behind
    the pending text; only the pending text is output."""
    engine, _ = scripted(stream_text)
    items = asyncio.run(collect(engine, request(stop=["</tool_result>"])))
    assert text_of(items) == stream_text
    assert "<|im_end|>" not in text_of(items)


def test_text_held_for_a_possible_stop_string_is_released_on_end_of_turn(scripted, tokenizer):
    engine, _ = scripted("done </")
    items = asyncio.run(collect(engine, request(stop=["</tool_result>"], logprobs=True)))
    assert text_of(items) == "done </"
    steps = [item for item in items if isinstance(item, Step)]
    assert sum(step.token_count for step in steps) == len(script(tokenizer, "done </", end=None))


def test_a_stop_string_ends_the_text_before_it(scripted):
    engine, _ = scripted("answer</tool_result> more")
    items = asyncio.run(collect(engine, request(stop=["</tool_result>"])))
    assert text_of(items) == "answer" and items[-1].stop_str == "</tool_result>"


def test_logprobs_cover_the_held_tokens_but_not_the_stop_token(scripted, tokenizer):
    engine, _ = scripted("done </")
    req = GenerationRequest("<|im_start|>user\nhi<|im_end|>\n", GenerationParams(
        max_tokens=50, stop=("</tool_result>",), sampler=NEUTRAL, top_logprobs=1))
    items = asyncio.run(collect(engine, req))
    logprobs = [entry for item in items if isinstance(item, Step) for entry in item.logprobs]
    assert "".join(entry.token for entry in logprobs) == "done </"


def test_concurrent_jobs_share_the_generator(scripted):
    engine, _ = scripted("abcd")

    async def many():
        return await asyncio.gather(*(collect(engine, request()) for _ in range(8)))

    outputs = asyncio.run(many())
    assert all(text_of(out) == "abcd" for out in outputs)


def test_closing_the_iterator_cancels_the_job(scripted):
    engine, generator = scripted("x", end=None, step_seconds=0.005)

    async def read_one():
        steps = await engine.generate(request(max_tokens=400))
        first = await steps.__anext__()
        await steps.aclose()
        return first

    assert isinstance(asyncio.run(read_one()), Step)
    deadline = time.monotonic() + 2
    while engine.active_jobs() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.active_jobs() == 0 and len(generator.cancelled) == 1
    assert generator.num_remaining_jobs() == 0, "the library no longer holds the job"


def test_a_job_error_fails_that_job_only(scripted, tokenizer):
    engine, _ = scripted("ok BAD end")
    bad = script(tokenizer, "ok BAD end")[2]
    engine._worker.stop()
    engine, _ = scripted("ok BAD end", fail_on=bad)
    with pytest.raises(RuntimeError, match="bad job"):
        asyncio.run(collect(engine, request()))
    assert engine.health_issues() == []


def test_a_fatal_generator_error_rebuilds_and_reports_until_recovery(model_folder, tokenizer):
    built = []

    def make():
        built.append(ScriptedGenerator(model_folder, script(tokenizer, "ab"), crash_after=1 if not built else None))
        return built[-1]

    engine = engine_on(make, tokenizer)
    with pytest.raises(GeneratorFailed, match="illegal memory access"):
        asyncio.run(collect(engine, request()))
    assert len(built) == 2 and built[0].closed
    assert "illegal memory access" in engine.health_issues()[0]["description"]
    items = asyncio.run(collect(engine, request()))
    assert isinstance(items[-1], Finish) and engine.health_issues() == []
    engine._worker.stop()


def test_the_context_is_checked_before_a_job_exists(scripted):
    engine, _ = scripted("a")
    engine._max_seq_len = 5
    with pytest.raises(ContextTooLong) as error:
        asyncio.run(engine.generate(request("def write_file(path, content): return path + content\n" * 3)))
    assert error.value.max_seq_len == 5


@pytest.mark.parametrize(("constraint", "field"), [
    (Constraint("grammar", "x ::= ("), "grammar_string"), (Constraint("regex", "(unclosed"), "regex_pattern"),
    (Constraint("json_schema", {"type": "no-such-type"}), "json_schema"),
])
def test_a_constraint_llguidance_refuses_is_a_400_before_anything_is_queued(scripted, constraint, field):
    engine, generator = scripted("a")
    bad = GenerationRequest("hi", GenerationParams(sampler=NEUTRAL, constraint=constraint))
    with pytest.raises(ApiError) as error:
        asyncio.run(engine.generate(bad))
    assert error.value.status == 400 and error.value.param == field and field in error.value.message
    assert generator.job_serial == 0, "no job was queued"
    assert isinstance(asyncio.run(collect(engine, request()))[-1], Finish)


def test_unloading_fails_running_jobs(scripted):
    engine, generator = scripted("x", end=None, step_seconds=0.005)

    async def run_then_stop():
        steps = await engine.generate(request(max_tokens=400))
        await steps.__anext__()
        await asyncio.to_thread(engine._worker.stop)
        return [item async for item in steps]

    with pytest.raises(GeneratorFailed, match="unloaded"):
        asyncio.run(run_then_stop())
    assert generator.closed


def test_a_job_nobody_reads_never_starts(scripted):
    engine, generator = scripted("a")

    async def start_only():
        return await engine.generate(request())

    asyncio.run(start_only())
    time.sleep(0.1)
    assert engine.active_jobs() == 0 and generator.num_remaining_jobs() == 0 and generator.iterations == 0


def test_a_generator_that_cannot_be_rebuilt_fails_requests_instead_of_hanging(model_folder, tokenizer):
    """A sticky CUDA error breaks the rebuild too: later requests fail at once with the reason,
    and a later rebuild that works brings the engine back."""
    built, broken = [], [True]

    def make():
        if built and broken[0]:
            raise RuntimeError("CUDA error: unspecified launch failure")
        built.append(ScriptedGenerator(model_folder, script(tokenizer, "ab"), crash_after=1 if not built else None))
        return built[-1]

    engine = engine_on(make, tokenizer)
    with pytest.raises(GeneratorFailed, match="illegal memory access"):
        asyncio.run(collect(engine, request()))

    async def bounded():
        return await asyncio.wait_for(collect(engine, request()), timeout=10)

    with pytest.raises(GeneratorFailed, match="unspecified launch failure"):
        asyncio.run(bounded())
    assert any("rebuild failed" in issue["description"] for issue in engine.health_issues())
    broken[0] = False
    assert text_of(asyncio.run(bounded())) == "ab" and engine.health_issues() == []
    engine._worker.stop()


def test_the_reasoning_budget_forces_the_message_and_end_tag_into_the_job(scripted, tokenizer):
    engine, _ = scripted("one two three four five six seven</think>The answer.")
    budget = ReasoningBudget(3, " Enough.</think>", "<think>", "</think>", starts_inside=True)
    req = request("<|im_start|>assistant\n<think>\n", max_tokens=300)
    req = GenerationRequest(req.prompt, dataclasses.replace(req.params, reasoning_budget=budget))
    items = asyncio.run(collect(engine, req))
    text = text_of(items)
    reasoning, _, answer = text.partition(" Enough.</think>")
    assert _ and len(tokenizer.encode(reasoning)[0]) == 3, text  # cut right at the budget
    # The model goes on from where it was (here: the script resumes where it was cut).
    assert "one two three four five six seven</think>The answer.".startswith(reasoning + answer)
    assert items[-1].completion_tokens == sum(step.token_count for step in items if isinstance(step, Step)) + 1


def test_a_zero_budget_ends_reasoning_before_the_first_token(scripted, tokenizer):
    engine, _ = scripted("thinking</think>Answer")
    budget = ReasoningBudget(0, "</think>", "<think>", "</think>", starts_inside=True)
    req = GenerationRequest("<think>\n", GenerationParams(max_tokens=50, sampler=NEUTRAL, reasoning_budget=budget))
    assert text_of(asyncio.run(collect(engine, req))).startswith("</think>thinking")


def test_cache_usage_is_the_share_of_pages_live_jobs_hold(scripted):
    """Read from the library's own page table: a running job holds its pages (prompt and budget),
    and gives them back when it ends."""
    engine, generator = scripted("x", end=None, step_seconds=0.005)
    assert engine.cache_usage() == 0.0

    async def during_a_job() -> tuple[float, int]:
        steps = await engine.generate(request(max_tokens=400))
        await steps.__anext__()
        usage = engine.cache_usage()
        held = sum(len(seq.allocated_pages) for job in generator.active_jobs for seq in job.sequences)
        await steps.aclose()
        return usage, held

    usage, held = asyncio.run(during_a_job())
    assert held > 0 and usage == held / generator.pagetable.max_pages
    deadline = time.monotonic() + 2
    while engine.active_jobs() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.cache_usage() == 0.0
