"""``tabby-fixed probe``: does a server deliver tool-call arguments exactly as the model wrote them?

A coding-agent benchmark on a server that corrupts tool arguments measures the parser and the
model together, with no way to tell which failed. A dozen requests tell: string values that are
also valid JSON (``123``, ``true``, ``null``, ``[1, 2]``, ``{"a": 1}``), code with indentation and
a trailing newline, typed parameters, unicode, text that looks like a closing tag, two calls in
one turn; each asked without and with streaming, and compared without stripping anything.

Each case and mode gets one verdict:

- ``PASS``: the call arrived with exactly the expected arguments, types and whitespace included;
  in streaming the fragments reassembled to that same JSON.
- ``FAIL``: a failure a server causes: a string that became a number, boolean, null, list or
  object; lost whitespace; quoted or missing keys; arguments that are not JSON; a call left in
  the text; a stream whose fragments do not reassemble; ``finish_reason`` other than ``tool_calls``.
- ``MODEL``: the model did not call the tool, or changed a value in a way no parser would (it is
  asked again, up to ``--retries`` times).

Works against any OpenAI-compatible server; the exit code is 0 only when nothing FAILed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import asdict, dataclass
from typing import Any, Literal

import httpx

from .probe_apis import APIS
from .probe_apis import ApiReply as _Reply  # calls as (name, arguments text), content, finish reason, fault

Result = Literal["PASS", "FAIL", "MODEL"]
_STRING = {"type": "string"}
TOOLS = [
    {"type": "function", "function": {
        "name": "write_file", "description": "Write text to a file, replacing its contents.",
        "parameters": {"type": "object", "properties": {"path": _STRING, "content": _STRING},
                       "required": ["path", "content"]}}},
    {"type": "function", "function": {
        "name": "edit_file", "description": "Replace old_string with new_string in a file.",
        "parameters": {"type": "object", "properties": {"path": _STRING, "old_string": _STRING, "new_string": _STRING},
                       "required": ["path", "old_string", "new_string"]}}},
    {"type": "function", "function": {
        "name": "configure", "description": "Store settings.",
        "parameters": {"type": "object", "properties": {
            "count": {"type": "integer"}, "enabled": {"type": "boolean"},
            "tags": {"type": "array", "items": _STRING}, "options": {"type": "object"},
            "note": {"type": ["string", "null"]}}}}},
]
#: Markup that means a call came back as text: the server did not parse it.
_CALL_MARKUP = ("<tool_call>", "<function=", "<invoke", "<minimax:tool_call>", "<arg_key>", "[TOOL_CALLS]",
                "<|tool_call")


@dataclass(frozen=True)
class ProbeCase:
    name: str
    calls: tuple[tuple[str, dict[str, Any]], ...]  # the expected calls, in order

    def prompt(self) -> str:
        lines = [f"[tabby-fixed probe: {self.name}] This is a test of tool calling. Make exactly "
                 f"{'these tool calls' if len(self.calls) > 1 else 'this tool call'}, with the arguments exactly as "
                 "given in JSON below: every string character for character (keep all spaces and newlines, do not "
                 "reinterpret strings that look like numbers or JSON), every other value with its JSON type. Write "
                 "nothing else."]
        lines += [f"Call {tool} with arguments {json.dumps(arguments, ensure_ascii=False)}"
                  for tool, arguments in self.calls]
        return "\n".join(lines)


def _write(path: str, content: str) -> tuple[str, dict[str, Any]]:
    return ("write_file", {"path": path, "content": content})


CASES = [
    ProbeCase("string-123", (_write("probe.txt", "123"),)),
    ProbeCase("string-true", (_write("probe.txt", "true"),)),
    ProbeCase("string-null", (_write("probe.txt", "null"),)),
    ProbeCase("string-list", (_write("probe.json", "[1, 2]"),)),
    ProbeCase("string-object", (_write("probe.json", '{"a": 1}'),)),
    ProbeCase("indented-code", (_write("util.py", "    return x\n"),)),
    ProbeCase("trailing-blank-line", (_write("notes.md", "# Notes\n\n"),)),
    ProbeCase("nullable-text-null", (("configure", {"note": "null"}),)),
    ProbeCase("typed-values", (("configure", {"count": 3, "enabled": True, "tags": ["a", "b"],
                                              "options": {"mode": "fast", "level": 2}}),)),
    ProbeCase("unicode", (_write("données/日本.txt", "naïve café 🙂 — “quoted”\n"),)),
    ProbeCase("closing-tag-text", (_write("tags.py", "end = '</parameter>' + '</function>'\n"),)),
    ProbeCase("two-calls", (_write("a.txt", "first\n"),
                            ("edit_file", {"path": "b.py", "old_string": "    x = 1\n", "new_string": "    x = 2\n"}))),
]


class ServerRefused(Exception):
    """The server cannot be probed at all (unreachable, or the key is refused): one error for the
    whole run, carrying the server's own message, instead of a FAIL for every case."""


def _refusal(error: httpx.HTTPError, base_url: str) -> ServerRefused | None:
    """A ServerRefused when this failure would repeat for every case; None for a per-case failure."""
    if isinstance(error, httpx.ConnectError | httpx.ConnectTimeout):
        return ServerRefused(f"cannot connect to {base_url}: {error}; is the server running, and is --base-url right?")
    if isinstance(error, httpx.HTTPStatusError) and error.response.status_code in (401, 403):
        return ServerRefused(f"{base_url} refused the API key (HTTP {error.response.status_code}): "
                             f"{_server_message(error.response)}; pass the server's key with --api-key")
    return None


def _server_message(response: httpx.Response) -> str:
    """The message in an error body (OpenAI's ``error.message``, FastAPI's ``detail``), else its text."""
    try:
        response.read()
    except httpx.StreamError:
        return "(no message: the response was already closed)"
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()
    if isinstance(body, dict):
        error = body.get("error")
        message = error.get("message") if isinstance(error, dict) else error
        return str(message or body.get("detail") or body).strip()
    return str(body).strip()


@dataclass
class Verdict:
    case: str
    mode: Literal["plain", "stream"]
    result: Result
    detail: str = ""
    expected: Any = None
    received: Any = None
    attempts: int = 1




def visible(value: Any) -> str:
    """A value as JSON with spaces shown as '·', so whitespace differences can be seen."""
    return json.dumps(value, ensure_ascii=False).replace(" ", "·")


def _same(want: Any, got: Any) -> bool:
    """Equal, with JSON types compared too (``True`` is not ``1``, ``1.0`` is not ``1``)."""
    if isinstance(want, dict):
        return isinstance(got, dict) and want.keys() == got.keys() and all(_same(v, got[k]) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(got, list) and len(want) == len(got) and all(map(_same, want, got))
    return type(want) is type(got) and want == got


def _parser_damage(want: Any, got: Any) -> str | None:
    """How a parser, not a model, would have turned want into got; None if none would."""
    if isinstance(want, str):
        if not isinstance(got, str):
            try:
                if _same(json.loads(want.strip()), got):
                    return f"the string became {type(got).__name__ if got is not None else 'null'}"
            except ValueError:
                pass
            return None
        if got != want and got in {want.strip(), want.strip("\n"), want.rstrip(), want.lstrip(), want.strip(" ")}:
            return "whitespace was lost"
        return None
    if isinstance(got, str):
        try:
            if _same(want, json.loads(got)):
                return "the value arrived as a string"
        except ValueError:
            return "the value arrived as a string" if got.strip().lower() == str(want).lower() else None
    return None


def judge(case: ProbeCase, reply: _Reply) -> tuple[Result, str, Any]:
    """The verdict for one reply; the third item is what was received, for the report."""
    received = [{"name": n, "arguments": a} for n, a in reply.calls]
    if reply.problem:
        return "FAIL", reply.problem, received
    if len(reply.calls) < len(case.calls):
        if any(marker in reply.content for marker in _CALL_MARKUP):
            return "FAIL", "the tool call came back as text in content", reply.content
        return "MODEL", f"{len(reply.calls)} of {len(case.calls)} expected calls", received or reply.content
    if len(reply.calls) > len(case.calls):
        return "MODEL", f"{len(reply.calls)} calls, {len(case.calls)} expected", received
    for (tool, want), (name, text) in zip(case.calls, reply.calls, strict=True):
        if name != tool:
            bare = name.strip().strip("\"'")
            return ("FAIL", f"tool name {name!r} arrived quoted", received) if bare == tool else \
                ("MODEL", f"called {name!r} instead of {tool!r}", received)
        try:
            arguments = json.loads(text)
        except (TypeError, ValueError):
            return "FAIL", f"the arguments of {tool} are not valid JSON", received
        if not isinstance(arguments, dict):
            return "FAIL", f"the arguments of {tool} are not a JSON object", received
        for key, value in want.items():
            if key not in arguments:
                quoted = [k for k in arguments if k.strip().strip("\"'") == key]
                return "FAIL", f"{tool}.{key} " + ("arrived with a quoted key" if quoted else "is missing"), received
            if not _same(value, arguments[key]):
                damage = _parser_damage(value, arguments[key])
                return ("FAIL" if damage else "MODEL"), f"{tool}.{key}: {damage or 'the model changed the value'}: " \
                    f"expected {visible(value)}, received {visible(arguments[key])}", received
    if reply.finish_reason != "tool_calls":
        return "FAIL", f"finish_reason was {reply.finish_reason!r}, not 'tool_calls'", received
    return "PASS", "", received


class Probe:
    """One server, one model: asks each case in each mode and keeps the verdicts."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, retries: int = 2,
                 timeout: float = 300, api: str = "chat") -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        if api == "messages":  # Anthropic's own key header and version, as its clients send them
            headers.update({"x-api-key": api_key, "anthropic-version": "2023-06-01"} if api_key else
                           {"anthropic-version": "2023-06-01"})
        self._api = api
        self._base_url = base_url
        self._client = httpx.Client(base_url=base_url.rstrip("/"), headers=headers, timeout=timeout)
        self._model = model
        self._retries = retries

    def close(self) -> None:
        self._client.close()

    def wait(self, seconds: float) -> bool:
        """Whether the server answers (any HTTP status) within the time: for scripts that just started it."""
        deadline = time.monotonic() + seconds
        while True:
            try:
                self._client.get("/models", timeout=2)
                return True
            except httpx.TransportError:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(0.2)

    def run(self, cases: list[ProbeCase]) -> list[Verdict]:
        return [self.check(case, mode) for case in cases for mode in ("plain", "stream")]

    def check(self, case: ProbeCase, mode: Literal["plain", "stream"]) -> Verdict:
        for attempt in range(1, self._retries + 2):
            try:
                reply = self._ask(case, mode)
            except httpx.HTTPError as error:
                refused = _refusal(error, self._base_url)
                if refused:
                    raise refused from error
                return Verdict(case.name, mode, "FAIL", f"the request failed: {error}", attempts=attempt)
            except (ValueError, KeyError, TypeError, IndexError) as error:
                return Verdict(case.name, mode, "FAIL", f"the request failed: {error}", attempts=attempt)
            result, detail, received = judge(case, reply)
            if result != "MODEL" or attempt > self._retries:
                return Verdict(case.name, mode, result, detail, [{"name": t, "arguments": a} for t, a in case.calls],
                               received, attempt)
        raise AssertionError("unreachable")

    def _body(self, case: ProbeCase, stream: bool) -> dict[str, Any]:
        return {"model": self._model, "messages": [{"role": "user", "content": case.prompt()}], "tools": TOOLS,
                "temperature": 0, "max_tokens": 1024, "stream": stream}

    def _ask(self, case: ProbeCase, mode: str) -> _Reply:
        if self._api in APIS:
            body, ask = APIS[self._api]
            return ask(self._client, body(self._model, case.prompt(), TOOLS, mode == "stream"))
        if mode == "plain":
            response = self._client.post("/chat/completions", json=self._body(case, False))
            response.raise_for_status()
            choice = response.json()["choices"][0]
            message = choice["message"]
            calls = [(c["function"]["name"], c["function"]["arguments"]) for c in message.get("tool_calls") or []]
            bad = [a for _, a in calls if not isinstance(a, str)]
            return _Reply(calls, message.get("content") or "", choice.get("finish_reason"),
                          "arguments were sent as a JSON object, not a string" if bad else None)
        return self._ask_streaming(case)

    def _ask_streaming(self, case: ProbeCase) -> _Reply:
        reply, calls, content = _Reply(), {}, []
        with self._client.stream("POST", "/chat/completions", json=self._body(case, True)) as response:
            response.raise_for_status()
            for line in response.iter_lines():
                if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                    continue
                chunk = json.loads(line[5:])
                if "error" in chunk:
                    reply.problem = f"the stream reported an error: {chunk['error'].get('message')}"
                    break
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    content.append(delta.get("content") or "")
                    for part in delta.get("tool_calls") or []:
                        reply.problem = reply.problem or _merge_fragment(calls, part)
                    reply.finish_reason = choice.get("finish_reason") or reply.finish_reason
        reply.content = "".join(content)
        reply.calls = [(calls[i]["name"], "".join(calls[i]["arguments"])) for i in sorted(calls)]
        if reply.calls and sorted(calls) != list(range(len(calls))):
            reply.problem = reply.problem or f"tool call indexes {sorted(calls)} do not count up from 0"
        return reply


def _merge_fragment(calls: dict[int, dict[str, Any]], part: dict[str, Any]) -> str | None:
    """Add one streamed tool-call fragment, as OpenAI clients do; a protocol fault is returned."""
    index = part.get("index")
    if not isinstance(index, int):
        return "a streamed tool call has no integer index"
    function = part.get("function") or {}
    arguments = function.get("arguments")
    if arguments is not None and not isinstance(arguments, str):
        return "streamed arguments were a JSON object, not text"
    call = calls.setdefault(index, {"name": "", "arguments": [], "id": None})
    if function.get("name"):
        if call["name"]:
            return "the tool name was sent more than once (clients concatenate it)"
        call["name"] = function["name"]
    if part.get("id"):
        if call["id"]:
            return "the tool call id was sent more than once (clients concatenate it)"
        call["id"] = part["id"]
    call["arguments"].append(arguments or "")
    return None


def select(only: str | None) -> list[ProbeCase]:
    if not only:
        return list(CASES)
    wanted = [name.strip() for name in only.split(",") if name.strip()]
    known = {case.name: case for case in CASES}
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise ValueError(f"unknown cases {', '.join(unknown)}; known: {', '.join(known)}")
    return [known[name] for name in wanted]


def _print_table(verdicts: list[Verdict]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Tool-call argument probe")
    for column in ("case", "mode", "result", "detail"):
        table.add_column(column, overflow="fold")
    colour = {"PASS": "green", "FAIL": "bold red", "MODEL": "yellow"}
    for v in verdicts:
        table.add_row(v.case, v.mode, f"[{colour[v.result]}]{v.result}[/]", v.detail)
    console = Console()
    console.print(table)
    counts = {r: sum(v.result == r for v in verdicts) for r in ("PASS", "FAIL", "MODEL")}
    console.print(f"{counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['MODEL']} MODEL")


def add_probe_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--base-url", required=True, help="the server's OpenAI base URL, e.g. http://127.0.0.1:5000/v1")
    parser.add_argument("--model", required=True, help="the model name to send")
    parser.add_argument("--api-key", help="sent as Authorization: Bearer (and x-api-key with --api messages)")
    parser.add_argument("--api", choices=("chat", "messages", "responses"), default="chat",
                        help="chat completions (default), Anthropic Messages or OpenAI Responses")
    parser.add_argument("--json", action="store_true", help="print the verdicts as JSON")
    parser.add_argument("--only", help="comma-separated case names: " + ", ".join(c.name for c in CASES))
    parser.add_argument("--retries", type=int, default=2, help="times to re-ask after a MODEL verdict (default 2)")
    parser.add_argument("--wait", type=float, default=0, metavar="SECONDS",
                        help="wait up to this long for the server to come up (default 0)")


def run_probe(options: argparse.Namespace) -> int:
    try:
        cases = select(options.only)
    except ValueError as error:
        print(f"tabby-fixed probe: {error}", file=sys.stderr)
        return 2
    probe = Probe(options.base_url, options.model, options.api_key, options.retries, api=options.api)
    try:
        if options.wait and not probe.wait(options.wait):
            print(f"tabby-fixed probe: {options.base_url} did not answer within {options.wait:g} s", file=sys.stderr)
            return 2
        verdicts = probe.run(cases)
    except ServerRefused as error:
        print(f"tabby-fixed probe: {error}", file=sys.stderr)
        return 2
    finally:
        probe.close()
    try:
        if options.json:
            print(json.dumps([asdict(v) for v in verdicts], ensure_ascii=False, indent=2))
        else:
            _print_table(verdicts)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader (`| head`) has had enough; point stdout at nothing so exiting does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 1 if any(v.result == "FAIL" for v in verdicts) else 0
