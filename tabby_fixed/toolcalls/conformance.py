"""Tool-call conformance cases: the bug shapes of the seed reports, with the calls and content a
correct server returns. Our parser is tested against them, and ``make upstream-check`` has a
stand-in model write each one through upstream TabbyAPI's chat-completion endpoint, stock and
patched.

Each case is a whole model response; most are a tool-call phase only (wrapper tags included).
``seed`` names the report whose shape it is: 000 string values that look like JSON and
indentation, 001 quoted names, 002 a bare ``<function=`` without ``<tool_call>``, 004 ``name=``
attributes and a nameless JSON parameter; ``-`` marks tool-call text that no call parses from,
which must reach the client as content.
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
    seed: str
    tool_format: str
    text: str
    calls: tuple[tuple[str, dict[str, Any]], ...]  # the expected (name, arguments), in order
    content: str | None = None  # the expected content (None: no text outside calls)


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
    *(ConformanceCase(f"qwen3_coder string {v}", "000", "qwen3_coder",
                      _qwen("write_file", [("path", "p"), ("content", v)]),
                      (("write_file", {"path": "p", "content": v}),)) for v in JSON_LOOKING),
    ConformanceCase("qwen3_coder indentation", "000", "qwen3_coder",
                    _qwen("write_file", [("path", "u.py"), ("content", CODE)]),
                    (("write_file", {"path": "u.py", "content": CODE}),)),
    ConformanceCase("qwen3_coder trailing blank line", "000", "qwen3_coder",
                    _qwen("write_file", [("path", "c.json"), ("content", '{"debug": true}\n')]),
                    (("write_file", {"path": "c.json", "content": '{"debug": true}\n'}),)),
    ConformanceCase("qwen3_coder typed by schema", "000", "qwen3_coder",
                    _qwen("probe", [("path", "123"), ("content", " indented\n [1, 2]\n"), ("n", "42"),
                                    ("flag", "True"), ("opt", "null")]),
                    (("probe", {"path": "123", "content": " indented\n [1, 2]\n", "n": 42, "flag": True,
                                "opt": "null"}),)),
    ConformanceCase("qwen3_coder quoted names", "001", "qwen3_coder",
                    _qwen('"Bash"', [("command", "ls")], '<parameter="{}">'),
                    (("Bash", {"command": "ls"}),)),
    ConformanceCase("qwen3_coder name attribute", "004", "qwen3_coder",
                    _qwen("Bash", [("command", "echo 1")], '<parameter name="{}">'),
                    (("Bash", {"command": "echo 1"}),)),
    ConformanceCase("qwen3_coder unquoted name attribute", "004", "qwen3_coder",
                    _qwen("Bash", [("command", "echo 1")], "<parameter name={}>"),
                    (("Bash", {"command": "echo 1"}),)),
    ConformanceCase("qwen3_coder nameless JSON parameter", "004", "qwen3_coder",
                    '<tool_call>\n<function=Bash>\n<parameter>\n{"command": "true", "timeout": 5}\n</parameter>\n'
                    "</function>\n</tool_call>", (("Bash", {"command": "true", "timeout": 5}),)),
    *(ConformanceCase(f"glm4_5 string {v}", "000", "glm4_5", _glm("write_file", [("path", "p"), ("content", v)]),
                      (("write_file", {"path": "p", "content": v}),)) for v in JSON_LOOKING),
    ConformanceCase("glm4_5 indentation", "000", "glm4_5", _glm("write_file", [("path", "u.py"), ("content", CODE)]),
                    (("write_file", {"path": "u.py", "content": CODE}),)),
    ConformanceCase("glm4_7 no newlines", "000", "glm4_5",
                    _glm("probe", [("content", "null"), ("n", "7"), ("flag", "false")], newlines=False),
                    (("probe", {"content": "null", "n": 7, "flag": False}),)),
    *(ConformanceCase(f"minimax_m2 string {v}", "000", "minimax_m2",
                      _minimax("write_file", [("path", "p"), ("content", v)]),
                      (("write_file", {"path": "p", "content": v}),)) for v in JSON_LOOKING),
    ConformanceCase("minimax_m2 indentation", "000", "minimax_m2",
                    _minimax("write_file", [("path", "u.py"), ("content", CODE)]),
                    (("write_file", {"path": "u.py", "content": CODE}),)),
    ConformanceCase("qwen3_coder bare function block", "002", "qwen3_coder",
                    "Doing it.\n<function=write_file>\n<parameter=path>\na.py\n</parameter>\n<parameter=content>\n"
                    f"{CODE}\n</parameter>\n</function>", (("write_file", {"path": "a.py", "content": CODE}),),
                    "Doing it.\n"),
    ConformanceCase("qwen3_coder <function= in prose", "002", "qwen3_coder",
                    "Write a call as `<function=write_file>` then the parameters.", (),
                    "Write a call as `<function=write_file>` then the parameters."),
    ConformanceCase("qwen3_coder unparseable block", "-", "qwen3_coder",
                    "Let me write it.\n<tool_call>\nwrite_file(content='x')\n</tool_call>", (),
                    "Let me write it.\n<tool_call>\nwrite_file(content='x')\n</tool_call>"),
    ConformanceCase("qwen3_coder call next to an unparseable block", "-", "qwen3_coder",
                    _qwen("write_file", [("path", "p"), ("content", "x")])
                    + "\n<tool_call>\nwrite_file(content='y')\n</tool_call>",
                    (("write_file", {"path": "p", "content": "x"}),),
                    "\n<tool_call>\nwrite_file(content='y')\n</tool_call>"),
    ConformanceCase("glm4_5 quoted names", "001", "glm4_5",
                    '<tool_call>"Bash"\n<arg_key>"command"</arg_key>\n<arg_value>ls</arg_value>\n</tool_call>',
                    (("Bash", {"command": "ls"}),)),
    ConformanceCase("glm4_5 nameless JSON value", "004", "glm4_5",
                    '<tool_call>Bash\n<arg_value>{"command": "true", "timeout": 5}</arg_value>\n</tool_call>',
                    (("Bash", {"command": "true", "timeout": 5}),)),
    ConformanceCase("minimax_m2 single-quoted names", "001", "minimax_m2",
                    "<minimax:tool_call>\n<invoke name='Bash'>\n<parameter name='command'>ls</parameter>\n"
                    "</invoke>\n</minimax:tool_call>", (("Bash", {"command": "ls"}),)),
    ConformanceCase("minimax_m2 unquoted name attributes", "004", "minimax_m2",
                    "<minimax:tool_call>\n<invoke name=Bash>\n<parameter name=command>echo 1</parameter>\n"
                    "</invoke>\n</minimax:tool_call>", (("Bash", {"command": "echo 1"}),)),
    ConformanceCase("minimax_m2 nameless JSON parameter", "004", "minimax_m2",
                    '<minimax:tool_call>\n<invoke name="Bash">\n<parameter>{"command": "true", "timeout": 5}'
                    "</parameter>\n</invoke>\n</minimax:tool_call>", (("Bash", {"command": "true", "timeout": 5}),)),
]


def mismatch(case: ConformanceCase, calls: list[tuple[str, str]], content: str | None = None) -> str | None:
    """Why the (name, arguments JSON) pairs and content a server returned are wrong for the case;
    None if right. Content that is only whitespace counts as none."""
    if (content if content and content.strip() else None) != case.content:
        return f"expected content {case.content!r}, got {content!r}"
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
