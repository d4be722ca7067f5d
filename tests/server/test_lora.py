"""The LoRA routes answer as upstream does on ExLlamaV3: listed, never active, every load refused by name."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tabby_fixed.config import load_config
from tabby_fixed.startup import prepare_process
from tests.live_server import LiveServer
from tests.server.conftest import ADMIN_KEY, API_KEY, serve

ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}
API = {"authorization": f"Bearer {API_KEY}"}


@pytest.fixture(scope="module")
def lora_server(workspace: Path) -> Iterator[LiveServer]:
    (workspace / "loras" / "style-lora").mkdir(parents=True, exist_ok=True)
    (workspace / "loras" / "other-lora").mkdir(exist_ok=True)
    yield from serve(workspace, "tester", "--lora-dir", str(workspace / "loras"))


def test_lists_folders_for_admin_and_active_loras_for_api_keys(lora_server: LiveServer):
    admin = httpx.get(lora_server.v1 + "/loras", headers=ADMIN).json()
    assert admin["object"] == "list"
    assert [(card["id"], card["object"], card["owned_by"]) for card in admin["data"]] == [
        ("other-lora", "lora", "tabbyAPI"), ("style-lora", "lora", "tabbyAPI")]
    assert httpx.get(lora_server.v1 + "/lora/list", headers=ADMIN).json()["data"] == admin["data"]
    assert httpx.get(lora_server.v1 + "/loras", headers=API).json() == {"object": "list", "data": []}
    assert httpx.get(lora_server.v1 + "/lora", headers=API).json() == {"object": "list", "data": []}


def test_load_fails_every_lora_and_says_why(lora_server: LiveServer, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="tabby_fixed.server.lora")
    response = httpx.post(lora_server.v1 + "/lora/load", headers=ADMIN,
                          json={"loras": [{"name": "style-lora", "scaling": 0.8}, {"name": "other-lora"}]})
    assert response.status_code == 200
    body = response.json()
    assert (body["success"], body["failure"]) == ([], ["style-lora", "other-lora"])
    assert "ExLlamaV3 cannot load LoRAs" in body["message"]
    assert "style-lora" in caplog.text
    assert httpx.get(lora_server.v1 + "/lora", headers=ADMIN).json()["data"] == []
    unload = httpx.post(lora_server.v1 + "/lora/unload", headers=ADMIN)
    assert unload.status_code == 200 and unload.json() is None


def test_load_errors(lora_server: LiveServer, demo_server: LiveServer):
    empty = httpx.post(lora_server.v1 + "/lora/load", headers=ADMIN, json={"loras": []})
    assert empty.status_code == 400 and empty.json()["error"]["param"] == "loras"
    no_folder = httpx.post(demo_server.v1 + "/lora/load", json={"loras": [{"name": "x"}]})  # no loras/ there
    assert no_folder.status_code == 400 and "does not exist" in no_folder.json()["error"]["message"]
    assert httpx.post(lora_server.v1 + "/lora/load", headers=API, json={"loras": [{"name": "x"}]}).status_code == 401
    assert httpx.post(lora_server.v1 + "/lora/unload", headers=API).status_code == 401
    negative = httpx.post(lora_server.v1 + "/lora/load", headers=ADMIN, json={"loras": [{"name": "x", "scaling": -1}]})
    assert negative.status_code == 400


def test_configured_loras_are_named_at_start_up(workspace: Path, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING, logger="tabby_fixed.unsupported")
    prepare_process(load_config(["--loras", "{name: style-lora, scaling: 0.5}"], environ={}, cwd=workspace))
    assert "lora.loras (ExLlamaV3 cannot load LoRAs" in caplog.text
