"""``tabby-fixed probe --api messages|responses``: the tool-argument cases over the Anthropic
Messages and OpenAI Responses APIs, against our server (all PASS) and against stand-in servers
that damage arguments or the stream the way broken servers do (FAIL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from tabby_fixed.cli import main
from tabby_fixed.config import load_config
from tabby_fixed.probe import CASES, Probe
from tests.live_server import live_app, live_server

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "models"


@pytest.mark.parametrize("api", ["messages", "responses"])
def test_our_server_passes_every_case_over_the_api(api, capsys):
    config = load_config(["--model-dir", str(EXAMPLES), "--model-name", "demo", "--disable-auth", "true"],
                         environ={}, cwd=EXAMPLES)
    with live_server(config) as server:
        code = main(["probe", "--base-url", server.v1, "--model", "demo", "--api", api, "--api-key", "k", "--json"])
    results = json.loads(capsys.readouterr().out)
    assert code == 0 and {v["result"] for v in results} == {"PASS"} and len(results) == 2 * len(CASES)


def _sse(events: list[tuple[str, dict]]) -> StreamingResponse:
    body = "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events)
    return StreamingResponse(iter([body.encode()]), media_type="text/event-stream")


def _expected(prompt: str) -> list[tuple[str, dict]]:
    case = next(c for c in CASES if f"[tabby-fixed probe: {c.name}]" in prompt)
    return list(case.calls)


def coerced(arguments: dict) -> dict:
    """Stock TabbyAPI's damage: every string that parses as JSON becomes that value."""
    out = {}
    for key, value in arguments.items():
        try:
            out[key] = json.loads(value) if isinstance(value, str) else value
        except ValueError:
            out[key] = value
    return out


def damaged_messages_server() -> FastAPI:
    app = FastAPI()

    @app.post("/v1/messages")
    async def messages(request: Request):
        body = await request.json()
        calls = _expected(body["messages"][0]["content"])
        blocks = [{"type": "tool_use", "id": f"t{i}", "name": name, "input": coerced(arguments)}
                  for i, (name, arguments) in enumerate(calls)]
        if not body["stream"]:
            return JSONResponse({"type": "message", "role": "assistant", "content": blocks, "stop_reason": "tool_use"})
        events = [("message_start", {"type": "message_start", "message": {"content": []}})]
        for i, block in enumerate(blocks):
            # block numbers that skip one: the SDK raises on them
            events += [("content_block_start", {"type": "content_block_start", "index": 2 * i,
                                                "content_block": {**block, "input": {}}}),
                       ("content_block_delta", {"type": "content_block_delta", "index": 2 * i, "delta": {
                           "type": "input_json_delta", "partial_json": json.dumps(calls[i][1])}}),
                       ("content_block_stop", {"type": "content_block_stop", "index": 2 * i})]
        events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use"}}),
                   ("message_stop", {"type": "message_stop"})]
        return _sse(events)

    return app


def damaged_responses_server() -> FastAPI:
    app = FastAPI()

    @app.post("/v1/responses")
    async def responses(request: Request):
        body = await request.json()
        calls = _expected(body["input"])
        if not body["stream"]:
            return JSONResponse({"status": "completed", "output": [
                {"type": "function_call", "call_id": f"c{i}", "name": name, "arguments": json.dumps(coerced(args))}
                for i, (name, args) in enumerate(calls)]})
        events = []
        for i, (name, arguments) in enumerate(calls):
            text = json.dumps(arguments)
            events += [("response.output_item.added", {"type": "response.output_item.added", "output_index": i,
                                                       "item": {"type": "function_call", "name": name}}),
                       ("response.function_call_arguments.delta", {
                           "type": "response.function_call_arguments.delta", "output_index": i, "delta": text}),
                       ("response.function_call_arguments.done", {  # the done event disagrees with the deltas
                           "type": "response.function_call_arguments.done", "output_index": i,
                           "arguments": text.strip("{}")})]
        events.append(("response.completed", {"type": "response.completed", "response": {"status": "completed"}}))
        return _sse(events)

    return app


@pytest.mark.parametrize(("api", "app", "stream_fault"), [
    ("messages", damaged_messages_server, "block 2 started where 1 was due"),
    ("responses", damaged_responses_server, "differs from their deltas")])
def test_damage_is_reported_as_fail(api, app, stream_fault):
    with live_app(app()) as server:
        probe = Probe(server.v1, "m", retries=0, api=api)
        try:
            verdicts = {(v.case, v.mode): v for v in probe.run(CASES)}
        finally:
            probe.close()
    plain = verdicts[("string-123", "plain")]
    assert plain.result == "FAIL" and "the string became int" in plain.detail
    assert verdicts[("indented-code", "plain")].result == "PASS"  # coercion leaves non-JSON text alone
    stream = verdicts[("two-calls", "stream")]
    assert stream.result == "FAIL" and stream_fault in stream.detail
