"""Serve upstream TabbyAPI's own FastAPI app with a stand-in model container, for ``make upstream-check``.

    cd <upstream checkout> && <upstream venv>/bin/python scripts/upstream_standin.py --tool-format F --port P

Runs inside upstream's virtual environment with the checkout as the working directory: the app is
upstream's ``endpoints.server.setup_app()``, every route, dependency and chat-completion path is
upstream's code. Only ``common.model.container`` is replaced, by a container that exposes what
upstream's ExLlamaV3 container exposes to the chat path (its attributes, ``get_special_tokens``,
``validate_context_length``, ``stream_generate`` yielding text chunks then a finish chunk) and
generates a script instead of sampling a model: the last user message is JSON
``{"emit": TEXT, "chunk": N}`` and the "model" writes TEXT in pieces of N characters.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import sys
from collections.abc import AsyncIterator
from typing import Any

# A chat template of the usual shape; the prompt it renders is not what the stand-in answers from.
TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message.role }}\n{{ message.content }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


class StandInHFModel:
    def add_bos_token(self) -> bool:
        return False


class StandInContainer:
    """Upstream's model container interface, answering with the text the request scripts."""

    def __init__(self, tool_format: str, prompt_template: Any) -> None:
        self.model_dir = pathlib.Path("stand-in")
        self.prompt_template = prompt_template
        self.tool_format = tool_format
        self.harmony = False
        self.muse_glimmer = False
        self.reasoning = False
        self.reasoning_start_token = "<think>"
        self.reasoning_end_token = "</think>"
        self.tool_calls_in_reasoning = True
        self.start_in_reasoning = "auto"
        self.reasoning_budget_tokens = None
        self.reasoning_budget_message = None
        self.template_vars_default: dict[str, Any] = {}
        self.template_vars_force: dict[str, Any] = {}
        self.use_vision = False
        self.loaded = True
        self.hf_model = StandInHFModel()

    def get_special_tokens(self, add_bos_token: bool = True, ban_eos_token: bool = False) -> dict[str, str]:
        return {"bos_token": "", "eos_token": "<|im_end|>", "pad_token": "", "unk_token": ""}

    def validate_context_length(self, prompt: str, params: Any, mm_embeddings: Any = None) -> None:
        """The script always fits."""

    def constrain_generation_output(self, request_id: str, text: str) -> bool:
        return False

    async def stream_generate(self, request_id: str, prompt: str, params: Any, disconnect_handler: Any = None,
                              mm_embeddings: Any = None, filter_trigger: str | None = None
                              ) -> AsyncIterator[dict[str, Any]]:
        script = json.loads(params.messages[-1].content)
        text, size = script["emit"], script["chunk"]
        for offset in range(0, len(text), size):
            await asyncio.sleep(0)
            yield {"request_id": request_id, "text": text[offset:offset + size], "token_ids": [0],
                   "prompt_tokens": len(prompt), "generated_tokens": offset // size + 1, "offset": offset}
        yield {"request_id": request_id, "prompt_tokens": len(prompt), "gen_tokens": -(-len(text) // size),
               "prompt_time": 0.0, "gen_time": 0.0, "total_time": 0.0, "queue_time": 0.0, "cached_tokens": 0,
               "finish_reason": "stop", "eos_reason": "stop_token", "stop_str": "<|im_end|>", "full_text": text}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tool-format", required=True)
    parser.add_argument("--port", type=int, required=True)
    options = parser.parse_args()

    sys.path.insert(0, str(pathlib.Path.cwd()))
    import uvicorn
    from common import auth, model
    from common.templating import PromptTemplate
    from endpoints.server import setup_app

    auth.DISABLE_AUTH = True  # what `disable_auth: true` in config.yml sets
    model.container = StandInContainer(options.tool_format, PromptTemplate("stand-in", TEMPLATE))
    uvicorn.run(setup_app("127.0.0.1", options.port), host="127.0.0.1", port=options.port, log_level="warning")


if __name__ == "__main__":
    main()
