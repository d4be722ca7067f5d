"""The KoboldAI API, spoken to as KoboldAI Lite and SillyTavern speak to it (httpx, raw SSE)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tabby_fixed.server.kobold import GenerateRequest
from tests.live_server import LiveServer
from tests.server.conftest import API_KEY, serve

AUTH = {"authorization": f"Bearer {API_KEY}"}


def lite_body(prompt: str, **changes) -> dict:
    """A body as KoboldAI Lite sends it, samplers and all."""
    body = {"n": 1, "max_context_length": 4096, "max_length": 120, "rep_pen": 1.07, "temperature": 0.7,
            "top_p": 0.92, "top_k": 100, "top_a": 0, "typical": 1, "tfs": 1, "rep_pen_range": 360,
            "rep_pen_slope": 0.7, "sampler_order": [6, 0, 1, 3, 4, 2, 5], "memory": "", "trim_stop": True,
            "genkey": "KCPP2458", "min_p": 0, "dynatemp_range": 0, "dynatemp_exponent": 1, "smoothing_factor": 0,
            "banned_tokens": [], "render_special": False, "presence_penalty": 0, "logit_bias": {},
            "prompt": prompt, "quiet": True, "stop_sequence": ["You:", "\nYou "], "use_default_badwordsids": False,
            "bypass_eos": False}
    return {**body, **changes}


@pytest.fixture(scope="module")
def kobold(workspace: Path) -> Iterator[LiveServer]:
    yield from serve(workspace, "tester", "--api-servers", "OAI", "Kobold")


@pytest.fixture(scope="module")
def slow_kobold(workspace: Path) -> Iterator[LiveServer]:
    yield from serve(workspace, "slow", "--api-servers", "Kobold")


def events(response: httpx.Response) -> list[tuple[str, dict]]:
    """(event, data) pairs of a KoboldCpp-style stream; comments (pings) skipped."""
    found = []
    for block in response.text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":"))
        if fields:
            found.append((fields.get("event", ""), json.loads(fields["data"])))
    return found


def test_generate_answers_kobold_lite(kobold: LiveServer):
    response = httpx.post(kobold.url + "/api/v1/generate", headers=AUTH, json=lite_body("RAW:Once upon a time"))
    assert response.status_code == 200, response.text
    assert response.json() == {"results": [{"text": "Once upon a time"}]}


def test_latest_serves_what_v1_serves(kobold: LiveServer):
    response = httpx.post(kobold.url + "/api/latest/generate", headers=AUTH, json={"prompt": "RAW:same"})
    assert response.json() == {"results": [{"text": "same"}]}


def test_stop_sequence_and_max_length_apply(kobold: LiveServer):
    stopped = httpx.post(kobold.url + "/api/v1/generate", headers=AUTH,
                         json=lite_body("RAW:Hello there You: next line")).json()
    assert stopped == {"results": [{"text": "Hello there "}]}
    short = httpx.post(kobold.url + "/api/v1/generate", headers=AUTH,
                       json=lite_body("RAW:one two three four five", max_length=3)).json()
    assert short == {"results": [{"text": "one two"}]}  # three tokens: "one", " ", "two"


def test_stream_is_message_events_with_tokens(kobold: LiveServer):
    response = httpx.post(kobold.url + "/api/extra/generate/stream", headers=AUTH,
                          json=lite_body("RAW:streamed words here"))
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    found = events(response)
    assert {name for name, _ in found} == {"message"}
    assert "".join(data["token"] for _, data in found) == "streamed words here"
    assert "[DONE]" not in response.text


def test_model_lengths_versions_and_token_count(kobold: LiveServer):
    def get(path: str) -> dict:
        response = httpx.get(kobold.url + path, headers=AUTH)
        assert response.status_code == 200, (path, response.text)
        return response.json()

    assert get("/api/v1/model") == {"result": "tabbyAPI/tester"}
    for path in ("/api/v1/config/max_length", "/api/latest/config/max_context_length",
                 "/api/extra/true_max_context_length"):
        assert get(path) == {"value": 4096}
    assert httpx.get(kobold.url + "/api/v1/info/version").json() == {"result": "1.2.5"}
    assert httpx.get(kobold.url + "/api/extra/version").json() == {"result": "KoboldCpp", "version": "1.74"}
    assert httpx.get(kobold.url + "/api/v1/config/soft_prompts_list").json() == {"values": []}
    assert httpx.get(kobold.url + "/api/v1/config/soft_prompt").json() == {"value": ""}
    assert httpx.put(kobold.url + "/api/v1/config/soft_prompt", json={"value": "x"}).json() == {}
    count = httpx.post(kobold.url + "/api/extra/tokencount", headers=AUTH, json={"prompt": "Hello, world"}).json()
    assert count["value"] == len(count["ids"]) > 0
    encoded = httpx.post(kobold.url + "/v1/token/encode", headers=AUTH, json={"text": "Hello, world",
                                                                           "add_bos_token": False}).json()
    assert count["ids"] == encoded["tokens"]


def test_generation_routes_need_a_key(kobold: LiveServer):
    for path in ("/api/v1/generate", "/api/extra/generate/stream", "/api/extra/tokencount", "/api/extra/abort"):
        response = httpx.post(kobold.url + path, json={"prompt": "RAW:x", "genkey": "k"})
        assert response.status_code == 401, path


def test_bad_bodies_are_400s(kobold: LiveServer):
    missing = httpx.post(kobold.url + "/api/v1/generate", headers=AUTH, json={"max_length": 10})
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "prompt"
    wrong = httpx.post(kobold.url + "/api/v1/generate", headers=AUTH, json={"prompt": "x", "temperature": "hot"})
    assert wrong.status_code == 400 and wrong.json()["error"]["param"] == "temperature"
    too_long = httpx.post(kobold.url + "/api/extra/generate/stream", headers=AUTH, json={"prompt": "word " * 5000})
    assert too_long.status_code == 400 and too_long.json()["error"]["code"] == "context_length_exceeded"


def test_kobold_is_off_unless_configured(server: LiveServer):
    response = httpx.post(server.url + "/api/v1/generate", headers=AUTH, json={"prompt": "RAW:x"})
    assert response.status_code == 404


def test_serviceinfo_names_the_kobold_api(kobold: LiveServer):
    assert httpx.get(kobold.url + "/.well-known/serviceinfo").json()["api"]["koboldai"]["relative_url"] == "/api"


def test_check_reads_the_text_so_far_and_abort_stops_it(slow_kobold: LiveServer):
    """SillyTavern polls check while KoboldAI Lite waits on generate, then may press abort."""
    result: dict = {}

    def wait_for_generate() -> None:
        result["response"] = httpx.post(slow_kobold.url + "/api/v1/generate", headers=AUTH, timeout=30,
                                        json=lite_body("go", genkey="KCPP7777"))

    waiter = threading.Thread(target=wait_for_generate)
    waiter.start()
    try:
        partial: list = []
        deadline = time.monotonic() + 10
        while not partial and time.monotonic() < deadline:
            time.sleep(0.1)
            partial = httpx.post(slow_kobold.url + "/api/extra/generate/check", headers=AUTH,
                                 json={"genkey": "KCPP7777"}).json()["results"]
        assert partial and partial[0]["text"].startswith("tick")
        by_query = httpx.get(slow_kobold.url + "/api/extra/generate/check", headers=AUTH,
                             params={"genkey": "KCPP7777"}).json()["results"]
        assert by_query[0]["text"].startswith(partial[0]["text"])
        aborted = httpx.post(slow_kobold.url + "/api/extra/abort", headers=AUTH, json={"genkey": "KCPP7777"})
        assert aborted.json() == {"success": True}
    finally:
        waiter.join(15)
    text = result["response"].json()["results"][0]["text"]
    assert text.startswith("tick") and len(text) < len("tick " * 400) - 5  # cut short, not run to the end
    engine = slow_kobold.app.state.model.engine
    deadline = time.monotonic() + 5
    while engine.active_jobs() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert engine.active_jobs() == 0
    after = httpx.post(slow_kobold.url + "/api/extra/generate/check", headers=AUTH, json={"genkey": "KCPP7777"})
    assert after.json() == {"results": []}
    unknown = httpx.post(slow_kobold.url + "/api/extra/abort", headers=AUTH, json={"genkey": "nothing-runs"})
    assert unknown.json() == {"success": True}


def sillytavern_body(prompt: str) -> dict:
    """A body as SillyTavern's KoboldAI (classic) mode sends it."""
    return {"prompt": prompt, "max_context_length": 4096, "max_length": 200, "rep_pen": 1.1, "rep_pen_range": 0,
            "rep_pen_slope": 1, "temperature": 0.8, "tfs": 1, "top_a": 0, "top_k": 40, "top_p": 0.95,
            "typical": 1, "min_p": 0.05, "sampler_order": [6, 0, 1, 3, 4, 2, 5], "use_default_badwordsids": True,
            "dynatemp_range": 0.5, "dynatemp_exponent": 1, "mirostat": 0, "mirostat_tau": 5, "mirostat_eta": 0.1,
            "grammar": "", "grammar_retain_state": False, "banned_tokens": [], "sampler_seed": -1,
            "stop_sequence": ["\nUser:"], "trim_stop": True, "singleline": False, "use_world_info": False}


def test_sillytavern_body_is_served(kobold: LiveServer):
    response = httpx.post(kobold.url + "/api/v1/generate", headers=AUTH,
                          json=sillytavern_body("RAW:Hi there.\nUser: more"))
    assert response.json() == {"results": [{"text": "Hi there."}]}


def test_kobold_fields_mean_ours():
    body = GenerateRequest.model_validate(sillytavern_body("x"))
    values = body.sampler_values()
    assert (values["min_temp"], values["max_temp"]) == pytest.approx((0.3, 1.3))
    assert values["penalty_range"] == -1 and values["ban_eos_token"] is True
    assert values["max_tokens"] == 200 and values["repetition_penalty"] == 1.1 and values["stop"] == ["\nUser:"]
    plain = GenerateRequest.model_validate({"prompt": "x", "dynatemp_range": 0, "rep_pen_range": 360}).sampler_values()
    assert "min_temp" not in plain and plain["penalty_range"] == 360 and "ban_eos_token" not in plain
