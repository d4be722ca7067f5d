"""The generator thread and its asyncio bridge, driven by a fake generator whose ``iterate()``
returns results shaped like the real one's, and ExLlamaV3Engine.generate on top of it."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable

import exllamav3
import pytest
import torch

from tabby_fixed.engine.base import Finish, GenerationParams, GenerationRequest, Step
from tabby_fixed.engine.exllamav3 import ExLlamaV3Engine
from tabby_fixed.engine.worker import GeneratorFailed, GeneratorWorker
from tabby_fixed.errors import ApiError
from tabby_fixed.sampling import NEUTRAL


class FakeGenerator:
    """Streams each job's script one piece per ``iterate()``, like ``Generator.iterate()`` does."""

    def __init__(self, script: list[str], fail_on: str | None = None, crash_after: int | None = None) -> None:
        self.script, self.fail_on, self.crash_after = script, fail_on, crash_after
        self.jobs: dict[int, list] = {}
        self.cancelled, self.closed, self.iterations = [], False, 0
        self.thread: threading.Thread | None = None

    def enqueue(self, job) -> int:
        self.jobs[id(job)] = [job, 0]
        return len(self.jobs)

    def cancel(self, job) -> None:
        self.cancelled.append(job)
        self.jobs.pop(id(job), None)

    def num_remaining_jobs(self) -> int:
        return len(self.jobs)

    def close(self) -> None:
        self.closed = True

    def iterate(self) -> list[dict]:
        self.thread = threading.current_thread()
        self.iterations += 1
        if self.crash_after is not None and self.iterations > self.crash_after:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        time.sleep(0.001)
        results = []
        for key, (job, position) in list(self.jobs.items()):
            if position == 0:
                results.append({"job": job, "stage": "started", "eos": False, "serial": 1})
            piece = self.script[position]
            if piece == self.fail_on:
                results.append({"job": job, "stage": "error", "eos": False, "error": ValueError("bad job")})
                del self.jobs[key]
                continue
            last = position == len(self.script) - 1
            result = {"job": job, "stage": "streaming", "eos": last, "serial": 1, "text": piece,
                      "token_ids": torch.zeros((1, 1), dtype=torch.long), "token_probs": torch.ones((1, 1))}
            if last:
                result.update(eos_reason="stop_token", eos_triggering_token_id=2, new_tokens=len(self.script),
                              time_prefill=0.01, time_generate=0.02, cached_tokens=0, held={"text": ""})
                del self.jobs[key]
            else:
                self.jobs[key][1] = position + 1
            results.append(result)
        return results


def engine_on(fake: FakeGenerator | Callable[[], FakeGenerator], tokenizer) -> ExLlamaV3Engine:
    """The real engine class without its GPU load: tokenizer, limits and worker set as __init__ does."""
    engine = ExLlamaV3Engine.__new__(ExLlamaV3Engine)
    engine._tokenizer, engine._tokenizer_lock = tokenizer, threading.Lock()
    engine._max_seq_len, engine._eos_ids, engine._max_rq_tokens, engine._bos = 3000, [2, 0], 2048, (None, False)
    engine._pieces = tokenizer.get_id_to_piece_list(True)
    engine._worker = GeneratorWorker(fake if callable(fake) else lambda: fake, idle_poll=0.05)
    engine._worker.start()
    return engine


def request(text: str = "<|im_start|>user\nhi<|im_end|>\n", **sampler) -> GenerationRequest:
    return GenerationRequest(text, GenerationParams(max_tokens=50, sampler={**NEUTRAL, **sampler}))


async def collect(engine: ExLlamaV3Engine, req: GenerationRequest) -> list:
    return [item async for item in await engine.generate(req)]


def test_generation_runs_on_the_generator_thread(tokenizer):
    fake = FakeGenerator(["def", " f", "():"])
    engine = engine_on(fake, tokenizer)
    items = asyncio.run(collect(engine, request(temperature=0.7, top_k=20)))
    assert [i.text for i in items if isinstance(i, Step)] == ["def", " f", "():"]
    assert isinstance(items[-1], Finish) and items[-1].completion_tokens == 3 and items[-1].reason == "stop"
    assert fake.thread is not None and fake.thread is not threading.main_thread()
    assert engine.active_jobs() == 0
    engine._worker.stop()
    assert fake.closed


def test_concurrent_jobs_share_the_generator(tokenizer):
    engine = engine_on(FakeGenerator(["a", "b", "c", "d"]), tokenizer)

    async def many():
        return await asyncio.gather(*(collect(engine, request()) for _ in range(8)))

    outputs = asyncio.run(many())
    assert all("".join(i.text for i in out if isinstance(i, Step)) == "abcd" for out in outputs)
    engine._worker.stop()


def test_closing_the_iterator_cancels_the_job(tokenizer):
    fake = FakeGenerator(["x"] * 10_000)
    engine = engine_on(fake, tokenizer)

    async def read_one():
        steps = await engine.generate(request())
        first = await steps.__anext__()
        await steps.aclose()
        return first

    assert isinstance(asyncio.run(read_one()), Step)
    deadline = time.monotonic() + 2
    while engine.active_jobs() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert engine.active_jobs() == 0 and len(fake.cancelled) == 1
    engine._worker.stop()


def test_a_job_error_fails_that_job_only(tokenizer):
    engine = engine_on(FakeGenerator(["ok", "BAD", "end"], fail_on="BAD"), tokenizer)
    with pytest.raises(RuntimeError, match="bad job"):
        asyncio.run(collect(engine, request()))
    assert engine.health_issues() == []
    engine._worker.stop()


def test_a_fatal_generator_error_rebuilds_and_reports_until_recovery(tokenizer):
    built = []

    def make():
        built.append(FakeGenerator(["a", "b"], crash_after=1 if not built else None))
        return built[-1]

    engine = engine_on(make, tokenizer)
    with pytest.raises(GeneratorFailed, match="illegal memory access"):
        asyncio.run(collect(engine, request()))
    assert len(built) == 2 and built[0].closed
    assert "illegal memory access" in engine.health_issues()[0]["description"]
    items = asyncio.run(collect(engine, request()))
    assert isinstance(items[-1], Finish) and engine.health_issues() == []
    engine._worker.stop()


def test_the_context_is_checked_before_a_job_exists(tokenizer):
    engine = engine_on(FakeGenerator(["a"]), tokenizer)
    engine._max_seq_len = 5
    with pytest.raises(ApiError) as error:
        asyncio.run(engine.generate(request("def write_file(path, content): return path + content\n" * 3)))
    assert error.value.code == "context_length_exceeded"
    engine._worker.stop()


def test_a_job_that_cannot_be_built_fails_alone(tokenizer):
    engine = engine_on(FakeGenerator(["a"]), tokenizer)
    with pytest.raises(ValueError):  # llguidance refuses the grammar while the job is built
        from tabby_fixed.engine.base import Constraint

        bad = GenerationRequest("hi", GenerationParams(sampler=NEUTRAL, constraint=Constraint("grammar", "x ::= (")))
        asyncio.run(collect(engine, bad))
    assert isinstance(asyncio.run(collect(engine, request()))[-1], Finish)
    engine._worker.stop()


def test_unloading_fails_running_jobs(tokenizer):
    fake = FakeGenerator(["x"] * 100_000)
    engine = engine_on(fake, tokenizer)

    async def run_then_stop():
        steps = await engine.generate(request())
        await steps.__anext__()
        await asyncio.to_thread(engine._worker.stop)
        return [item async for item in steps]

    with pytest.raises(GeneratorFailed, match="unloaded"):
        asyncio.run(run_then_stop())
    assert fake.closed and exllamav3 is not None


def test_a_job_nobody_reads_never_starts(tokenizer):
    fake = FakeGenerator(["a"])
    engine = engine_on(fake, tokenizer)

    async def start_only():
        return await engine.generate(request())

    asyncio.run(start_only())
    time.sleep(0.1)
    assert engine.active_jobs() == 0 and fake.jobs == {} and fake.iterations == 0
    engine._worker.stop()
