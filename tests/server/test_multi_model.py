"""Several models on one server (``model.models``), on scripted models: routing by ``model``,
loading on first use, the bound on loaded models, idle unloading, per-model templates and presets."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from tabby_fixed.config import ConfigError, load_config
from tabby_fixed.engine.base import GenerationParams, GenerationRequest
from tabby_fixed.server.app import create_app
from tests.live_server import LiveServer, live_server

KEY = "k" * 32
SCRIPTS: dict[str, dict[str, Any]] = {
    "alpha": {"default": "I am alpha", "max_seq_len": 1000},
    "beta": {"default": "I am beta and I talk a lot"},
    "gamma": {"default": "I am gamma"},
    "slow": {"default": "tick " * 15, "token_delay_ms": 20},
}


def workspace(root: Path, model: dict[str, Any]) -> Path:
    """Scripted models, a template and a preset next to a config.yml with this ``model`` section."""
    for name, script in SCRIPTS.items():
        (root / "models" / name).mkdir(parents=True)
        (root / "models" / name / "scripted.yml").write_text(yaml.safe_dump(script))
    (root / "templates").mkdir()
    (root / "templates" / "plain.jinja").write_text("{% for m in messages %}{{ m.content }}\n{% endfor %}")
    (root / "sampler_overrides").mkdir()
    (root / "sampler_overrides" / "short.yml").write_text(yaml.safe_dump({"max_tokens": {"override": 3,
                                                                                         "force": True}}))
    (root / "api_tokens.yml").write_text(yaml.safe_dump({"api_key": KEY, "admin_key": "a" * 32}))
    config = root / "config.yml"
    config.write_text(yaml.safe_dump({"model": {"model_dir": "models", **model}}))
    return config


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Any]:
    servers: list[Any] = []

    def run(**model: Any) -> LiveServer:
        config = load_config(["--config", str(workspace(tmp_path, model))], environ={}, cwd=tmp_path)
        servers.append(live_server(config))
        return servers[-1].__enter__()

    yield run
    for server in servers:
        server.__exit__(None, None, None)


def ask(server: LiveServer, model: str) -> Any:
    client = openai.OpenAI(base_url=server.v1, api_key=KEY, max_retries=0)
    return client.chat.completions.create(model=model, messages=[{"role": "user", "content": "who are you?"}])


def loaded(server: LiveServer) -> list[str]:
    return [engine.info.name for engine in server.app.state.models.loaded()]


def listing(server: LiveServer) -> dict[str, dict[str, Any]]:
    body = httpx.get(server.v1 + "/models", headers={"authorization": f"Bearer {KEY}"}).json()
    return {card["id"]: card for card in body["data"]}


def test_requests_pick_their_model_which_loads_on_first_use(start):
    server = start(models=["alpha", "beta", "gamma"], max_loaded_models=3)
    assert loaded(server) == []
    models = listing(server)
    assert list(models) == ["alpha", "beta", "gamma"]
    assert models["alpha"]["max_model_len"] == 1000 and models["beta"]["max_model_len"] == 32768
    assert not any(card["loaded"] for card in models.values())
    for name in ("beta", "alpha", "beta"):
        reply = ask(server, name)
        assert reply.model == name and reply.choices[0].message.content.startswith(f"I am {name}")
    assert loaded(server) == ["alpha", "beta"], "least recently used first"
    assert {name for name, card in listing(server).items() if card["loaded"]} == {"alpha", "beta"}
    assert ask(server, "gpt-4o").model == "beta", "a name it does not serve gets the model used last"


def test_admin_unload_unloads_them_all_and_loads_nothing(start):
    server = start(models=["alpha", "beta"], max_loaded_models=2)
    admin = {"authorization": "Bearer " + "a" * 32}
    assert httpx.post(server.v1 + "/model/unload", headers=admin).status_code == 200
    loads = [s for s in server.app.state.metrics.load_seconds.collect()[0].samples if s.name.endswith("_count")]
    assert loaded(server) == [] and loads == [], "nothing was loaded just to be unloaded"
    ask(server, "alpha"), ask(server, "beta")
    assert httpx.post(server.v1 + "/model/unload", headers=admin).status_code == 200
    assert loaded(server) == [] and server.app.state.model is None


def test_at_most_max_loaded_models_stay_loaded(start):
    server = start(models=["alpha", "beta", "gamma"], max_loaded_models=2)
    for name in ("alpha", "beta", "alpha", "gamma"):
        assert ask(server, name).model == name
    assert loaded(server) == ["alpha", "gamma"], "beta was the least recently used"
    assert ask(server, "beta").model == "beta"
    assert loaded(server) == ["gamma", "beta"]
    text = httpx.get(server.url + "/metrics", headers={"authorization": f"Bearer {KEY}"}).text
    samples = {s.name: s for family in text_string_to_metric_families(text) for s in family.samples}
    assert samples["vllm:lora_requests_info"].labels == {
        "max_lora": "2", "running_lora_adapters": "gamma,beta", "waiting_lora_adapters": ""}
    loads = {s.labels["model"]: s.value for family in text_string_to_metric_families(text) for s in family.samples
             if s.name == "tabby_model_load_seconds_count"}
    assert loads == {"alpha": 1, "beta": 2, "gamma": 1}


def test_a_busy_model_is_not_unloaded_to_make_room(start):
    """With one slot, a request for another model waits for the running stream to end; the stream
    is not cut short."""
    server = start(models=["slow", "alpha"], max_loaded_models=1)
    client = openai.OpenAI(base_url=server.v1, api_key=KEY, max_retries=0)
    stream = client.chat.completions.create(model="slow", stream=True, messages=[{"role": "user", "content": "go"}])
    first = next(iter(stream))
    other: dict[str, Any] = {}
    waiter = threading.Thread(target=lambda: other.update(reply=ask(server, "alpha")))
    waiter.start()
    rest = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    waiter.join(10)
    assert first.choices[0].delta.role == "assistant" and rest == "tick " * 15
    assert other["reply"].model == "alpha" and loaded(server) == ["alpha"]


def test_idle_models_are_unloaded(start):
    server = start(models=["alpha", "slow"], max_loaded_models=2, idle_unload_seconds=0.2)
    assert ask(server, "alpha").model == "alpha"
    client = openai.OpenAI(base_url=server.v1, api_key=KEY, max_retries=0)
    text = "".join(chunk.choices[0].delta.content or "" for chunk in client.chat.completions.create(
        model="slow", stream=True, messages=[{"role": "user", "content": "go"}]) if chunk.choices)
    assert text == "tick " * 15, "a stream longer than the idle time runs to its end"
    deadline = time.monotonic() + 5
    while loaded(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert loaded(server) == []
    assert ask(server, "alpha").model == "alpha", "and loads again when asked for"


def test_each_model_has_its_own_template_and_preset(start):
    server = start(models=["alpha", {"name": "beta", "prompt_template": "plain", "override_preset": "short"}],
                   max_loaded_models=2)
    beta = ask(server, "beta")
    assert beta.choices[0].message.content == "I am" and beta.choices[0].finish_reason == "length", \
        "beta's preset forces max_tokens: 3 (I, space, am)"
    card = httpx.get(server.v1 + "/model", headers={"authorization": f"Bearer {KEY}"}).json()
    assert card["id"] == "beta" and card["parameters"]["prompt_template"] == "plain"
    alpha = ask(server, "alpha")
    assert alpha.choices[0].message.content == "I am alpha" and alpha.choices[0].finish_reason == "stop"
    card = httpx.get(server.v1 + "/model", headers={"authorization": f"Bearer {KEY}"}).json()
    assert card["id"] == "alpha" and card["parameters"]["prompt_template"] == "chatml_tools"


def test_unknown_preset_is_a_clear_error_and_loads_nothing(start):
    server = start(models=[{"name": "alpha", "override_preset": "missing"}])
    client = openai.OpenAI(base_url=server.v1, api_key=KEY, max_retries=0)
    with pytest.raises(openai.NotFoundError, match="missing"):
        client.chat.completions.create(model="alpha", messages=[{"role": "user", "content": "hi"}])
    assert loaded(server) == []


@settings(max_examples=25, deadline=None)
@given(bound=st.integers(1, 3), asked=st.lists(st.sampled_from(["alpha", "beta", "gamma", "slow"]), max_size=12))
def test_the_loaded_models_are_the_last_ones_asked_for(tmp_path_factory, bound, asked):
    """Invariant of the pool: after any sequence of requests (each runs a one-token job, as a
    request does), the loaded models are the last ``bound`` distinct ones asked for, and the one
    asked for last is the default."""
    root = tmp_path_factory.mktemp("pool")
    config = load_config(["--config", str(workspace(root, {"models": list(SCRIPTS), "max_loaded_models": bound}))],
                         environ={}, cwd=root)
    app = create_app(config)
    manager = app.state.models

    async def run() -> None:
        recent: list[str] = []
        for name in asked:
            model = await manager.acquire(name)
            assert model.name == name
            async for _ in await model.engine.generate(GenerationRequest("hi", GenerationParams(max_tokens=1))):
                pass
            recent = [*[n for n in recent if n != name], name][-bound:]
            assert [engine.info.name for engine in manager.loaded()] == recent
            assert app.state.model.name == name
        await manager.unload()
        assert manager.loaded() == [] and app.state.model is None

    asyncio.run(run())


def test_a_model_handed_to_a_request_stays_until_its_job_ran(tmp_path: Path):
    """Between a request's choice of a model and its job's start, the model is not unloaded to
    make room: the other request waits, and gets its model once that job has run."""
    config = load_config(["--config", str(workspace(tmp_path, {"models": ["alpha", "beta"]}))], environ={},
                         cwd=tmp_path)
    manager = create_app(config).state.models

    async def run() -> None:
        alpha = await manager.acquire("alpha")
        other = asyncio.ensure_future(manager.acquire("beta"))
        await asyncio.sleep(0.3)
        assert not other.done() and [e.info.name for e in manager.loaded()] == ["alpha"]
        async for _ in await alpha.engine.generate(GenerationRequest("hi", GenerationParams(max_tokens=1))):
            pass
        assert (await asyncio.wait_for(other, 5)).name == "beta"
        assert [e.info.name for e in manager.loaded()] == ["beta"]

    asyncio.run(run())


def test_models_config_takes_names_or_entries_and_each_once(tmp_path: Path):
    config = load_config(["--models", "alpha", "{name: beta, prompt_template: plain}", "--max-loaded-models", "2"],
                         environ={}, cwd=tmp_path)
    assert [(m.name, m.prompt_template) for m in config.model.models] == [("alpha", None), ("beta", "plain")]
    with pytest.raises(ConfigError, match="alpha is listed more than once"):
        load_config(["--models", "alpha", "alpha"], environ={}, cwd=tmp_path)
    with pytest.raises(ConfigError, match="max_loaded_models"):
        load_config(["--max-loaded-models", "0"], environ={}, cwd=tmp_path)


@pytest.mark.parametrize(("flags", "named"), [
    (["--max-loaded-models", "2"], "model.max_loaded_models (only with model.models)"),
    (["--idle-unload-seconds", "60"], "model.idle_unload_seconds (only with model.models)"),
    (["--models", "alpha", "--inline-model-loading", "true"], "model.inline_model_loading"),
])
def test_keys_without_effect_are_named_at_start(tmp_path: Path, caplog, flags, named):
    create_app(load_config(flags, environ={}, cwd=tmp_path))
    assert any(named in record.getMessage() and "has no effect" in record.getMessage() for record in caplog.records)
