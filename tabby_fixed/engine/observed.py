"""An engine seen from outside: job counts and token timings, for whoever watches (the server's
metrics), without the engine or the routes knowing.

``ObservedEngine`` wraps any engine and times each job's steps: the time from ``generate`` to the
first token, the gaps between tokens, the ``Finish``. It keeps the jobs that wait for their first
token (queued or prefilling) apart from the ones that generate, so a load balancer can read the
queue. What it measures goes to a ``JobObserver``; nothing here knows how it is reported.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Protocol

from .base import Engine, Finish, GenerationRequest, ModelInfo, Step


class JobObserver(Protocol):
    """What a job's timings go to; called on the event loop, so it must not block."""

    def first_token(self, model: str, seconds: float) -> None: ...

    def token_gaps(self, model: str, seconds: float, tokens: int) -> None:
        """``tokens`` tokens arrived together, ``seconds`` after the previous ones: each took seconds/tokens."""
        ...

    def ended(self, model: str, outcome: str, finish: Finish | None) -> None:
        """The job is over: ``outcome`` is its ``Finish.reason`` (``stop``, ``length``), ``error`` when
        it failed, ``cancelled`` when it was closed before its end (the client went away)."""
        ...


class ObservedEngine:
    """``engine`` with its jobs counted and timed; every other call goes straight to it."""

    def __init__(self, engine: Engine, observer: JobObserver) -> None:
        self.inner = engine
        self._observer = observer
        self.waiting = 0  # jobs started that have not produced a token yet
        self.running = 0  # jobs producing tokens
        self.last_active = time.monotonic()  # when a job last started or ended: idle since then when none run

    @property
    def info(self) -> ModelInfo:
        return self.inner.info

    @property
    def sampler_fields(self) -> frozenset[str]:
        return self.inner.sampler_fields

    def encode(self, text: str, *, add_bos: bool = False, special_tokens: bool = True) -> list[int]:
        return self.inner.encode(text, add_bos=add_bos, special_tokens=special_tokens)

    def decode(self, ids: list[int], *, special_tokens: bool = True) -> str:
        return self.inner.decode(ids, special_tokens=special_tokens)

    def active_jobs(self) -> int:
        return self.inner.active_jobs()

    def cache_usage(self) -> float:
        return self.inner.cache_usage()

    def health_issues(self) -> list[dict[str, str]]:
        return self.inner.health_issues()

    async def unload(self) -> None:
        await self.inner.unload()

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Step | Finish]:
        started = time.perf_counter()
        self.last_active = time.monotonic()
        return self._watch(await self.inner.generate(request), started)

    async def _watch(self, steps: AsyncIterator[Step | Finish], started: float) -> AsyncIterator[Step | Finish]:
        """The job's steps, timed. Closing this closes the engine's iterator, which cancels the job."""
        name = self.inner.info.name
        last: float | None = None  # when the latest token arrived; None before the first
        finish: Finish | None = None
        outcome = "cancelled"
        self.waiting += 1
        try:
            async for item in steps:
                now = time.perf_counter()
                if isinstance(item, Finish):
                    finish, outcome = item, item.reason
                elif item.token_count or item.text:
                    if last is None:
                        self.waiting -= 1
                        self.running += 1
                        self._observer.first_token(name, now - started)
                    elif item.token_count:
                        self._observer.token_gaps(name, now - last, item.token_count)
                    last = now
                yield item
        except Exception:
            outcome = "error"
            raise
        finally:
            self.last_active = time.monotonic()
            self._observer.ended(name, outcome, finish)
            if last is None:
                self.waiting -= 1
            else:
                self.running -= 1
            close = getattr(steps, "aclose", None)
            if close is not None:
                await close()
