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
