"""A chat request made into a prompt, and the parser its output goes through.

Both depend on the loaded model (its template, tool format and reasoning tags) and on the request
(its tools, ``tool_choice``, template variables), given as a ``ChatInput`` of plain values that
every chat-shaped API builds from its own request body. Nothing here knows about HTTP: problems
are domain errors (``domain_errors``), which the server reports in each API's shape.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import Any

from .domain_errors import ArgumentsNotJson, NoChatTemplate, TemplateFailed
from .output import OutputParser, ReasoningSettings
from .reasoning import starts_in_reasoning
from .tags import THINK_END, THINK_START
from .templating import ChatTemplateError, render_chat
from .toolcalls import ToolCallParser

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChatModel:
    """What a chat needs to know about the loaded model, settled once at load."""

    name: str
    chat_template: str | None
    chat_template_name: str | None
    tool_format: str | None
    reasoning: bool
    reasoning_start: str = THINK_START
    reasoning_end: str = THINK_END
    start_in_reasoning: str = "auto"  # auto | always | never
    tool_calls_in_reasoning: bool = True
    template_vars_default: dict[str, Any] | None = None
    template_vars_force: dict[str, Any] | None = None
    bos_token: str | None = None
    eos_token: str | None = None


@dataclass(frozen=True)
class ChatInput:
    """What the pipeline needs of a chat request, whichever API it came in by.

    ``messages`` are as templates expect them: ``role``, text ``content`` and, where present,
    ``reasoning_content``, ``tool_calls`` (OpenAI's shape), ``tool_call_id`` and ``name``;
    ``tools`` are OpenAI tool definitions.
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None  # "none" | "auto" | "required" | a named tool
    parallel_tool_calls: bool = True
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    response_prefix: str | None = None
    template_vars: dict[str, Any] = field(default_factory=dict)
    reasoning_effort: str | None = None
    enable_thinking: bool | None = None


def _undecodable_arguments(messages: list[dict[str, Any]]) -> list[str]:
    places = []
    for m, message in enumerate(messages):
        for c, call in enumerate(message.get("tool_calls") or ()):
            arguments = call.get("function", {}).get("arguments")
            if isinstance(arguments, str):
                try:
                    json.loads(arguments or "{}")
                except ValueError:
                    places.append(f"messages[{m}].tool_calls[{c}].function.arguments")
    return places


def build_prompt(model: ChatModel, chat: ChatInput) -> str:
    if not model.chat_template:
        raise NoChatTemplate("Chat completions are disabled because the model has no chat template; use "
                             "/v1/completions or give the model a chat_template.jinja.")
    variables: dict[str, Any] = dict(model.template_vars_default or {})
    if chat.reasoning_effort is not None:
        variables["reasoning_effort"] = chat.reasoning_effort
    if chat.enable_thinking is not None:
        variables["enable_thinking"] = chat.enable_thinking
    variables.update(chat.template_vars)
    variables.update(model.template_vars_force or {})
    variables.update(bos_token=model.bos_token or "", eos_token=model.eos_token or "")
    try:
        prompt = render_chat(model.chat_template, chat.messages, tools=chat.tools or None,
                             add_generation_prompt=chat.add_generation_prompt, **variables)
    except ChatTemplateError as error:
        undecodable = _undecodable_arguments(chat.messages)
        if undecodable:
            raise ArgumentsNotJson(f"{undecodable[0]} is not valid JSON, and the chat template needs the arguments "
                                   f"as an object ({error}).", undecodable[0]) from error
        raise TemplateFailed(f"The chat template could not render these messages: {error}") from error
    if chat.continue_final_message:
        prompt = _reopen_final_message(prompt, chat.messages[-1]["content"])
    return prompt + (chat.response_prefix or "")


def _reopen_final_message(prompt: str, final_text: str) -> str:
    """Cut the rendered prompt right after the final message's text, so generation continues it."""
    at = prompt.rfind(final_text) if final_text else -1
    return prompt[:at + len(final_text)] if at >= 0 else prompt


def last_user_text(chat: ChatInput) -> str:
    return next((m["content"] for m in reversed(chat.messages) if m["role"] == "user"), "")


def transcript(chat: ChatInput) -> tuple[tuple[str, str], ...]:
    """Every message as ``(role, text)``: what a scripted model answers from."""
    return tuple((m["role"], m["content"]) for m in chat.messages)


def output_parser(model: ChatModel, chat: ChatInput, prompt: str) -> OutputParser:
    """Reasoning split when the model reasons; tool parsing when the request can get calls.

    A prompt that ends inside an opened reasoning block (Qwen3.5, GLM-4.7 and MiniMax-M2 templates
    open ``<think>`` themselves) is split even with ``model.reasoning`` off: the output certainly
    starts with reasoning, and leaving it in the content would hand the client the thoughts and a
    stray ``</think>``.
    """
    tool_format = model.tool_format if chat.tools and chat.tool_choice != "none" else None
    tool_parser = ToolCallParser(tool_format, chat.tools) if tool_format is not None else None
    opened = starts_in_reasoning(prompt, model.reasoning_start, model.reasoning_end)
    reasoning = None
    if model.reasoning or (opened and model.start_in_reasoning != "never"):
        start = {"always": True, "never": False}.get(model.start_in_reasoning, opened)
        reasoning = ReasoningSettings(start, model.reasoning_start, model.reasoning_end,
                                      model.tool_calls_in_reasoning)
    return OutputParser(tool_parser=tool_parser, reasoning=reasoning, first_call_only=not chat.parallel_tool_calls)
