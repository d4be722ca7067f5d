"""Nothing a client sends can hang, bloat or crash the server (issue 19): request-controlled work
is bounded, refused up front with a 400, or run off the event loop with a time limit."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.live_server import LiveServer
from tests.server.conftest import ADMIN_KEY, API_KEY, SCRIPTS, make_models, serve
from tests.server.process import ServerProcess, server_process

API = {"authorization": f"Bearer {API_KEY}"}
USER = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    root = tmp_path_factory.mktemp("limits")
    make_models(root)
    quick = {**SCRIPTS["tester"], "constraint_check_seconds": 0.2,  # a pattern check gives up sooner
             "max_seq_len": 10_000_000, "default": "x " * 300_000}  # anything but RAW: 600,000 tokens at once
    (root / "models" / "quick").mkdir()
    (root / "models" / "quick" / "scripted.yml").write_text(yaml.safe_dump(quick))
    with server_process(root, "quick") as server:
        yield server


def _ask(server: ServerProcess, output: str, **fields: object) -> httpx.Response:
    return httpx.post(server.v1 + "/chat/completions", headers=API, timeout=30,
                      json={"messages": [{"role": "user", "content": "RAW:" + output}], **fields})


def _health_while(server: ServerProcess, request: threading.Thread) -> float:
    """Seconds /health takes while the request's work is under way."""
    request.start()
    time.sleep(0.3)
    started = time.monotonic()
    assert httpx.get(server.url + "/health", timeout=5).status_code == 200
    took = time.monotonic() - started
    request.join(30)
    assert not request.is_alive()
    return took


@pytest.mark.parametrize("fields", [
    {"regex_pattern": r"(\w|\W|.)*(\w|\W|.)*(\w|\W|.)*z"},
    {"regex_pattern": "(a|aa)+b"},
    {"json_schema": {"type": "string", "pattern": "^(a|aa)+b$"}},
    {"json_schema": {"type": "object", "patternProperties": {"^(a|aa)+b$": {}}, "additionalProperties": False}},
])
def test_catastrophic_patterns_neither_hang_nor_stall_the_server(process: ServerProcess, fields: dict):
    output = '{"' + "a" * 40 + '": 1}' if "patternProperties" in str(fields) else \
        '"' + "a" * 40 + '"' if "json_schema" in fields else "a" * 40
    answers: list[httpx.Response] = []
    request = threading.Thread(target=lambda: answers.append(_ask(process, output, **fields)))
    assert _health_while(process, request) < 1
    error = answers[0].json()["error"]  # LLGuidance's regexes run in linear time: the mismatch is found
    assert answers[0].status_code == 422 and "breaks the request's" in error["message"]


def test_a_schema_that_refers_to_itself_without_end_is_400(process: ServerProcess):
    response = _ask(process, "{}", json_schema={"$ref": "#"})
    assert response.status_code == 400 and "refers to itself" in response.json()["error"]["message"]
    recursive = {"type": "object", "properties": {"child": {"$ref": "#"}}}  # a tree: fine
    assert _ask(process, '{"child": {"child": {}}}', json_schema=recursive).status_code == 200


def test_abandoned_non_streaming_requests_leave_no_jobs(workspace: Path):
    for server in serve(workspace, "slow"):
        engine = server.app.state.model.engine

        def abandon(url: str = server.v1 + "/chat/completions") -> None:
            with contextlib.suppress(httpx.ReadTimeout):  # the answer would take 8 s; the client gives up
                httpx.post(url, headers=API, timeout=httpx.Timeout(30, read=0.5),
                           json={"messages": [{"role": "user", "content": "hi"}]})

        clients = [threading.Thread(target=abandon) for _ in range(10)]
        for client in clients:
            client.start()
        for client in clients:
            client.join()
        deadline = time.monotonic() + 2
        while engine.active_jobs() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert engine.active_jobs() == 0


def _never_reading_client(server: ServerProcess) -> socket.socket:
    """A streaming request from a client that never reads its answer (and keeps its buffer small)."""
    body = json.dumps({"messages": [{"role": "user", "content": "go"}], "stream": True,
                       "n": 4}).encode()
    host, port = server.url.removeprefix("http://").split(":")
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.connect((host, int(port)))
    client.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   b"Authorization: Bearer " + API_KEY.encode() + b"\r\nContent-Length: "
                   + str(len(body)).encode() + b"\r\n\r\n" + body)
    return client


#: What clients that never read may cost the server: their queued output is bounded by
#: network.max_queued_steps, so the growth does not depend on how long they stall.
STALLED_CLIENTS_MB = 40


def test_clients_that_never_read_cost_bounded_memory_released_after_they_close(process: ServerProcess):
    _ask(process, "warm up")
    before = process.rss_mb()
    clients = [_never_reading_client(process) for _ in range(4)]
    try:
        time.sleep(4)  # the jobs could write 600,000 tokens each by now
        stalled = process.rss_mb()
    finally:
        for client in clients:
            client.close()
    assert stalled - before < STALLED_CLIENTS_MB, f"RSS {before:.0f} MB -> {stalled:.0f} MB"
    started = time.monotonic()
    assert _ask(process, "after").status_code == 200 and time.monotonic() - started < 2
    assert process.rss_mb() - before < STALLED_CLIENTS_MB


# -- client mistakes are 400s, never 500s ------------------------------------------------------

def _chat(http: httpx.Client, **fields: object) -> httpx.Response:
    return http.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "hi"}], **fields})


def _error(response: httpx.Response, status: int = 400) -> dict:
    assert response.status_code == status, response.text
    return response.json()["error"]


@pytest.mark.parametrize("depth", [150, 5000])
def test_deeply_nested_bodies_are_refused(http: httpx.Client, depth: int):
    nested = "[" * depth + "]" * depth
    body = '{"messages": [{"role": "user", "content": "hi"}], "template_vars": {"x": ' + nested + "}}"
    error = _error(http.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"}))
    assert "max_json_depth" in error["message"]
    assert _chat(http, template_vars={"x": [[[["fine"]]]]}).status_code == 200


@pytest.mark.parametrize("name", ["messages", "tools", "add_generation_prompt"])
def test_reserved_template_variables_are_refused(http: httpx.Client, name: str):
    error = _error(_chat(http, template_vars={name: []}))
    assert error["param"] == "template_vars" and name in error["message"]


@pytest.mark.parametrize("body", [
    '{"messages": [{"role": "user", "content": "\\ud800"}]}',
    '{"messages": [{"role": "user", "content": "hi"}], "tools": [{"type": "function", '
    '"function": {"name": "f\\udfff"}}]}',
    '{"messages": [{"role": "user", "content": "hi", "\\ud83d": 1}]}',
])
def test_lone_surrogates_are_refused(http: httpx.Client, body: str):
    error = _error(http.post("/v1/chat/completions", content=body, headers={"content-type": "application/json"}))
    assert "surrogate" in error["message"]


def test_an_empty_prompt_list_is_refused(http: httpx.Client):
    assert _error(http.post("/v1/completions", json={"prompt": []}))["param"] == "prompt"


@pytest.mark.parametrize(("prompts", "n"), [(4000, 16), (65, 1), (5, 13)])
def test_generations_per_request_are_bounded(http: httpx.Client, prompts: int, n: int):
    error = _error(http.post("/v1/completions", json={"prompt": ["x"] * prompts, "n": n}))
    assert "max_jobs_per_request" in error["message"] and error["param"] == "n"
    assert http.post("/v1/completions", json={"prompt": ["x"] * 4, "n": 16}).status_code == 200


@pytest.mark.parametrize("stop", [["s"] * 16_000, ["s"] * 65, ["s" * 1001]])
def test_stop_strings_are_bounded(http: httpx.Client, stop: list[str]):
    error = _error(_chat(http, stop=stop))
    assert error["param"] == "stop" and "network.max_stop_string" in error["message"]
    assert _chat(http, stop=["s" * 1000] * 64).status_code == 200


# -- admin loads and names ---------------------------------------------------------------------

ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}


@pytest.fixture(scope="module")
def admin_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    root = tmp_path_factory.mktemp("admin")
    make_models(root)
    (root / "secret.jinja").write_text("SECRET {{ messages }}")
    (root / "templates").mkdir()
    yield from serve(root, "tester")


@pytest.mark.parametrize("settings", [{"max_seq_len": -5}, {"cache_size": "x"}, {"chunk_size": 0},
                                      {"prompt_template": "../../secret"}, {"prompt_template": "../secret"},
                                      {"draft_model": {"draft_model_name": "../../etc"}}])
def test_a_load_that_cannot_work_is_400_and_keeps_the_working_model(admin_server: LiveServer, settings: dict):
    response = httpx.post(admin_server.v1 + "/model/load", headers=ADMIN, json={"model_name": "slow", **settings})
    assert response.status_code in (400, 404) and "SECRET" not in response.text, response.text
    answer = httpx.post(admin_server.v1 + "/chat/completions", headers=API, json={"messages": USER})
    assert answer.status_code == 200 and answer.json()["model"] == "tester"


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/model/load", {"model_name": "x" * 5000}),
    ("/v1/template/switch", {"prompt_template_name": "x" * 5000}),
    ("/v1/sampling/override/switch", {"preset": "x" * 5000}),
    ("/v1/template/switch", {"prompt_template_name": "missing"}),
])
def test_long_or_missing_names_are_client_errors_that_show_no_paths(admin_server: LiveServer, path: str, body: dict):
    response = httpx.post(admin_server.url + path, headers=ADMIN, json=body)
    assert response.status_code in (400, 404), response.text
    assert "/tmp" not in response.text and "/work" not in response.text


def test_405_names_the_allowed_methods(admin_server: LiveServer):
    response = httpx.get(admin_server.v1 + "/chat/completions", headers=API)
    assert response.status_code == 405 and response.headers["allow"] == "POST"
