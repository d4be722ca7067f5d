"""The probe against our server (all PASS), against a server with the seeds' failure shapes (each
reported as FAIL with the right case names), and against a model that does not call (MODEL)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from tabby_fixed.cli import main
from tabby_fixed.config import load_config
from tabby_fixed.probe import CASES, Probe, ProbeCase
from tests.live_server import live_app, live_server

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "models"
STRING_CASES = {"string-123", "string-true", "string-null", "string-list", "string-object", "indented-code",
                "trailing-blank-line", "nullable-text-null", "unicode", "closing-tag-text", "two-calls"}


def verdicts(base_url: str, model: str, retries: int = 0) -> dict[tuple[str, str], str]:
    probe = Probe(base_url, model, retries=retries)
    try:
        return {(v.case, v.mode): v.result for v in probe.run(CASES)}
    finally:
        probe.close()


def failing(results: dict[tuple[str, str], str], mode: str) -> set[str]:
    return {case for (case, m), result in results.items() if m == mode and result == "FAIL"}


def test_our_server_with_the_demo_model_passes_everything():
    config = load_config(["--model-dir", str(EXAMPLES), "--model-name", "demo", "--disable-auth", "true"],
                         environ={}, cwd=EXAMPLES)
    with live_server(config) as server:
        results = verdicts(server.v1, "demo")
    assert set(results.values()) == {"PASS"} and len(results) == 2 * len(CASES)


# A stand-in server that answers each probe case with the expected calls, damaged in one way.

def coerce(value):
    """Stock TabbyAPI's coerce_param_value: strip, then json.loads if it parses."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value.strip())
    except ValueError:
        return value.strip()


def damaged_server(damage: Callable[[dict], dict], calls_in_stream: bool = True) -> FastAPI:
    app = FastAPI()

    @app.get("/v1/models")
    async def models() -> dict:
        return {"object": "list", "data": [{"id": "broken", "object": "model"}]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        prompt = body["messages"][-1]["content"]
        case: ProbeCase = next(c for c in CASES if f"[tabby-fixed probe: {c.name}]" in prompt)
        calls = [{"id": f"call_{uuid.uuid4().hex[:8]}", "type": "function",
                  "function": {"name": tool, "arguments": json.dumps(damage(args), ensure_ascii=False)}}
                 for tool, args in case.calls]
        if not body.get("stream"):
            return JSONResponse({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": None, "tool_calls": calls}}]})

        def chunk(delta: dict, finish: str | None = None) -> str:
            return "data: " + json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}) + "\n\n"

        def events():
            if calls_in_stream:
                for i, call in enumerate(calls):
                    yield chunk({"tool_calls": [{"index": i, **call}]})
                yield chunk({}, "tool_calls")
            else:  # the call is never parsed: its markup streams as text
                yield chunk({"content": "<tool_call>\n<function=write_file>\n...</function>\n</tool_call>"})
                yield chunk({}, "stop")
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    return app


@pytest.mark.parametrize(("damage", "calls_in_stream", "plain_fails", "stream_fails"), [
    (lambda args: {k: coerce(v) for k, v in args.items()}, True, STRING_CASES, STRING_CASES),
    (lambda args: args, False, set(), {c.name for c in CASES}),
    (lambda args: {f'"{k}"': v for k, v in args.items()}, True, {c.name for c in CASES}, {c.name for c in CASES}),
], ids=["strip and json.loads", "call dropped in streaming", "quoted keys"])
def test_failure_shapes_are_reported_as_fail(damage, calls_in_stream, plain_fails, stream_fails):
    with live_app(damaged_server(damage, calls_in_stream)) as server:
        results = verdicts(server.v1, "broken")
    assert failing(results, "plain") == plain_fails and failing(results, "stream") == stream_fails
    assert set(results.values()) <= {"PASS", "FAIL"}


def test_a_model_that_does_not_call_is_model_not_fail(tmp_path):
    (tmp_path / "models" / "chatty").mkdir(parents=True)
    (tmp_path / "models" / "chatty" / "scripted.yml").write_text(yaml.safe_dump({
        "tool_format": "qwen3_coder", "default": "I would rather explain than call a tool."}))
    config = load_config(["--model-dir", str(tmp_path / "models"), "--model-name", "chatty", "--disable-auth",
                          "true"], environ={}, cwd=tmp_path)
    with live_server(config) as server:
        results = verdicts(server.v1, "chatty", retries=1)
    assert set(results.values()) == {"MODEL"}


def test_cli_json_report_and_exit_code(capsys):
    damage = lambda args: {k: coerce(v) for k, v in args.items()}  # noqa: E731
    with live_app(damaged_server(damage)) as server:
        code = main(["probe", "--base-url", server.v1, "--model", "broken", "--json", "--only",
                     "string-123,typed-values", "--retries", "0"])
    report = json.loads(capsys.readouterr().out)
    assert code == 1
    assert [(v["case"], v["mode"], v["result"]) for v in report] == [
        ("string-123", "plain", "FAIL"), ("string-123", "stream", "FAIL"),
        ("typed-values", "plain", "PASS"), ("typed-values", "stream", "PASS")]
    assert "expected" in report[0]["detail"] and report[0]["expected"][0]["arguments"] == {"path": "probe.txt",
                                                                                          "content": "123"}


def test_cli_rejects_unknown_cases(capsys):
    assert main(["probe", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--only", "nope"]) == 2
    assert "unknown cases nope" in capsys.readouterr().err


def test_a_refused_key_is_one_error_with_the_servers_message(tmp_path, capsys):
    (tmp_path / "api_tokens.yml").write_text(yaml.safe_dump({"api_key": "right", "admin_key": "admin"}))
    config = load_config(["--model-dir", str(EXAMPLES), "--model-name", "demo"], environ={}, cwd=tmp_path)
    with live_server(config) as server:
        for key in ([], ["--api-key", "wrong"]):
            assert main(["probe", "--base-url", server.v1, "--model", "demo", *key]) == 2
            captured = capsys.readouterr()
            assert captured.out == "" and captured.err.count("\n") == 1
            assert "refused the API key (HTTP 401)" in captured.err and "--api-key" in captured.err
            assert ("Invalid API key" if key else "Please provide an API key") in captured.err


def test_a_server_that_is_not_there_is_one_error(capsys):
    from tests.distribution.processes import free_port

    url = f"http://127.0.0.1:{free_port()}/v1"
    assert main(["probe", "--base-url", url, "--model", "demo", "--json"]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1 and f"cannot connect to {url}" in captured.err


def test_json_piped_into_head_ends_quietly(tmp_path):
    config = load_config(["--model-dir", str(EXAMPLES), "--model-name", "demo", "--disable-auth", "true"],
                         environ={}, cwd=tmp_path)
    with live_server(config) as server:
        result = subprocess.run(f"{sys.executable} -m tabby_fixed probe --base-url {server.v1} --model demo --json "
                                f"--retries 0 | head -n 0", shell=True, cwd=tmp_path, capture_output=True, text=True,
                                timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.stdout == "" and result.stderr == ""
