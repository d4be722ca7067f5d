"""TabbyAPI's utility routes, and who may call each route."""

from __future__ import annotations

import httpx
import openai
import pytest

from tests.server.conftest import ADMIN_KEY, API_KEY

USER = [{"role": "user", "content": "RAW:hi"}]
API_ROUTES = [
    ("GET", "/v1/models", None), ("GET", "/v1/model/list", None), ("GET", "/v1/model", None),
    ("GET", "/v1/auth/permission", None), ("GET", "/props", None),
    ("POST", "/v1/chat/completions", {"messages": USER}), ("POST", "/v1/completions", {"prompt": "RAW:hi"}),
    ("POST", "/v1/token/encode", {"text": "hello"}), ("POST", "/v1/token/decode", {"tokens": [0]}),
]
PUBLIC_ROUTES = [("GET", "/health", None), ("GET", "/.well-known/serviceinfo", None)]
KEYS = {
    "no key": ({}, False),
    "wrong key": ({"x-api-key": "c" * 32}, False),
    "wrong bearer": ({"authorization": "Bearer " + "c" * 32}, False),
    "not bearer": ({"authorization": "Basic " + API_KEY}, False),
    "api key header": ({"x-api-key": API_KEY}, True),
    "api bearer": ({"authorization": "Bearer " + API_KEY}, True),
    "admin key in x-api-key": ({"x-api-key": ADMIN_KEY}, True),
    "x-admin-key only (upstream reads it on admin routes alone)": ({"x-admin-key": ADMIN_KEY}, False),
    "admin bearer": ({"authorization": "Bearer " + ADMIN_KEY}, True),
}


@pytest.mark.parametrize(("method", "path", "body"), API_ROUTES, ids=[r[1] for r in API_ROUTES])
@pytest.mark.parametrize("key", KEYS, ids=KEYS)
def test_auth_matrix(server, method: str, path: str, body, key: str):
    headers, allowed = KEYS[key]
    response = httpx.request(method, server.url + path, headers=headers, json=body)
    if allowed:
        assert response.status_code == 200, response.text
    else:
        assert response.status_code == 401
        error = response.json()["error"]
        assert error["type"] == "authentication_error"
        missing = key == "no key" or key.startswith("x-admin-key only")
        assert error["message"] == ("Please provide an API key" if missing else "Invalid API key")


@pytest.mark.parametrize(("method", "path", "body"), PUBLIC_ROUTES, ids=[r[1] for r in PUBLIC_ROUTES])
def test_public_routes_need_no_key(server, method: str, path: str, body):
    assert httpx.request(method, server.url + path).status_code == 200


def test_permission_names_the_key_level(server):
    def level(headers: dict) -> str:
        return httpx.get(server.url + "/v1/auth/permission", headers=headers).json()["permission"]

    assert level({"x-api-key": API_KEY}) == "api" and level({"authorization": f"Bearer {ADMIN_KEY}"}) == "admin"


def test_models_list_depends_on_the_key(server):
    api = httpx.get(server.v1 + "/models", headers={"x-api-key": API_KEY}).json()
    admin = httpx.get(server.v1 + "/models", headers={"x-api-key": ADMIN_KEY}).json()
    assert api["object"] == "list" and [m["id"] for m in api["data"]] == ["tester"]
    assert [m["id"] for m in admin["data"]] == ["opener", "slow", "tester", "thinker"]
    assert all(m["object"] == "model" and m["owned_by"] for m in admin["data"])


def test_retrieve_model_as_the_openai_sdk_does(server, client):
    """``openai.models.retrieve``: the loaded model with its parameters; others only for admin keys."""
    loaded = client.models.retrieve("tester")
    assert (loaded.id, loaded.object, loaded.owned_by) == ("tester", "model", "tabbyAPI")
    assert loaded.model_extra["parameters"]["max_seq_len"] == 4096
    with pytest.raises(openai.NotFoundError) as hidden:
        client.models.retrieve("slow")  # an API key sees only the loaded model, as in the list
    assert hidden.value.code == "model_not_found"
    with openai.OpenAI(base_url=server.v1, api_key=ADMIN_KEY, max_retries=0) as admin:
        other = admin.models.retrieve("slow")
        assert other.id == "slow" and other.model_extra["parameters"] is None
        with pytest.raises(openai.NotFoundError):
            admin.models.retrieve("no-such-model")
    assert httpx.get(server.v1 + "/models/tester").status_code == 401


def test_current_model_card(http: httpx.Client):
    card = http.get("/v1/model").json()
    assert card["id"] == "tester" and card["parameters"]["max_seq_len"] == 4096
    assert card["parameters"]["tool_format"] == "qwen3_coder"


def test_health_and_service_info(http: httpx.Client):
    assert http.get("/health").json() == {"status": "healthy", "issues": []}
    assert http.get("/.well-known/serviceinfo").json()["api"]["openai"]["relative_url"] == "/v1"


def test_props(http: httpx.Client):
    props = http.get("/props").json()
    assert props["default_generation_settings"]["n_ctx"] == 4096 and "<|im_start|>" in props["chat_template"]


def test_token_round_trip(http: httpx.Client):
    encoded = http.post("/v1/token/encode", json={"text": "Hello, world!"}).json()
    assert encoded["length"] == len(encoded["tokens"]) > 0
    assert http.post("/v1/token/decode", json={"tokens": encoded["tokens"]}).json() == {"text": "Hello, world!"}
    rendered = http.post("/v1/token/encode", json={"text": [{"role": "user", "content": "hi"}]}).json()
    assert rendered["length"] > encoded["length"] / 2


def test_cors_preflight(server):
    response = httpx.options(server.v1 + "/chat/completions", headers={
        "origin": "http://localhost:3000", "access-control-request-method": "POST"})
    assert response.status_code == 200 and response.headers["access-control-allow-origin"]
