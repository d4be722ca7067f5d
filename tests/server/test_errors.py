"""Bad input gets a clear OpenAI-shaped error, never a 500, and the server keeps serving."""

from __future__ import annotations

import json
import logging

import httpx
import pytest

from tests.server.conftest import ADMIN_KEY, API_KEY, serve

USER = [{"role": "user", "content": "RAW:hello"}]


def error_of(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    body = response.json()
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    assert body["detail"] == error["message"]  # upstream's key, for clients written against TabbyAPI
    return error


def test_malformed_json(http: httpx.Client):
    error = error_of(http.post("/v1/chat/completions", content=b'{"messages": [', headers={
        "content-type": "application/json"}), 400)
    assert "not valid JSON" in error["message"] and "line 1" in error["message"]


@pytest.mark.parametrize("body", [b"[1, 2]", b'"text"', b"\xff\xfe"])
def test_body_that_is_not_an_object(http: httpx.Client, body: bytes):
    error_of(http.post("/v1/chat/completions", content=body), 400)


@pytest.mark.parametrize(("body", "field"), [
    ({"messages": "hello"}, "messages"),
    ({}, "messages"),
    ({"messages": []}, "messages"),
    ({"messages": USER, "temperature": "hot"}, "temperature"),
    ({"messages": USER, "max_tokens": -5}, "max_tokens"),
    ({"messages": [{"role": "user", "content": 5}]}, "messages.0.content"),
    ({"messages": USER, "tools": [{"type": "function"}]}, "tools.0.function"),
    ({"messages": USER, "tool_choice": "sometimes"}, "tool_choice"),
    ({"messages": USER, "n": 0}, "n"),
    ({"messages": USER, "tool_choice": "required"}, "tool_choice"),
    ({"messages": USER, "tools": [{"type": "function", "function": {"name": "a"}}],
      "tool_choice": {"type": "function", "function": {"name": "b"}}}, "tool_choice"),
])
def test_wrong_fields_name_the_field(http: httpx.Client, body: dict, field: str):
    error = error_of(http.post("/v1/chat/completions", json=body), 400)
    assert error["param"].startswith(field) and field in error["message"]


def test_prompt_longer_than_the_context(http: httpx.Client):
    huge = [{"role": "user", "content": "RAW:" + "word " * 5000}]
    for stream in (False, True):
        error = error_of(http.post("/v1/chat/completions", json={"messages": huge, "stream": stream}), 400)
        assert error["code"] == "context_length_exceeded" and "4096" in error["message"]


def test_max_tokens_is_clamped_to_the_context_not_rejected(http: httpx.Client):
    response = http.post("/v1/chat/completions", json={"messages": USER, "max_tokens": 10**9})
    assert response.status_code == 200 and response.json()["choices"][0]["message"]["content"] == "hello"


def test_unknown_route_and_method(http: httpx.Client):
    assert "no route" in error_of(http.get("/v1/nothing"), 404)["message"]
    error_of(http.get("/v1/chat/completions"), 405)


def test_replayed_arguments_that_are_not_json(http: httpx.Client, workspace):
    history = [{"role": "user", "content": "go"},
               {"role": "assistant", "content": "", "tool_calls": [
                   {"id": "c1", "type": "function", "function": {"name": "write_file", "arguments": "{broken"}}]},
               {"role": "tool", "tool_call_id": "c1", "content": "error"},
               {"role": "user", "content": "RAW:again"}]
    error = error_of(http.post("/v1/chat/completions", json={"messages": history}), 400)
    assert error["param"] == "messages[1].tool_calls[0].function.arguments"
    for server in serve(workspace, "thinker"):  # a template that never reads the arguments renders fine
        response = httpx.post(server.v1 + "/chat/completions", headers={"authorization": f"Bearer {API_KEY}"},
                              json={"messages": history})
        assert response.status_code == 200


def test_body_over_the_limit(workspace):
    for server in serve(workspace, "tester", "--max-request-bytes", "2000"):
        url, headers = server.v1 + "/chat/completions", {"authorization": f"Bearer {API_KEY}"}
        big = {"messages": [{"role": "user", "content": "x" * 5000}]}
        error = error_of(httpx.post(url, headers=headers, json=big), 413)
        assert "2000" in error["message"] and "max_request_bytes" in error["message"]

        def chunked():  # no Content-Length: the limit holds while reading
            yield b'{"messages": [{"role": "user", "content": "'
            for _ in range(10):
                yield b"x" * 500
            yield b'"}]}'

        error_of(httpx.post(url, headers=headers, content=chunked()), 413)
        assert httpx.post(url, headers=headers, json={"messages": USER}).status_code == 200


@pytest.mark.parametrize("name", ["no-such-model", "../models", "../../etc", "/etc", "x" * 5000])
def test_unknown_model_with_inline_loading(workspace, name):
    for server in serve(workspace, "tester", "--inline-model-loading", "true"):
        response = httpx.post(server.v1 + "/chat/completions", headers={"authorization": f"Bearer {ADMIN_KEY}"},
                              json={"model": name, "messages": USER})
        error = error_of(response, 404)
        assert name[:200] in error["message"] and error["param"] == "model"
        assert str(workspace) not in error["message"]  # nothing about the server's disk


def test_api_keys_cannot_probe_which_model_folders_exist(workspace):
    for server in serve(workspace, "tester", "--inline-model-loading", "true"):
        for name in ("slow", "no-such-model"):  # one exists, one does not: the same answer
            response = httpx.post(server.v1 + "/chat/completions", headers={"authorization": f"Bearer {API_KEY}"},
                                  json={"model": name, "messages": USER})
            assert "admin key" in error_of(response, 401)["message"]


def test_any_model_name_is_served_without_inline_loading(http: httpx.Client):
    response = http.post("/v1/chat/completions", json={"model": "gpt-4o", "messages": USER})
    assert response.status_code == 200 and response.json()["model"] == "tester"


def test_no_model_loaded(tmp_path):
    from tests.server.conftest import make_models

    make_models(tmp_path)
    for server in serve(tmp_path, ""):
        response = httpx.post(server.v1 + "/chat/completions", headers={"authorization": f"Bearer {API_KEY}"},
                              json={"messages": USER})
        assert "No models are currently loaded" in error_of(response, 503)["message"]


def test_engine_failure_without_streaming_is_a_500_with_a_message(http: httpx.Client):
    error = error_of(http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "CRASH:x"}]}),
                     500)
    assert "injected fault" in error["message"]
    assert http.post("/v1/chat/completions", json={"messages": USER}).status_code == 200


def test_send_tracebacks_puts_the_trace_in_the_error(workspace):
    crash = {"messages": [{"role": "user", "content": "CRASH:x"}]}
    for server in serve(workspace, "tester", "--send-tracebacks", "true"):
        with httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {API_KEY}"}) as http:
            response = http.post("/v1/chat/completions", json=crash)
            streamed = http.post("/v1/chat/completions", json={**crash, "stream": True}).text
    assert response.status_code == 500
    error = response.json()["error"]
    assert error["trace"].startswith("Traceback") and "injected fault" in error["trace"]
    assert response.json()["detail"] == error["message"]
    [event] = [json.loads(line[6:]) for line in streamed.splitlines() if line.startswith('data: {"error"')]
    assert "injected fault" in event["error"]["trace"] and event["detail"] == event["error"]["message"]


def test_log_requests_logs_method_url_and_body_but_no_key(workspace, caplog: pytest.LogCaptureFixture):
    with caplog.at_level(logging.INFO, logger="tabby_fixed.server.request_log"):
        for server in serve(workspace, "tester", "--log-requests", "true"):
            with httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {API_KEY}"}) as http:
                assert http.post("/v1/chat/completions", json={"messages": USER}).status_code == 200
                assert http.get("/v1/models", params={"x": "1"}).status_code == 200
    text = "\n".join(record.getMessage() for record in caplog.records)
    assert "POST /v1/chat/completions" in text and "RAW:hello" in text
    assert "GET /v1/models?x=1" in text
    assert API_KEY not in text and "[redacted]" in text


def test_log_chat_completion_requests_writes_the_request_and_its_prompt(tmp_path):
    from tests.server.conftest import make_models

    make_models(tmp_path)
    body = {"messages": USER, "max_tokens": 20, "metadata": {"api_key": "secret-in-body"}}
    for server in serve(tmp_path, "tester", "--log-chat-completion-requests", "true"):
        with httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {API_KEY}"}) as http:
            assert http.post("/v1/chat/completions", json=body).status_code == 200
    [record] = (tmp_path / "logs" / "debug").glob("*.json")
    logged = json.loads(record.read_text())["request"]
    assert logged["path"] == "/v1/chat/completions" and logged["body"]["messages"] == USER
    assert logged["headers"]["authorization"] == "[redacted]" and logged["body"]["metadata"]["api_key"] == "[redacted]"
    assert API_KEY not in record.read_text() and "secret-in-body" not in record.read_text()
    prompt = record.with_suffix(".txt").read_text()
    assert prompt.endswith("<|im_start|>user\nRAW:hello<|im_end|>\n<|im_start|>assistant\n")
