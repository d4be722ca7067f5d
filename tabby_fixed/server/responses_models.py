"""Request bodies of the OpenAI Responses route, and their translation into a chat request.

Codex CLI speaks only this API. What is translated:

- ``input``: a string (one user message) or items: ``message`` (roles user, assistant, system,
  developer; text parts ``input_text``/``output_text``, images ``input_image``), ``function_call``,
  ``function_call_output`` and ``reasoning`` (its ``content`` text, else its ``summary``), which
  becomes the next assistant message's ``reasoning_content``. Other item types are skipped with
  a log line;
- ``instructions`` and system/developer messages become the leading system message;
- ``tools`` of type ``function`` become function tools; other types (``web_search``,
  ``namespace``, ``image_generation``, ``custom``, ``local_shell`` ...) are skipped with a log line;
- ``tool_choice`` (``auto``/``none``/``required``/``{"type": "function", "name": ...}``),
  ``parallel_tool_calls``, ``max_output_tokens``, ``temperature``, ``top_p``, ``top_k``,
  ``reasoning.effort`` (the template variable ``reasoning_effort``), ``text.format`` (JSON output).

``store``, ``previous_response_id``, ``include`` and the rest are the route's (``responses.py``).
Unknown fields are accepted and ignored.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import Field

from .conversation import Conversation
from .requests import ChatCompletionRequest, RequestBody, validated

logger = logging.getLogger(__name__)


class InputItem(RequestBody):
    """Any input item; which fields matter depends on ``type`` (a bare ``{role, content}`` is a message)."""

    type: str = "message"
    role: str | None = None
    content: str | list[dict[str, Any]] | None = None
    call_id: str | None = None
    name: str | None = None
    arguments: str | None = None
    output: str | list[dict[str, Any]] | None = None
    summary: list[dict[str, Any]] | None = None


class ResponseTool(RequestBody):
    type: str
    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ReasoningConfig(RequestBody):
    effort: str | None = None


class TextConfig(RequestBody):
    format: dict[str, Any] | None = None


class ResponsesRequest(RequestBody):
    model: str | None = None
    input: str | list[InputItem] = Field(default_factory=list)
    instructions: str | None = None
    tools: list[ResponseTool] | None = None
    tool_choice: str | dict[str, Any] | None = None
    parallel_tool_calls: bool = True
    max_output_tokens: int | None = Field(None, ge=0)
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    reasoning: ReasoningConfig | None = None
    text: TextConfig | None = None
    stream: bool = False
    store: bool = True
    previous_response_id: str | None = None


def _text(content: str | list[dict[str, Any]] | None) -> str:
    if isinstance(content, list):
        return "".join(str(part.get("text") or "") for part in content
                       if part.get("type") in ("input_text", "output_text", "text", "summary_text", "reasoning_text"))
    return content or ""


def _parts(content: str | list[dict[str, Any]] | None) -> str | list[dict[str, Any]]:
    """A user message's content as chat content parts: text and images."""
    if not isinstance(content, list):
        return content or ""
    parts: list[dict[str, Any]] = []
    for part in content:
        if part.get("type") in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": part.get("text") or ""})
        elif part.get("type") == "input_image":
            parts.append({"type": "image_url", "image_url": {"url": part.get("image_url")}})
    return parts


def add_items(conversation: Conversation, items: str | list[InputItem]) -> None:
    """Input items (or the string ``input``) into a conversation."""
    if isinstance(items, str):
        conversation.user(items)
        return
    for item in items:
        if item.type == "message":
            if item.role in ("system", "developer"):
                conversation.system(_text(item.content))
            elif item.role == "assistant":
                conversation.assistant(_text(item.content))
            else:
                conversation.user(_parts(item.content))
        elif item.type == "function_call":
            conversation.call(item.call_id, item.name or "", item.arguments or "{}")
        elif item.type == "function_call_output":
            conversation.tool_result(item.call_id, _text(item.output))
        elif item.type == "reasoning":
            conversation.reasoning(_text(item.content) or _text(item.summary))
        else:
            logger.info("responses: an input item of type %r is not supported and was left out", item.type)


def _tools(tools: list[ResponseTool]) -> list[dict[str, Any]]:
    functions = []
    for tool in tools:
        if tool.type != "function" or not tool.name:
            logger.info("responses: the %s tool %r is not available here and was left out", tool.type, tool.name)
            continue
        functions.append({"type": "function", "function": {
            "name": tool.name, "description": tool.description,
            "parameters": tool.parameters or {"type": "object", "properties": {}}}})
    return functions


def _tool_choice(choice: str | dict[str, Any]) -> str | dict[str, Any] | None:
    """A function named in ``tool_choice`` is forced as in chat; a choice of another tool type (or
    ``allowed_tools``) names nothing served here, so it is left out with a log line."""
    if not isinstance(choice, dict):
        return choice
    if choice.get("type") == "function":
        return {"type": "function", "function": {"name": choice.get("name")}}
    logger.info("responses: tool_choice %s has no effect here", choice.get("type"))
    return None


def _response_format(text: TextConfig | None) -> dict[str, Any] | None:
    """``text.format`` to chat's ``response_format``: ``json_schema`` carries its schema flat here."""
    form = text.format if text is not None else None
    if not form or form.get("type") == "text":
        return None
    if form.get("type") == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": form.get("name"), "schema": form.get("schema")}}
    return {"type": form.get("type")}


def to_chat_request(body: ResponsesRequest, history: list[InputItem]) -> ChatCompletionRequest:
    """The chat request that serves a Responses request; ``history`` is the stored conversation
    ``previous_response_id`` names (its items, then its output), which goes before ``input``."""
    conversation = Conversation()
    conversation.system(body.instructions or "")
    add_items(conversation, history)
    add_items(conversation, body.input)
    messages = conversation.messages()
    chat: dict[str, Any] = {"model": body.model, "messages": messages, "stream": body.stream,
                            "max_tokens": body.max_output_tokens, "temperature": body.temperature,
                            "top_p": body.top_p, "top_k": body.top_k,
                            "response_format": _response_format(body.text)}
    functions = _tools(body.tools or [])
    if functions:
        chat["tools"] = functions
        chat["parallel_tool_calls"] = body.parallel_tool_calls
        if body.tool_choice is not None:
            chat["tool_choice"] = _tool_choice(body.tool_choice)  # None is dropped below
    if body.reasoning is not None and body.reasoning.effort is not None:
        chat["reasoning_effort"] = body.reasoning.effort
    return validated({k: v for k, v in chat.items() if v is not None}, ChatCompletionRequest)
