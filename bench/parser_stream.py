"""Streaming parser cost per delta: one call whose string argument is 16 KiB, then 64 KiB, of code.

Deltas are 4 characters, about what a model emits per token. Linear parsing means the cost per
delta does not grow with the argument's length, so the 64K/16K ratio of total time is about 4.
Measured for the XML form (qwen3_coder, whose string arguments stream live) and the JSON form
(hermes, whose call is held until its object is complete).
Run: ``make bench`` (or ``.venv/bin/python -m bench.parser_stream``).
"""

from __future__ import annotations

import json
import time

from tabby_fixed.toolcalls import ToolCallParser

TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": {"type": "object", "properties": {
    "path": {"type": "string"}, "content": {"type": "string"}}}}}]
LINE = '    if value < limit:  # compare </param and <tag> look-alikes, "quoted"\n        total += value\n'
DELTA = 4
ROUNDS = 5


def code(size: int) -> str:
    return (LINE * (size // len(LINE) + 1))[:size]


def call_text(size: int, tool_format: str) -> str:
    if tool_format == "hermes":
        call = {"name": "write_file", "arguments": {"path": "src/app.py", "content": code(size)}}
        return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"
    return (f"<tool_call>\n<function=write_file>\n<parameter=path>\nsrc/app.py\n</parameter>\n"
            f"<parameter=content>\n{code(size)}\n</parameter>\n</function>\n</tool_call>")


def seconds_to_stream(text: str, tool_format: str) -> float:
    parser = ToolCallParser(tool_format, TOOLS)
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
    for tool_format in ("qwen3_coder", "hermes"):
        seconds_to_stream(call_text(4096, tool_format), tool_format)  # warm up
        totals = {}
        for size in (16 * 1024, 64 * 1024):
            text = call_text(size, tool_format)
            totals[size] = seconds_to_stream(text, tool_format)
            per_delta = totals[size] / (len(text) / DELTA) * 1e6
            print(f"{tool_format:<12} {size // 1024:>3} KiB argument: {per_delta:6.2f} us per {DELTA}-char delta, "
                  f"{totals[size] * 1e3:7.1f} ms total (best of {ROUNDS})")
        print(f"{tool_format:<12} 64K/16K total time ratio: {totals[64 * 1024] / totals[16 * 1024]:.2f} "
              f"(linear is ~4; must be <= 4.5)")


if __name__ == "__main__":
    main()
