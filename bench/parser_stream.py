"""Streaming parser cost per delta, for every format: one call whose string argument is 16 KiB,
then 64 KiB, of code.

Deltas are 4 characters, about what a model emits per token. Linear parsing means the cost per
delta does not grow with the argument's length, so the 64K/16K ratio of total time is about 4.
Each format writes the call the way its template does (the writers of the format tests). XML
formats, and JSON formats whose header names the call (kimi_k2, mistral, harmony, deepseek_v31),
stream string arguments as they arrive; hermes, mistral_old and gemma4 hold the call until its
body is complete. Channelled formats (harmony, muse_glimmer) go through
their channel splitter first, as in the server. Time is the thread's CPU time, so other processes
on the machine do not count.
Run: ``make bench`` (or ``.venv/bin/python -m bench.parser_stream``).
"""

from __future__ import annotations

import time

from tabby_fixed.reasoning import ChannelSplitter
from tabby_fixed.toolcalls import FORMATS, ContentDelta, ToolCallParser, ToolCallStream
from tests.toolcalls.test_formats import CASES, FormatCase

TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": {"type": "object", "properties": {
    "path": {"type": "string"}, "content": {"type": "string"}}}}}]
LINE = '    if value < limit:  # compare </param and <tag> look-alikes, "quoted"\n        total += value\n'
DELTA = 4
ROUNDS = 3
LIMIT = 4.5


def code(size: int) -> str:
    return (LINE * (size // len(LINE) + 1))[:size]


#: The message envelope around a call, for formats whose answer is channelled messages.
ENVELOPE = {"muse_glimmer": ("<|start|>assistant to=write_file<|message|>", "<|eom|>")}


def call_text(size: int, case: FormatCase) -> str:
    before, after = ENVELOPE.get(case.name, ("", ""))
    return before + case.write([("write_file", {"path": "src/app.py", "content": code(size)})]) + after


def feed_content(stream: ToolCallStream, pieces: list) -> None:
    for piece in pieces:
        if isinstance(piece, ContentDelta):
            stream.feed(piece.text)


def seconds_to_stream(text: str, tool_format: str) -> float:
    parser = ToolCallParser(tool_format, TOOLS)
    best = float("inf")
    deltas = [text[at:at + DELTA] for at in range(0, len(text), DELTA)]
    for _ in range(ROUNDS):
        stream = parser.stream()
        channels = FORMATS[tool_format].channels
        splitter = ChannelSplitter(channels) if channels else None
        started = time.thread_time()
        for delta in deltas:
            feed_content(stream, splitter.feed(delta) if splitter else [ContentDelta(delta)])
        feed_content(stream, splitter.close() if splitter else [])
        stream.close()
        best = min(best, time.thread_time() - started)
        call = stream.result.tool_calls[0]
        assert call.complete and call.arguments["content"] == code(len(call.arguments["content"])), tool_format
    return best


def main() -> None:
    print(f"{'format':<14} {'16 KiB us/delta':>15} {'64 KiB us/delta':>15} {'64K/16K':>8}  (linear ~4, limit {LIMIT})")
    worst = 0.0
    for case in CASES:
        seconds_to_stream(call_text(4096, case), case.name)  # warm up
        totals, per_delta = {}, {}
        for size in (16 * 1024, 64 * 1024):
            text = call_text(size, case)
            totals[size] = seconds_to_stream(text, case.name)
            per_delta[size] = totals[size] / (len(text) / DELTA) * 1e6
        ratio = totals[64 * 1024] / totals[16 * 1024]
        worst = max(worst, ratio)
        print(f"{case.name:<14} {per_delta[16 * 1024]:15.2f} {per_delta[64 * 1024]:15.2f} {ratio:8.2f}"
              f"{'' if ratio <= LIMIT else '  NOT LINEAR'}")
    print(f"worst ratio {worst:.2f} ({'all linear' if worst <= LIMIT else 'over the limit'})")


if __name__ == "__main__":
    main()
