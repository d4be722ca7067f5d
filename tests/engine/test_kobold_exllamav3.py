"""The KoboldAI routes on the ExLlamaV3 engine: the real engine class over the library's own
Generator and Job (forward pass scripted), served by real uvicorn and spoken to with httpx."""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from tabby_fixed.chat import ChatModel
from tabby_fixed.config import load_config
from tabby_fixed.engine.base import ModelInfo
from tabby_fixed.server.app import create_app
from tabby_fixed.server.models import LoadedModel
from tests.engine.scripted_generator import ScriptedGenerator
from tests.engine.test_worker import engine_on, script
from tests.live_server import live_app

PROMPT = "<|im_start|>user\nwrite it<|im_end|>\n<|im_start|>assistant\n"


def test_generate_stream_and_tokencount(model_folder: Path, tokenizer, tmp_path: Path):
    generator = ScriptedGenerator(model_folder, script(tokenizer, "def write_file(path, content)"))
    engine = engine_on(lambda: generator, tokenizer)
    engine.info = ModelInfo(name=model_folder.name, max_seq_len=3000, chat_template=None, chat_template_name=None,
                            tool_format=None, reasoning=False)
    app = create_app(load_config(["--disable-auth", "true", "--api-servers", "Kobold"], environ={}, cwd=tmp_path))
    app.state.model = LoadedModel(engine, ChatModel(model_folder.name, None, None, None, False), model_folder, {})
    try:
        with live_app(app) as server:
            whole = httpx.post(server.url + "/api/v1/generate", timeout=30,
                               json={"prompt": PROMPT, "max_length": 50, "genkey": "KCPP1"}).json()
            assert whole == {"results": [{"text": "def write_file(path, content)"}]}
            short = httpx.post(server.url + "/api/v1/generate", json={"prompt": PROMPT, "max_length": 2}).json()
            assert short == {"results": [{"text": engine.decode(generator.script[:2])}]}  # max_length: tokens
            stream = httpx.post(server.url + "/api/extra/generate/stream", timeout=30,
                                json={"prompt": PROMPT, "max_length": 50, "stop_sequence": ["(path"]})
            tokens = [json.loads(line[len("data: "):])["token"] for line in stream.text.splitlines()
                      if line.startswith("data: ")]
            assert "".join(tokens) == "def write_file"
            count = httpx.post(server.url + "/api/extra/tokencount", json={"prompt": PROMPT}).json()
            assert count["ids"] == engine.encode(PROMPT) and count["value"] == len(count["ids"])
            assert httpx.get(server.url + "/api/v1/config/max_length").json() == {"value": 3000}
            assert engine.active_jobs() == 0
    finally:
        app.state.model = None  # the engine has no GPU load to unload; stop its worker here
        engine._worker.stop()
