"""ExLlamaV3's own ``Generator`` on CPU, with only the forward pass and the sampler replaced by a
script of token ids.

Everything a server sees of the generator is the library's code: ``enqueue`` (the job's queue
preparation and page hashing), ``cancel``, starting jobs and allocating their pages, and above
all ``Job.receive_sample``, which turns each token into the result dicts (text, held text, stop
tokens and strings, ``held`` on EOS, timings). Only what needs CUDA is stood in for: the prompt is
taken as prefilled in one step, and each active job's next token comes from the script (or from
the job's forced tokens, as ``Job.receive_logits`` takes them).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import exllamav3
import torch


def tiny_parts(folder: Path, cache_tokens: int = 4096) -> tuple[Any, Any, Any]:
    """The real model (unloaded), cache and tokenizer of a model folder."""
    config = exllamav3.Config.from_directory(str(folder))
    model = exllamav3.Model.from_config(config)
    cache = exllamav3.Cache(model, max_num_tokens=cache_tokens, max_batch_size=16)
    return model, cache, exllamav3.Tokenizer.from_config(config)


class ScriptedGenerator(exllamav3.Generator):
    """Each job samples ``script`` in order (then the script's last id, forever); ``fail_on`` makes
    a job fail on that token as a per-job error, ``crash_after`` makes ``iterate()`` itself raise."""

    def __init__(self, folder: Path, script: list[int], *, fail_on: int | None = None,
                 crash_after: int | None = None, step_seconds: float = 0.001) -> None:
        model, cache, tokenizer = tiny_parts(folder)
        super().__init__(model=model, cache=cache, tokenizer=tokenizer, max_batch_size=16)
        self.script, self.fail_on, self.crash_after, self.step_seconds = script, fail_on, crash_after, step_seconds
        self.sampled: dict[int, int] = {}  # tokens each job (by serial, kept across requeues) has sampled
        self.cancelled: list[Any] = []
        self.closed = False
        self.iterations = 0
        self.thread: threading.Thread | None = None

    def cancel(self, job: Any) -> None:
        self.cancelled.append(job)
        super().cancel(job)

    def close(self) -> None:
        self.closed = True
        super().close()

    def iterate(self) -> list[dict]:
        self.thread = threading.current_thread()
        self.iterations += 1
        if self.crash_after is not None and self.iterations > self.crash_after:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        time.sleep(self.step_seconds)
        results: list[dict] = []
        self.iterate_start_jobs(results)
        finished = []
        for job in list(self.active_jobs):
            self._prefill(job)
            if job.forced_ids is not None and job.new_tokens >= 0:
                # As Job.receive_logits does: a token forced by constrain_output_now replaces the
                # sampler's choice (the script waits meanwhile, as a model's next choice would).
                token = int(job._pop_forced_token(torch.device("cpu"))[0, 0])
            else:
                position = self.sampled.get(job.serial_number, 0)
                self.sampled[job.serial_number] = position + 1
                token = self.script[min(position, len(self.script) - 1)]
            if token == self.fail_on:
                self.reap_failed_job(job, ValueError("bad job"), results)
                continue
            for seq in job.sequences:  # the forward pass writes the new token's K/V
                seq.allocated_pages[seq.kv_position // 256].kv_position += 1
            k = job.return_top_tokens
            eos, _, requeue = job.receive_sample(
                None, torch.tensor([[token]]),
                torch.full((1, 1, k), token) if k else None, torch.full((1, 1, k), 0.5) if k else None,
                torch.tensor([[0.5]]) if job.return_probs else None, results)
            if eos or requeue:
                finished.append((job, requeue))
        for job, requeue in finished:
            job.deallocate_pages()
            self.active_jobs.remove(job)
            if requeue:
                self.pending_jobs.insert(0, job.prepare_for_requeue())
        return results

    @staticmethod
    def _prefill(job: Any) -> None:
        """The prompt's K/V written in one pass, as ``Job.prefill`` leaves the pages afterwards."""
        if job.is_prefill_done():
            return
        now = time.time()
        job.time_first_prefill = job.time_first_prefill or now
        job.time_first_token = job.time_first_token or now
        for seq in job.sequences:
            end = len(seq.sequence_ids) - 1
            seq.kv_position = end
            seq.prefill_complete = True
            for index, page in enumerate(seq.allocated_pages):
                page.kv_position = min(max(end - index * 256, 0), 256)
