"""Admin routes, inline loading, sampler presets on the wire, and structured output."""

from __future__ import annotations

import json
import os
import threading

import httpx
import pytest
import yaml

from tests.server.conftest import ADMIN_KEY, API_KEY, make_models, serve

USER = [{"role": "user", "content": "RAW:hello"}]
ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}
API = {"authorization": f"Bearer {API_KEY}"}
ADMIN_ROUTES = [
    ("POST", "/v1/sampling/override/switch", {"preset": "hot"}),
    ("POST", "/v1/sampling/override/unload", {}),
    ("POST", "/v1/template/switch", {"prompt_template_name": "plain"}),
    ("POST", "/v1/template/unload", {}),
    ("POST", "/v1/model/load", {"model_name": "tester"}),
    ("POST", "/v1/model/unload", {}),
]


@pytest.fixture
def admin_server(tmp_path):
    make_models(tmp_path)
    presets = tmp_path / "sampler_overrides"
    presets.mkdir()
    (presets / "hot.yml").write_text(yaml.safe_dump({"temperature": {"override": 1.5, "force": True},
                                                     "top_k": {"override": 0, "force": True}}))
    (presets / "cold.yml").write_text(yaml.safe_dump({"temperature": {"override": 0.1, "force": True},
                                                      "top_k": {"override": 5, "force": True}}))
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "plain.jinja").write_text(
        "{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}assistant:")
    (tmp_path / "models" / "tester" / "generation_config.json").write_text(json.dumps({"top_p": 0.8, "top_k": 20}))
    yield from serve(tmp_path, "tester", "--inline-model-loading", "true")


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ROUTES, ids=[r[1] for r in ADMIN_ROUTES])
def test_admin_routes_refuse_api_keys(admin_server, method, path, body):
    for headers in ({}, API, {"x-api-key": ADMIN_KEY}):
        response = httpx.request(method, admin_server.url + path, headers=headers, json=body)
        assert response.status_code == 401 and "admin key" in response.json()["error"]["message"]


@pytest.mark.parametrize(("method", "path", "body"), ADMIN_ROUTES, ids=[r[1] for r in ADMIN_ROUTES])
def test_admin_routes_work_with_the_admin_key(admin_server, method, path, body):
    for headers in (ADMIN, {"x-admin-key": ADMIN_KEY}):
        response = httpx.request(method, admin_server.url + path, headers=headers, json=body)
        assert response.status_code == 200, response.text
        if path == "/v1/model/unload":
            httpx.post(admin_server.v1 + "/model/load", headers=ADMIN, json={"model_name": "tester"})


def test_model_load_streams_progress_and_swaps_the_model(admin_server):
    with httpx.stream("POST", admin_server.v1 + "/model/load", headers=ADMIN, json={"model_name": "slow"}) as stream:
        assert stream.headers["content-type"].startswith("text/event-stream")
        events = [json.loads(line[6:]) for line in stream.iter_lines() if line.startswith("data: ")]
    assert events == [{"model_type": "model", "module": 1, "modules": 1, "status": "processing"},
                      {"model_type": "model", "module": 1, "modules": 1, "status": "finished"}]
    assert httpx.get(admin_server.v1 + "/model", headers=API).json()["id"] == "slow"
    assert httpx.post(admin_server.v1 + "/model/unload", headers=ADMIN).status_code == 200
    assert httpx.post(admin_server.v1 + "/chat/completions", headers=API, json={"messages": USER}).status_code == 503


@pytest.mark.parametrize("name", ["../models", "/etc", "tester/../../", "escape", "", "nothing-here"])
def test_model_names_outside_model_dir_are_refused(admin_server, tmp_path, name):
    os.symlink(tmp_path.parent, tmp_path / "models" / "escape")  # a symlink pointing out of model_dir
    response = httpx.post(admin_server.v1 + "/model/load", headers=ADMIN, json={"model_name": name})
    assert response.status_code in (400, 404) and response.json()["error"]["param"] == "model_name"
    os.unlink(tmp_path / "models" / "escape")


def test_inline_loading_needs_the_admin_key(admin_server):
    ask = {"model": "thinker", "messages": USER}
    assert httpx.post(admin_server.v1 + "/chat/completions", headers=API, json=ask).status_code == 401
    response = httpx.post(admin_server.v1 + "/chat/completions", headers=ADMIN, json=ask)
    assert response.status_code == 200 and response.json()["model"] == "thinker"


def test_preset_switch_list_and_unload(admin_server):
    listed = httpx.get(admin_server.v1 + "/sampling/overrides", headers=ADMIN).json()
    assert listed["selected_preset"] is None and {"hot", "cold"} <= set(listed["presets"])
    assert httpx.get(admin_server.v1 + "/sampling/override/list", headers=API).json()["presets"] == []
    switched = httpx.post(admin_server.v1 + "/sampling/override/switch", headers=ADMIN, json={"preset": "hot"}).json()
    assert switched["selected_preset"] == "hot" and switched["overrides"]["top_k"]["override"] == 0
    missing = httpx.post(admin_server.v1 + "/sampling/override/switch", headers=ADMIN, json={"preset": "nope"})
    assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"]
    inline = httpx.post(admin_server.v1 + "/sampling/override/switch", headers=ADMIN,
                        json={"overrides": {"min_p": {"override": 0.05, "force": True}}}).json()
    assert inline["selected_preset"] is None and inline["overrides"]["min_p"]["force"] is True
    assert httpx.post(admin_server.v1 + "/sampling/override/switch", headers=ADMIN, json={}).status_code == 400
    assert httpx.post(admin_server.v1 + "/sampling/override/unload", headers=ADMIN).json()["overrides"] == {}


def test_sampler_source_header_names_each_layer(admin_server):
    def source(**fields) -> str:
        return httpx.post(admin_server.v1 + "/chat/completions", headers=API,
                          json={"messages": USER, **fields}).headers["x-sampler-source"]

    assert source() == "card=top_k:20,top_p:0.8"
    assert source(top_k=3, temperature=0) == "request=temperature:0.0,top_k:3; card=top_p:0.8"
    httpx.post(admin_server.v1 + "/sampling/override/switch", headers=ADMIN, json={"preset": "hot"})
    assert source(top_k=3, temperature=0) == "forced=temperature:1.5,top_k:0; card=top_p:0.8"


def test_switching_presets_under_load_never_mixes_two_presets(admin_server):
    stop = threading.Event()

    def switcher():
        while not stop.is_set():
            for name in ("hot", "cold"):
                httpx.post(admin_server.v1 + "/sampling/override/switch", headers=ADMIN, json={"preset": name})

    thread = threading.Thread(target=switcher)
    thread.start()
    seen = set()
    try:
        with httpx.Client(headers=API) as client:
            for _ in range(60):
                header = client.post(admin_server.v1 + "/chat/completions", json={"messages": USER}).headers
                seen.add(header["x-sampler-source"].split(";")[0])
    finally:
        stop.set()
        thread.join()
    assert seen <= {"forced=temperature:1.5,top_k:0", "forced=temperature:0.1,top_k:5", "card=top_k:20,top_p:0.8"}


def test_templates_list_switch_and_unload(admin_server):
    assert httpx.get(admin_server.v1 + "/templates", headers=ADMIN).json()["data"] == ["alpaca", "chatml", "plain"]
    assert httpx.get(admin_server.v1 + "/template/list", headers=API).json()["data"] == ["chatml_tools"]
    missing = httpx.post(admin_server.v1 + "/template/switch", headers=ADMIN, json={"prompt_template_name": "nope"})
    assert missing.status_code == 404 and "nope" in missing.json()["error"]["message"]
    assert httpx.post(admin_server.v1 + "/template/switch", headers=ADMIN,
                      json={"prompt_template_name": "../api_tokens"}).status_code == 400
    httpx.post(admin_server.v1 + "/template/switch", headers=ADMIN, json={"prompt_template_name": "plain"})
    assert httpx.get(admin_server.v1 + "/model", headers=API).json()["parameters"]["prompt_template"] == "plain"
    tokens = httpx.post(admin_server.v1 + "/token/encode", headers=API, json={"text": USER}).json()
    text = httpx.post(admin_server.v1 + "/token/decode", headers=API, json={"tokens": tokens["tokens"]}).json()
    assert text["text"].startswith("user: RAW:hello")
    shipped = httpx.post(admin_server.v1 + "/template/switch", headers=ADMIN, json={"name": "chatml"})
    assert shipped.json() == {"prompt_template": "chatml"}
    tokens = httpx.post(admin_server.v1 + "/token/encode", headers=API, json={"text": USER}).json()
    text = httpx.post(admin_server.v1 + "/token/decode", headers=API, json={"tokens": tokens["tokens"]}).json()
    assert text["text"] == "<|im_start|>user\nRAW:hello"  # encode renders without a generation prompt
    httpx.post(admin_server.v1 + "/template/unload", headers=ADMIN)
    disabled = httpx.post(admin_server.v1 + "/chat/completions", headers=API, json={"messages": USER})
    assert disabled.status_code == 422 and disabled.json()["error"]["code"] == "no_chat_template"


def test_prompt_template_with_the_jinja_suffix_picks_a_shipped_template(tmp_path):
    make_models(tmp_path)
    for server in serve(tmp_path, "tester", "--prompt-template", "alpaca.jinja"):
        assert httpx.get(server.v1 + "/model", headers=API).json()["parameters"]["prompt_template"] == "alpaca"
        tokens = httpx.post(server.v1 + "/token/encode", headers=API, json={"text": USER}).json()
        text = httpx.post(server.v1 + "/token/decode", headers=API, json={"tokens": tokens["tokens"]}).json()
        assert text["text"] == "\n\n### Instruction:\nRAW:hello"


def test_draft_and_dummy_models(tmp_path):
    make_models(tmp_path)
    for server in serve(tmp_path, "tester", "--use-dummy-models", "true"):
        models = httpx.get(server.v1 + "/models", headers=API).json()["data"]
        assert [m["id"] for m in models] == ["gpt-3.5-turbo", "tester"]
        answer = httpx.post(server.v1 + "/chat/completions", headers=API,
                            json={"model": "gpt-3.5-turbo", "messages": USER}).json()
        assert answer["model"] == "tester"
        drafts = httpx.get(server.v1 + "/model/draft/list", headers=ADMIN).json()["data"]
        assert {d["id"] for d in drafts} == {"tester", "slow", "thinker", "opener"}
        assert httpx.get(server.v1 + "/model/draft/list", headers=API).json()["data"] == []


@pytest.mark.parametrize(("output", "fields", "ok"), [
    ('{"a": 1}', {"response_format": {"type": "json_object"}}, True),
    ("not json", {"response_format": {"type": "json_object"}}, False),
    ('{"a": 1}', {"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "object", "required": ["a"]}}}}, True),
    ('{"b": 1}', {"json_schema": {"type": "object", "required": ["a"]}}, False),
    ("abc123", {"regex_pattern": "[a-z]+[0-9]+"}, True),
    ("abc", {"regex_pattern": "[0-9]+"}, False),
])
def test_structured_output_is_checked(server, output, fields, ok):
    response = httpx.post(server.v1 + "/chat/completions", headers=API,
                          json={"messages": [{"role": "user", "content": "RAW:" + output}], **fields})
    if ok:
        assert response.status_code == 200 and response.json()["choices"][0]["message"]["content"] == output
    else:
        error = response.json()["error"]
        assert response.status_code == 422 and "breaks the request's" in error["message"]
        assert error["code"] == "script_breaks_constraint" and "at character" in error["message"]


@pytest.mark.parametrize("fields", [
    {"response_format": {"type": "json_object"}, "regex_pattern": "x"},
    {"json_schema": {"type": "nonsense"}},
    {"regex_pattern": "("},
])
def test_bad_or_conflicting_constraints_are_400(server, fields):
    response = httpx.post(server.v1 + "/chat/completions", headers=API, json={"messages": USER, **fields})
    assert response.status_code == 400 and response.json()["error"]["param"]


def test_a_model_folder_can_name_its_own_preset(admin_server, tmp_path):
    (tmp_path / "models" / "slow" / "tabby_config.yml").write_text(yaml.safe_dump(
        {"sampling": {"override_preset": "cold"}}))
    with httpx.stream("POST", admin_server.v1 + "/model/load", headers=ADMIN, json={"model_name": "slow"}) as stream:
        stream.read()
    assert httpx.get(admin_server.v1 + "/sampling/overrides", headers=API).json()["selected_preset"] == "cold"
