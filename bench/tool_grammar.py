"""What the tool-call grammar costs a request, per format: building it from the request's tools
and validating it (done once per request, on the request's thread), and checking an answer
against it token by token (the scripted engine; a GPU engine pays this per sampled token inside
LLGuidance's mask computation instead). Tools: 1, 8 and 64 tools of four parameters each; the
answer: one call with a 4 KiB string value, cut into one token per byte. Figures are thread CPU
time; the per-tool ratio shows whether the cost grows linearly with the number of tools.

Run: ``make bench`` (or ``.venv/bin/python -m bench.tool_grammar``).
"""

from __future__ import annotations

import time

from tabby_fixed.engine.base import Constraint
from tabby_fixed.sampling.constraints import compiled
from tabby_fixed.sampling.grammar_check import byte_ids, first_violation, ll_tokenizer
from tabby_fixed.sampling.tool_grammar import tool_call_grammar
from tabby_fixed.toolcalls.formats import get_format

FORMATS = ["qwen3_coder", "glm4_5", "minimax_m2", "hermes"]
VALUE = "x = 1  # a line of code\n" * 170  # about 4 KiB
CALLS = {
    "qwen3_coder": f"<tool_call>\n<function=t0>\n<parameter=text>\n{VALUE}\n</parameter>\n</function>\n</tool_call>",
    "glm4_5": f"<tool_call>t0\n<arg_key>text</arg_key>\n<arg_value>{VALUE}</arg_value>\n</tool_call>",
    "minimax_m2": f'<minimax:tool_call>\n<invoke name="t0">\n<parameter name="text">{VALUE}</parameter>\n</invoke>\n'
                  "</minimax:tool_call>",
    "hermes": '<tool_call>\n{"name": "t0", "arguments": {"text": "' + VALUE.replace("\n", "\\n") + '"}}\n</tool_call>',
}


def tools(count: int) -> list[dict]:
    properties = {"text": {"type": "string"}, "path": {"type": "string"}, "n": {"type": "integer"},
                  "flags": {"type": "array", "items": {"type": "string"}}}
    return [{"type": "function", "function": {"name": f"t{i}", "parameters": {"type": "object",
                                                                               "properties": properties}}}
            for i in range(count)]


def cpu(action, repeat: int = 5) -> float:
    """Best thread CPU seconds of a few runs."""
    best = float("inf")
    for _ in range(repeat):
        started = time.thread_time()
        action()
        best = min(best, time.thread_time() - started)
    return best


def main() -> None:
    tokenizer = ll_tokenizer(None)
    print(f"{'format':<12} {'tools':>5} {'build+validate ms':>18} {'per tool ms':>12} {'check 4 KiB call ms':>20}")
    for name in FORMATS:
        syntax = get_format(name).syntax
        ids = byte_ids(CALLS[name])
        for count in (1, 8, 64):
            listed = tools(count)

            def build(listed=listed, syntax=syntax) -> str:
                return compiled(Constraint("tools", tool_call_grammar(syntax, listed, "required", True, {}))).grammar

            grammar = build()
            built = cpu(build)
            checked = cpu(lambda grammar=grammar, ids=ids: first_violation(grammar, tokenizer, ids, True), 3)
            assert first_violation(grammar, tokenizer, ids, True) is None
            print(f"{name:<12} {count:>5} {built * 1000:>18.2f} {built * 1000 / count:>12.3f} {checked * 1000:>20.2f}")


if __name__ == "__main__":
    main()
