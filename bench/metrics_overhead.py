"""What the metrics cost per token: one job of 20,000 tokens on the scripted engine at zero
delay, read bare and through ``ObservedEngine`` reporting to the server's ``Metrics`` (TTFT,
inter-token histogram, counters), side by side; and what one ``/metrics`` scrape costs.

Thread CPU time (``time.thread_time``), best of five runs, so other processes on the machine do
not count. Run: ``make bench`` (or ``.venv/bin/python -m bench.metrics_overhead``).
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from tabby_fixed.engine.base import GenerationParams, GenerationRequest
from tabby_fixed.engine.observed import ObservedEngine
from tabby_fixed.engine.scripted import ScriptedEngine
from tabby_fixed.server.metrics import Metrics

TOKENS = 20_000
RUNS = 5


def cpu_seconds(engine: ScriptedEngine | ObservedEngine) -> float:
    """Thread CPU seconds to read one job to its end."""
    request = GenerationRequest("go", GenerationParams(max_tokens=TOKENS))

    async def read() -> None:
        async for _ in await engine.generate(request):
            pass

    started = time.thread_time()
    asyncio.run(read())
    return time.thread_time() - started


def best(measure: Callable[[], float]) -> float:
    return min(measure() for _ in range(RUNS))


def main() -> None:
    with tempfile.TemporaryDirectory() as root:
        folder = Path(root) / "long"
        folder.mkdir()
        (folder / "scripted.yml").write_text(yaml.safe_dump({"default": "word " * (TOKENS // 2),
                                                             "max_seq_len": 65536}))
        bare = ScriptedEngine(folder)
        loaded: list[ObservedEngine] = []
        metrics = Metrics(lambda: loaded, lambda: 1)
        observed = ObservedEngine(ScriptedEngine(folder), metrics)
        loaded.append(observed)
        bare_s, observed_s = best(lambda: cpu_seconds(bare)), best(lambda: cpu_seconds(observed))
        started = time.thread_time()
        for _ in range(100):
            page = metrics.scrape()
        scrape_ms = (time.thread_time() - started) * 10
    print(f"one job of {TOKENS} tokens, thread CPU, best of {RUNS}:")
    print(f"  bare scripted engine   {bare_s * 1e6 / TOKENS:6.2f} us/token")
    print(f"  with metrics observer  {observed_s * 1e6 / TOKENS:6.2f} us/token   "
          f"(+{(observed_s - bare_s) * 1e6 / TOKENS:.2f} us/token, ratio {observed_s / bare_s:.2f})")
    print(f"  one /metrics scrape    {scrape_ms:6.2f} ms CPU ({len(page)} bytes)")


if __name__ == "__main__":
    main()
