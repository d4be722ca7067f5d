"""Parser cost on adversarial model output: every shape should cost time linear in its length.

A model stuck in a repetition loop writes the same few characters for thousands of tokens; if
the parser rescans or recopies what it has already decided, such output costs quadratic time on
the event loop. Each shape below is a prefix plus a unit repeated to the wanted size, written in
each format's own tags (channelled formats, harmony and muse_glimmer, go through their channel
splitter first, as in the server). It is parsed whole (in one piece, as a non-streaming answer
is) and streamed in 16-character deltas, at 256 KiB and 1 MiB; the ratio of the two thread CPU
times is about 4 when the cost is linear and about 16 when it is quadratic.

Run: ``make bench`` (or ``.venv/bin/python -m bench.parser_adversarial``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from tabby_fixed.output import OutputParser
from tabby_fixed.toolcalls import FORMATS, ToolCallParser, ToolCallStream

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
    end: str  # what closes the call after its last parameter


#: JSON-bodied formats whose ``call`` ends with the arguments object's ``{`` (values are JSON).
JSON_ARGS = ("kimi_k2", "deepseek_v31", "mistral", "mistral_old", "harmony", "gemma4")
#: Formats whose call body is tags (a stray tag there is not a parameter).
TAGGED = ("qwen3_coder", "glm4_5", "glm4_7", "minimax_m2", "seed_oss", "deepseek_v32", "deepseek_v4", "hy3",
          "hy3_preview", "muse_glimmer")


def _json(start: str, call: str, header: str, end: str) -> Tags:
    return Tags(start, call, '"x": "', '"', header, end)


def _dsml(block: str) -> Tags:
    return Tags(f"<｜DSML｜{block}>", f'<｜DSML｜{block}>\n<｜DSML｜invoke name="f">\n',
                '<｜DSML｜parameter name="x" string="true">', "</｜DSML｜parameter>", "<｜DSML｜invoke name=",
                "\n</｜DSML｜invoke>")


def _hy3(suffix: str) -> Tags:
    return Tags(f"<tool_calls{suffix}>", f"<tool_calls{suffix}>\n<tool_call{suffix}>f<tool_sep{suffix}>\n",
                f"<arg_key{suffix}>x</arg_key{suffix}>\n<arg_value{suffix}>", f"</arg_value{suffix}>",
                f"<tool_call{suffix}>", f"\n</tool_call{suffix}>")


TAGS = {
    "qwen3_coder": Tags("<tool_call>", "<tool_call>\n<function=f>\n", "<parameter=x>\n", "</parameter>",
                        "<function=", "\n</function>"),
    "glm4_5": Tags("<tool_call>", "<tool_call>f\n", "<arg_key>x</arg_key>\n<arg_value>", "</arg_value>",
                   "<tool_call>", "\n"),
    "glm4_7": Tags("<tool_call>", "<tool_call>f", "<arg_key>x</arg_key><arg_value>", "</arg_value>",
                   "<tool_call>", ""),
    "minimax_m2": Tags("<minimax:tool_call>", '<minimax:tool_call>\n<invoke name="f">\n', '<parameter name="x">',
                       "</parameter>", "<invoke name=", "\n</invoke>"),
    "hermes": Tags("<tool_call>", '<tool_call>\n{"name": "f", "arguments": {"x": "', "", '"', "<tool_call>{",
                   "\n}}"),
    "seed_oss": Tags("<seed:tool_call>", "<seed:tool_call>\n<function=f>\n", "<parameter=x>", "</parameter>",
                     "<function=", "\n</function>"),
    "deepseek_v32": _dsml("function_calls"),
    "deepseek_v4": _dsml("tool_calls"),
    "hy3": _hy3(":opensource"),
    "hy3_preview": _hy3(""),
    "muse_glimmer": Tags("<atem:function_calls>", '<atem:function_calls>\n<atem:invoke name="f">\n',
                         '<atem:parameter name="x">', "</atem:parameter>", "<atem:invoke name=",
                         "\n</atem:invoke>"),
    "kimi_k2": _json("<|tool_calls_section_begin|>",
                     "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0<|tool_call_argument_begin|>{",
                     "<|tool_calls_section_begin|><|tool_call_begin|>functions.", "}<|tool_call_end|>"),
    "deepseek_v31": _json("<｜tool▁calls▁begin｜>", "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>f<｜tool▁sep｜>{",
                          "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>", "}<｜tool▁call▁end｜>"),
    "mistral": _json("[TOOL_CALLS]", "[TOOL_CALLS]f[ARGS]{", "[TOOL_CALLS]f[CALL_ID]", "}"),
    "mistral_old": _json("[TOOL_CALLS]", '[TOOL_CALLS][{"name": "f", "arguments": {', "[TOOL_CALLS][{", "}}]"),
    "harmony": _json("<|start|>", "<|start|>assistant to=functions.f<|channel|>commentary json<|message|>{",
                     "<|start|>assistant<|channel|>commentary to=functions.", "}<|call|>"),
    "gemma4": Tags("<|tool_call>", "<|tool_call>call:f{", 'x:<|"|>', '<|"|>', "<|tool_call>call:", "}<tool_call|>"),
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
    Shape("call opened again and again", lambda t: "", lambda t: t.call),
    Shape("stray <", lambda t: "", lambda t: "<"),
    Shape("close-tag look-alike in a value", lambda t: t.call + t.param, lambda t: t.param_close + "x"),
    Shape("escapes in a value", lambda t: t.call + t.param, lambda t: "\\n\\u00e9\\ud83d\\ude00"),
    Shape("stray tag in a call body", lambda t: t.call, lambda t: "<x", TAGGED),
    Shape("whitespace after a call", lambda t: t.call + t.param + "1" + t.param_close + t.end, lambda t: " "),
    Shape("one long unclosed value", lambda t: t.call + t.param, lambda t: "xy"),
    Shape("one long number", lambda t: t.call + '"n": ', lambda t: "1", JSON_ARGS),
    Shape("nested JSON arguments opened again and again", lambda t: t.call + '"n": ', lambda t: "[", JSON_ARGS),
    Shape("JSON object opened again and again", lambda t: "", lambda t: "<tool_call>{", ("hermes",)),
    Shape("escaped quotes across nested starts", lambda t: '<tool_call>{"', lambda t: '<tool_call>{\\"', ("hermes",)),
    Shape("deep JSON nesting", lambda t: '<tool_call>{"name": "f", "arguments": ', lambda t: "[", ("hermes",)),
    Shape("closed invalid objects", lambda t: "", lambda t: '<tool_call>{"name": 1}', ("hermes",)),
    Shape("closed invalid calls", lambda t: "", lambda t: t.call + "]" + t.end, JSON_ARGS),
    Shape("message tokens repeated", lambda t: "", lambda t: "<|channel|><|message|>", ("harmony",)),
    Shape("message headers repeated", lambda t: "", lambda t: "<|start|>assistant to=functions.f<|channel|>",
          ("harmony",)),
    Shape("tool messages opened again and again", lambda t: "",
          lambda t: "<|start|>assistant to=f<|message|><atem:function_calls>", ("muse_glimmer",)),
    Shape("calls in a body opened again and again", lambda t: "", lambda t: t.call + t.header,
          ("gemma4", "mistral_old", "kimi_k2", "deepseek_v31")),
]


def cases() -> list[tuple[Shape, str]]:
    return [(shape, tool_format) for shape in SHAPES for tool_format in shape.formats]


def _parser(tool_format: str) -> ToolCallStream | OutputParser:
    """The tool-call parser; for channelled formats (harmony) behind their channel splitter, as
    the server runs them."""
    parser = ToolCallParser(tool_format, TOOLS)
    channels = FORMATS[tool_format].channels
    return OutputParser(tool_parser=parser, channels=channels) if channels else parser.stream()


def parse_whole(text: str, tool_format: str) -> None:
    parse_streamed(text, tool_format, max(1, len(text)))


def parse_streamed(text: str, tool_format: str, delta: int = DELTA) -> None:
    stream = _parser(tool_format)
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
