"""Fixtures: scripted models in a temporary model_dir, served by real uvicorn, spoken to by the
real openai SDK and httpx."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
import yaml

from tabby_fixed.config import load_config
from tests.live_server import LiveServer, live_server

API_KEY = "a" * 32
ADMIN_KEY = "b" * 32

#: ``RAW:<text>`` makes the scripted model answer exactly <text>: any model output can be served.
SCRIPTS = {
    "tester": {"tool_format": "qwen3_coder", "max_seq_len": 4096,
               "responses": [{"match": r"\ARAW:(?P<text>.*)\Z", "output": "{text}"},
                             {"match": r"\ACRASH:(?P<text>.*)\Z", "output": "{text}", "error": "injected fault"}],
               "default": "default answer"},
    "slow": {"tool_format": "qwen3_coder", "token_delay_ms": 20,
             "responses": [], "default": "tick " * 400},
    "thinker": {"tool_format": "qwen3_coder", "reasoning": True, "chat_template": "template.jinja",
                "responses": [{"match": r"\ARAW:(?P<text>.*)\Z", "output": "{text}"}]},
    "opener": {"tool_format": "qwen3_coder", "chat_template": "template.jinja",  # reasoning not configured
               "responses": [{"match": r"\ARAW:(?P<text>.*)\Z", "output": "{text}"}]},
}
THINKER_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
                    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}")


def make_models(root: Path) -> Path:
    models = root / "models"
    for name, script in SCRIPTS.items():
        (models / name).mkdir(parents=True)
        (models / name / "scripted.yml").write_text(yaml.safe_dump(script))
    for name in ("thinker", "opener"):
        (models / name / "template.jinja").write_text(THINKER_TEMPLATE)
    (root / "api_tokens.yml").write_text(yaml.safe_dump({"api_key": API_KEY, "admin_key": ADMIN_KEY}))
    return models


def serve(root: Path, model: str, *flags: str) -> Iterator[LiveServer]:
    config = load_config(["--model-dir", str(root / "models"), "--model-name", model, "--sse-ping-interval", "0.5",
                          *flags], environ={}, cwd=root)
    with live_server(config) as server:
        yield server


@pytest.fixture(scope="session")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("workspace")
    make_models(root)
    return root


@pytest.fixture(scope="session")
def server(workspace: Path) -> Iterator[LiveServer]:
    yield from serve(workspace, "tester")


@pytest.fixture(scope="session")
def thinker(workspace: Path) -> Iterator[LiveServer]:
    """A model whose template opens ``<think>``: its output starts in reasoning."""
    yield from serve(workspace, "thinker")


@pytest.fixture(scope="session")
def demo_server() -> Iterator[LiveServer]:
    """The shipped demo model (examples/models/demo), without keys."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "models"
    config = load_config(["--model-dir", str(examples), "--model-name", "demo", "--disable-auth", "true"],
                         environ={}, cwd=examples)
    with live_server(config) as server:
        yield server


@pytest.fixture(scope="session")
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.v1, api_key=API_KEY, max_retries=0, timeout=30)


@pytest.fixture(scope="session")
def http(server: LiveServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, headers={"authorization": f"Bearer {API_KEY}"}, timeout=30) as http:
        yield http
