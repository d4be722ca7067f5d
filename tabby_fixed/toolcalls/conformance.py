"""Tool-call conformance cases: the bug shapes of the seed reports, with the arguments a correct
parser returns. Our parser is tested against them, and ``make upstream-check`` runs them through
upstream TabbyAPI's patched parsers.

Each case is the text of the tool-call phase only (wrapper tags included), because that is all
upstream hands its parsers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

_STRING = {"type": "string"}


def _tool(name: str, **properties: Any) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": name,
                                             "parameters": {"type": "object", "properties": properties}}}


TOOLS = [
    _tool("write_file", path=_STRING, content=_STRING),
    _tool("probe", path=_STRING, content=_STRING, n={"type": "integer"}, flag={"type": "boolean"},
          opt={"type": ["string", "null"]}),
    _tool("Bash", command=_STRING, timeout={"type": "number"}),
]


@dataclass(frozen=True)
class ConformanceCase:
    name: str
    tool_format: str
    text: str
    calls: tuple[tuple[str, dict[str, Any]], ...]  # the expected (name, arguments), in order


def _qwen(function: str, params: list[tuple[str, str]], tag: str = "<parameter={}>") -> str:
    body = "".join(f"{tag.format(k)}\n{v}\n</parameter>\n" for k, v in params)
    return f"<tool_call>\n<function={function}>\n{body}</function>\n</tool_call>"


def _glm(function: str, params: list[tuple[str, str]], newlines: bool = True) -> str:
    gap = "\n" if newlines else ""
    body = "".join(f"<arg_key>{k}</arg_key>{gap}<arg_value>{v}</arg_value>{gap}" for k, v in params)
    return f"<tool_call>{function}{gap}{body}</tool_call>"


def _minimax(function: str, params: list[tuple[str, str]]) -> str:
    body = "".join(f'<parameter name="{k}">{v}</parameter>\n' for k, v in params)
    return f'<minimax:tool_call>\n<invoke name="{function}">\n{body}</invoke>\n</minimax:tool_call>'


JSON_LOOKING = ["123", "true", "null", "[1, 2]", '{"a": 1}']
CODE = "    return x\n"

CASES: list[ConformanceCase] = [
    *(ConformanceCase(f"qwen3_coder string {v}", "qwen3_coder", _qwen("write_file", [("path", "p"), ("content", v)]),
                      (("write_file", {"path": "p", "content": v}),)) for v in JSON_LOOKING),
    ConformanceCase("qwen3_coder indentation", "qwen3_coder",
                    _qwen("write_file", [("path", "u.py"), ("content", CODE)]),
                    (("write_file", {"path": "u.py", "content": CODE}),)),
    ConformanceCase("qwen3_coder trailing blank line", "qwen3_coder",
                    _qwen("write_file", [("path", "c.json"), ("content", '{"debug": true}\n')]),
                    (("write_file", {"path": "c.json", "content": '{"debug": true}\n'}),)),
    ConformanceCase("qwen3_coder typed by schema", "qwen3_coder",
                    _qwen("probe", [("path", "123"), ("content", " indented\n [1, 2]\n"), ("n", "42"),
                                    ("flag", "True"), ("opt", "null")]),
                    (("probe", {"path": "123", "content": " indented\n [1, 2]\n", "n": 42, "flag": True,
                                "opt": "null"}),)),
    ConformanceCase("qwen3_coder quoted names", "qwen3_coder", _qwen('"Bash"', [("command", "ls")], '<parameter="{}">'),
                    (("Bash", {"command": "ls"}),)),
    ConformanceCase("qwen3_coder name attribute", "qwen3_coder",
                    _qwen("Bash", [("command", "echo 1")], '<parameter name="{}">'),
                    (("Bash", {"command": "echo 1"}),)),
    ConformanceCase("qwen3_coder unquoted name attribute", "qwen3_coder",
                    _qwen("Bash", [("command", "echo 1")], "<parameter name={}>"),
                    (("Bash", {"command": "echo 1"}),)),
    ConformanceCase("qwen3_coder nameless JSON parameter", "qwen3_coder",
                    '<tool_call>\n<function=Bash>\n<parameter>\n{"command": "true", "timeout": 5}\n</parameter>\n'
                    "</function>\n</tool_call>", (("Bash", {"command": "true", "timeout": 5}),)),
    *(ConformanceCase(f"glm4_5 string {v}", "glm4_5", _glm("write_file", [("path", "p"), ("content", v)]),
                      (("write_file", {"path": "p", "content": v}),)) for v in JSON_LOOKING),
    ConformanceCase("glm4_5 indentation", "glm4_5", _glm("write_file", [("path", "u.py"), ("content", CODE)]),
                    (("write_file", {"path": "u.py", "content": CODE}),)),
    ConformanceCase("glm4_7 no newlines", "glm4_5",
                    _glm("probe", [("content", "null"), ("n", "7"), ("flag", "false")], newlines=False),
                    (("probe", {"content": "null", "n": 7, "flag": False}),)),
    *(ConformanceCase(f"minimax_m2 string {v}", "minimax_m2", _minimax("write_file", [("path", "p"), ("content", v)]),
                      (("write_file", {"path": "p", "content": v}),)) for v in JSON_LOOKING),
    ConformanceCase("minimax_m2 indentation", "minimax_m2",
                    _minimax("write_file", [("path", "u.py"), ("content", CODE)]),
                    (("write_file", {"path": "u.py", "content": CODE}),)),
]


def mismatch(case: ConformanceCase, calls: list[tuple[str, str]]) -> str | None:
    """Why the (name, arguments JSON) pairs a parser returned are wrong for the case; None if right."""
    got = []
    for name, arguments in calls:
        try:
            got.append((name, json.loads(arguments)))
        except (TypeError, ValueError):
            return f"arguments of {name} are not JSON: {arguments!r}"
    want = list(case.calls)
    if got != want or [json.dumps(a) for _, a in got] != [json.dumps(a) for _, a in want]:
        return f"expected {want!r}, got {got!r}"
    return None
