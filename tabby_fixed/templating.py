"""Chat template rendering, as Hugging Face's ``apply_chat_template`` does it.

Templates are untrusted model-repository data, so they run in jinja2's immutable sandbox. The
environment matches the one HF templates are written for: ``trim_blocks``, ``lstrip_blocks``,
``tojson`` that keeps non-ASCII text and accepts ``indent``, ``raise_exception`` and
``strftime_now``. OpenAI clients send a past call's ``arguments`` as a JSON string, but XML-style
templates (Qwen3-Coder, GLM, MiniMax) iterate over them as a mapping, so they are decoded first.
"""

from __future__ import annotations

import contextlib
import copy
import json
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment


class ChatTemplateError(ValueError):
    """The template refused the conversation or could not be rendered; the message says why."""


def _raise_exception(message: str) -> None:
    raise ChatTemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(pattern: str) -> str:
    return datetime.now().strftime(pattern)


@lru_cache(maxsize=16)
def _compile(source: str) -> Any:
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=["jinja2.ext.loopcontrols"])
    environment.filters["tojson"] = _tojson
    environment.globals["raise_exception"] = _raise_exception
    environment.globals["strftime_now"] = _strftime_now
    return environment.from_string(source)


def decode_call_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of messages whose tool calls carry ``arguments`` as a mapping, not a JSON string."""
    decoded = copy.deepcopy(messages)
    for message in decoded:
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                with contextlib.suppress(ValueError):
                    function["arguments"] = json.loads(function["arguments"] or "{}")
    return decoded


def render_chat(source: str, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                add_generation_prompt: bool = True, **variables: Any) -> str:
    """The prompt text a chat template makes of a conversation."""
    try:
        return _compile(source).render(messages=decode_call_arguments(messages), tools=tools,
                                       add_generation_prompt=add_generation_prompt, **variables)
    except ChatTemplateError:
        raise
    except (TemplateError, TypeError, ValueError, KeyError, AttributeError) as error:
        raise ChatTemplateError(f"chat template failed: {error}") from error


def _template_from_tokenizer_config(data: Any, wanted: str | None) -> str | None:
    """``chat_template`` is a string, or a list of ``{name, template}`` entries (named variants)."""
    template = data.get("chat_template") if isinstance(data, dict) else None
    if isinstance(template, str):
        return template if wanted is None else None
    if isinstance(template, list):
        entries = {e.get("name"): e.get("template") for e in template if isinstance(e, dict)}
        chosen = entries.get(wanted) if wanted else entries.get("default", next(iter(entries.values()), None))
        return chosen if isinstance(chosen, str) else None
    return None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def find_chat_template(model_folder: Path, prompt_template: str | None = None,
                       templates_dir: Path | None = None) -> tuple[str, str] | None:
    """The model's chat template as ``(name, source)``, in TabbyAPI's lookup order.

    With ``prompt_template`` set: ``templates/<name>.jinja``, then the entry of that name in
    ``tokenizer_config.json``. Then the model folder's ``tabby_template.jinja``,
    ``chat_template.jinja``, ``chat_template.json`` and ``tokenizer_config.json``.
    """
    tokenizer_config = _read_json(model_folder / "tokenizer_config.json")
    if prompt_template:
        named = (templates_dir or Path("templates")) / f"{prompt_template}.jinja"
        if named.is_file():
            return prompt_template, named.read_text(encoding="utf-8")
        source = _template_from_tokenizer_config(tokenizer_config, prompt_template)
        if source is not None:
            return prompt_template, source
    for file_name in ("tabby_template.jinja", "chat_template.jinja"):
        path = model_folder / file_name
        if path.is_file():
            return path.stem, path.read_text(encoding="utf-8")
    chat_template_json = _read_json(model_folder / "chat_template.json")
    if isinstance(chat_template_json, dict) and isinstance(chat_template_json.get("chat_template"), str):
        return "chat_template", chat_template_json["chat_template"]
    source = _template_from_tokenizer_config(tokenizer_config, None)
    return ("tokenizer_config", source) if source is not None else None
