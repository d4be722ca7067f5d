"""Parser cost on adversarial model output: every shape should cost time linear in its length.

A model stuck in a repetition loop writes the same few characters for thousands of tokens; if
the parser rescans or recopies what it has already decided, such output costs quadratic time on
the event loop. Each shape below is a prefix plus a unit repeated to the wanted size, written in
each format's own tags. It is parsed whole (``parse``, as a non-streaming answer is) and streamed
in 16-character deltas, at 256 KiB and 1 MiB; the ratio of the two thread CPU times is about 4
when the cost is linear and about 16 when it is quadratic.

Run: ``make bench`` (or ``.venv/bin/python -m bench.parser_adversarial``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from tabby_fixed.toolcalls import ToolCallParser

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
    "x": {"type": "string"}, "n": {"type": "integer"}}}}}]
DELTA = 16


@dataclass(frozen=True)
class Tags:
    """How one format writes a call to ``f`` with a string parameter ``x``."""

    start: str  # the start marker
    call: str  # a call's opening, up to its first parameter
    param: str  # a parameter's opening tag
    param_close: str  # a parameter's closing tag
    header: str  # the prefix of a call header that reads a name


TAGS = {
    "qwen3_coder": Tags("<tool_call>", "<tool_call>\n<function=f>\n", "<parameter=x>\n", "</parameter>",
                        "<function="),
    "glm4_5": Tags("<tool_call>", "<tool_call>f\n", "<arg_key>x</arg_key>\n<arg_value>", "</arg_value>",
                   "<tool_call>"),
    "minimax_m2": Tags("<minimax:tool_call>", '<minimax:tool_call>\n<invoke name="f">\n', '<parameter name="x">',
                       "</parameter>", "<invoke name="),
    "hermes": Tags("<tool_call>", '<tool_call>\n{"name": "f", "arguments": {"x": "', "", '"', "<tool_call>{"),
}


@dataclass(frozen=True)
class Shape:
    name: str
    prefix: Callable[[Tags], str]
    unit: Callable[[Tags], str]
    formats: tuple[str, ...] = tuple(TAGS)

    def text(self, tool_format: str, size: int) -> str:
        tags = TAGS[tool_format]
        head, unit = self.prefix(tags), self.unit(tags)
        return head + unit * max(1, (size - len(head)) // len(unit))


SHAPES = [
    Shape("start marker repeated", lambda t: "", lambda t: t.start),
    Shape("start marker + junk", lambda t: "", lambda t: t.start + "x"),
    Shape("start marker + junk + <", lambda t: "", lambda t: t.start + "x<"),
    Shape("header prefix repeated", lambda t: "", lambda t: t.header),
    Shape("stray <", lambda t: "", lambda t: "<"),
    Shape("close-tag look-alike in a value", lambda t: t.call + t.param, lambda t: t.param_close + "x"),
    Shape("stray tag in a call body", lambda t: t.call, lambda t: "<x", ("qwen3_coder", "glm4_5", "minimax_m2")),
    Shape("whitespace after a call", lambda t: t.call + t.param + "1" + t.param_close + "\n" + (
        "}}" if t is TAGS["hermes"] else "</function>" if t is TAGS["qwen3_coder"] else
        "</invoke>" if t is TAGS["minimax_m2"] else ""), lambda t: " "),
    Shape("one long unclosed value", lambda t: t.call + t.param, lambda t: "xy"),
    Shape("JSON object opened again and again", lambda t: "", lambda t: "<tool_call>{", ("hermes",)),
    Shape("escaped quotes across nested starts", lambda t: '<tool_call>{"', lambda t: '<tool_call>{\\"', ("hermes",)),
    Shape("deep JSON nesting", lambda t: '<tool_call>{"name": "f", "arguments": ', lambda t: "[", ("hermes",)),
    Shape("closed invalid objects", lambda t: "", lambda t: '<tool_call>{"name": 1}', ("hermes",)),
]


def cases() -> list[tuple[Shape, str]]:
    return [(shape, tool_format) for shape in SHAPES for tool_format in shape.formats]


def parse_whole(text: str, tool_format: str) -> None:
    ToolCallParser(tool_format, TOOLS).parse(text)


def parse_streamed(text: str, tool_format: str, delta: int = DELTA) -> None:
    stream = ToolCallParser(tool_format, TOOLS).stream()
    for at in range(0, len(text), delta):
        stream.feed(text[at:at + delta])
    stream.close()


def cpu_seconds(parse: Callable[[str, str], None], text: str, tool_format: str, rounds: int = 1) -> float:
    """Best thread CPU time of ``rounds`` parses: other processes on the machine do not count."""
    best = float("inf")
    for _ in range(rounds):
        started = time.thread_time()
        parse(text, tool_format)
        best = min(best, time.thread_time() - started)
    return best


def main(sizes: tuple[int, int] = (256 * 1024, 1024 * 1024)) -> None:
    small, large = sizes
    print(f"{'shape':<38} {'format':<12} {'mode':<8} {small // 1024:>6} KiB {large // 1024:>6} KiB  ratio")
    worst = 0.0
    for shape, tool_format in cases():
        for mode, parse in (("whole", parse_whole), ("streamed", parse_streamed)):
            times = [cpu_seconds(parse, shape.text(tool_format, size), tool_format, rounds=2) for size in sizes]
            ratio = times[1] / max(times[0], 1e-9)
            worst = max(worst, ratio)
            print(f"{shape.name:<38} {tool_format:<12} {mode:<8} {times[0] * 1e3:8.1f} ms {times[1] * 1e3:8.1f} ms"
                  f"  {ratio:5.2f}", flush=True)
    print(f"worst growth per {large // small}x: {worst:.2f} (linear is about {large // small})")


if __name__ == "__main__":
    main(tuple(int(arg) * 1024 for arg in sys.argv[1:3]) if len(sys.argv) > 2 else (256 * 1024, 1024 * 1024))
