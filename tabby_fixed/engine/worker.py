"""One generator, one thread: the bridge between ExLlamaV3's synchronous ``Generator`` and asyncio.

ExLlamaV3's own ``AsyncGenerator`` calls ``iterate()`` on the event loop, so every forward pass
(up to hundreds of milliseconds for a prefill chunk) stalls all HTTP handling. Here the generator
lives on a dedicated thread that alone touches it (it is not thread-safe). Requests talk to that
thread through a command queue (enqueue, cancel, stop) and get their results on an asyncio queue
filled with ``call_soon_threadsafe``, so the loop only ever waits.

A per-job ``"error"`` result fails that job only. An exception from ``iterate()`` itself is fatal
for the generator: it is rebuilt, every job in it fails with that error, and the engine reports
the failure as a health issue until an iteration succeeds again. A rebuild that fails too (a
sticky CUDA error) leaves no generator: the thread lives on, each later job tries to rebuild it
once and fails at once with the reason, so no request waits for a generator that is not there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn, Protocol, TypeVar

logger = logging.getLogger(__name__)
T = TypeVar("T")


class GeneratorLike(Protocol):
    """What the worker uses of ``exllamav3.Generator`` (and what the tests' fake provides)."""

    def enqueue(self, job: Any) -> Any: ...

    def cancel(self, job: Any) -> None: ...

    def iterate(self) -> list[dict[str, Any]]: ...

    def num_remaining_jobs(self) -> int: ...

    def close(self) -> None: ...

    #: The paged cache's bookkeeping: ``referenced_pages`` (pages live jobs hold) and ``max_pages``.
    pagetable: Any


class GeneratorFailed(RuntimeError):
    """The generator itself failed; the job was lost with it."""


@dataclass(eq=False)
class JobHandle:
    """A request's end of one job: results arrive on ``results``; None ends them."""

    loop: asyncio.AbstractEventLoop
    results: asyncio.Queue[dict[str, Any] | BaseException | None] = field(default_factory=asyncio.Queue)
    job: Any = None
    done: bool = False
    #: Called on the worker thread with the job once it is queued (result None), then after each of
    #: its results: the one place a request may act on its running job (force output into it).
    watch: Callable[[Any, dict[str, Any] | None], None] | None = None

    def deliver(self, item: dict[str, Any] | BaseException | None) -> None:
        with contextlib.suppress(RuntimeError):  # a closed event loop: nobody is waiting any more
            self.loop.call_soon_threadsafe(self.results.put_nowait, item)


class GeneratorWorker:
    def __init__(self, make_generator: Callable[[], GeneratorLike], *, idle_poll: float = 0.5) -> None:
        self._make_generator = make_generator
        self._generator: GeneratorLike | None = None
        self._commands: queue.Queue[tuple[str, Any, Any]] = queue.Queue()
        self._handles: dict[int, JobHandle] = {}  # id(job) -> handle; only the worker thread touches it
        self._idle_poll = idle_poll
        self._thread = threading.Thread(target=self._run, name="exllamav3-generator", daemon=True)
        self.issues: list[dict[str, str]] = []  # fatal failures not yet recovered from

    def start(self) -> None:
        self._generator = self._make_generator()
        self._thread.start()

    def submit(self, build_job: Callable[[], Any],
               watch: Callable[[Any, dict[str, Any] | None], None] | None = None) -> JobHandle:
        """Queue a job; ``build_job`` and ``watch`` run on the worker thread (they may touch the
        tokenizer and the job)."""
        handle = JobHandle(asyncio.get_running_loop(), watch=watch)
        self._commands.put(("enqueue", build_job, handle))
        return handle

    def cancel(self, handle: JobHandle) -> None:
        self._commands.put(("cancel", None, handle))

    async def call(self, work: Callable[[], T]) -> T:
        """Run ``work`` on the worker thread between iterations (GPU work that must not overlap the
        generator's, such as a vision tower's forward pass) and return what it returns or raises."""
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        if not self._thread.is_alive():
            raise GeneratorFailed("the model was unloaded")
        self._commands.put(("call", work, future))
        if not self._thread.is_alive():  # it ended after the check above: nobody will take the call
            self._refuse_waiting_calls()
        return await future

    def active_jobs(self) -> int:
        return len(self._handles)

    def cache_usage(self) -> float:
        """Pages held by live jobs over all pages. Read from the event loop while the worker thread
        changes the table: taking a dict's length is atomic, so the figure is at worst one step old."""
        generator = self._generator
        if generator is None:
            return 0.0
        table = generator.pagetable
        return len(table.referenced_pages) / table.max_pages if table.max_pages else 0.0

    def stop(self) -> None:
        """Fail what is left, close the generator and end the thread."""
        if self._thread.is_alive():
            self._commands.put(("stop", None, None))
            self._thread.join()

    def _run(self) -> None:
        running = True
        while running:
            running = self._take_commands(block=not self._handles)
            if running and self._handles:
                self._iterate()
        self._fail_all(GeneratorFailed("the model was unloaded"))
        self._discard_generator()
        self._refuse_waiting_calls()

    def _refuse_waiting_calls(self) -> None:
        """Calls queued behind ``stop`` fail instead of waiting for a thread that has ended."""
        while True:
            try:
                kind, _, future = self._commands.get_nowait()
            except queue.Empty:
                return
            if kind == "call":
                self._call(_unloaded, future)

    def _take_commands(self, block: bool) -> bool:
        while True:
            try:
                kind, payload, handle = self._commands.get(timeout=self._idle_poll) if block \
                    else self._commands.get_nowait()
            except queue.Empty:
                return True
            block = False
            if kind == "stop":
                return False
            if kind == "enqueue":
                self._enqueue(payload, handle)
            elif kind == "call":
                self._call(payload, handle)
            elif kind == "cancel" and handle.job is not None and id(handle.job) in self._handles:
                try:
                    if self._generator is not None:
                        self._generator.cancel(handle.job)
                finally:
                    self._finish(handle, None)

    @staticmethod
    def _call(work: Callable[[], Any], future: asyncio.Future[Any]) -> None:
        try:
            result, error = work(), None
        except Exception as failure:  # the caller's to handle
            result, error = None, failure

        def settle() -> None:
            if future.done():  # the caller went away
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(result)

        with contextlib.suppress(RuntimeError):  # a closed event loop: nobody is waiting any more
            future.get_loop().call_soon_threadsafe(settle)

    def _enqueue(self, build_job: Callable[[], Any], handle: JobHandle) -> None:
        if self._generator is None and not self._rebuild():
            handle.deliver(GeneratorFailed(f"the generator is gone: {self.issues[-1]['description']}"))
            return
        try:
            handle.job = build_job()
            self._generator.enqueue(handle.job)  # type: ignore[union-attr]
        except Exception as error:  # a job that cannot start fails alone
            handle.deliver(error)
            return
        self._handles[id(handle.job)] = handle
        self._watch(handle, None)

    def _iterate(self) -> None:
        try:
            results = self._generator.iterate()  # type: ignore[union-attr]
        except Exception as error:
            logger.exception("the generator failed; rebuilding it")
            self._report(f"generator failure: {type(error).__name__}: {error}")
            self._discard_generator()
            self._rebuild()
            self._fail_all(GeneratorFailed(f"generation failed: {type(error).__name__}: {error}"))
            return
        self.issues.clear()
        for result in results:
            handle = self._handles.get(id(result.get("job")))
            if handle is None:
                continue
            handle.deliver(result)
            if result.get("eos") or result.get("stage") == "error":
                self._finish(handle, None)
            else:
                self._watch(handle, result)

    def _watch(self, handle: JobHandle, result: dict[str, Any] | None) -> None:
        """Run a job's watch; one that fails ends its job with the error, not the generator."""
        if handle.watch is None:
            return
        try:
            handle.watch(handle.job, result)
        except Exception as error:
            logger.exception("a job's watch failed")
            if self._generator is not None:
                self._generator.cancel(handle.job)
            self._finish(handle, error)

    def _report(self, description: str) -> None:
        self.issues.append({"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "description": description})

    def _discard_generator(self) -> None:
        """Close the generator; one that fails to close (its device is broken) is dropped anyway."""
        generator, self._generator = self._generator, None
        if generator is None:
            return
        try:
            generator.close()
        except Exception:
            logger.exception("closing the failed generator failed too")

    def _rebuild(self) -> bool:
        try:
            self._generator = self._make_generator()
        except Exception as error:
            logger.exception("the generator could not be rebuilt")
            self._report(f"generator rebuild failed: {type(error).__name__}: {error}")
            return False
        return True

    def _finish(self, handle: JobHandle, last: BaseException | None) -> None:
        self._handles.pop(id(handle.job), None)
        handle.done = True
        handle.deliver(last)

    def _fail_all(self, error: BaseException) -> None:
        for handle in list(self._handles.values()):
            self._finish(handle, error)


def _unloaded() -> NoReturn:
    raise GeneratorFailed("the model was unloaded")
