"""Streaming parser cost per delta: one call whose string argument is 16 KiB, then 64 KiB, of code.

Deltas are 4 characters, about what a model emits per token. Linear parsing means the cost per
delta does not grow with the argument's length, so the 64K/16K ratio of total time is about 4.
Run: ``make bench`` (or ``.venv/bin/python -m bench.parser_stream``).
"""

from __future__ import annotations

import time

from tabby_fixed.toolcalls import ToolCallParser

TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": {"type": "object", "properties": {
    "path": {"type": "string"}, "content": {"type": "string"}}}}}]
LINE = "    if value < limit:  # compare </param and <tag> look-alikes\n        total += value\n"
DELTA = 4
ROUNDS = 5


def call_text(size: int) -> str:
    code = (LINE * (size // len(LINE) + 1))[:size]
    return (f"<tool_call>\n<function=write_file>\n<parameter=path>\nsrc/app.py\n</parameter>\n"
            f"<parameter=content>\n{code}\n</parameter>\n</function>\n</tool_call>")


def seconds_to_stream(text: str) -> float:
    parser = ToolCallParser("qwen3_coder", TOOLS)
    best = float("inf")
    for _ in range(ROUNDS):
        deltas = [text[at:at + DELTA] for at in range(0, len(text), DELTA)]
        stream = parser.stream()
        started = time.perf_counter()
        for delta in deltas:
            stream.feed(delta)
        stream.close()
        best = min(best, time.perf_counter() - started)
    assert stream.result.tool_calls[0].complete
    return best


def main() -> None:
    seconds_to_stream(call_text(4096))  # warm up
    totals = {}
    for size in (16 * 1024, 64 * 1024):
        text = call_text(size)
        totals[size] = seconds_to_stream(text)
        per_delta = totals[size] / (len(text) / DELTA) * 1e6
        print(f"{size // 1024:>3} KiB argument: {per_delta:6.2f} us per {DELTA}-char delta, "
              f"{totals[size] * 1e3:7.1f} ms total (best of {ROUNDS})")
    print(f"64K/16K total time ratio: {totals[64 * 1024] / totals[16 * 1024]:.2f} (linear is ~4; must be <= 4.5)")


if __name__ == "__main__":
    main()
