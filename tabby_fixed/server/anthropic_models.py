"""Request bodies of the Anthropic Messages routes, and their translation into a chat request.

Claude Code and the ``anthropic`` SDK send many fields we have no use for (``metadata``,
``context_management``, ``output_config``, ``cache_control`` on any block, new block types):
unknown fields are kept and ignored, never a 400. What is translated:

- ``system`` (a string or text blocks) and ``role: "system"`` entries inside ``messages`` become
  the one leading system message, in order, blocks separated by a blank line (chat templates
  accept a system message only first); Claude Code's ``x-anthropic-billing-header`` block is
  left out;
- ``text`` blocks become text, ``image`` blocks image parts (left out without vision, as in
  chat completions), ``thinking`` blocks the assistant message's ``reasoning_content``;
- ``tool_use`` blocks become the assistant's ``tool_calls``; ``tool_result`` blocks (string or
  text blocks; ``is_error`` prefixes ``Error: ``) become ``role: "tool"`` messages, placed before
  the rest of their user message;
- ``tools`` (``input_schema``) become function tools; server tools (``web_search_...``,
  ``bash_...``: a ``type`` other than ``custom``) are skipped with a log line;
- ``tool_choice`` ``auto``/``any``/``tool``/``none`` become ``auto``/``required``/the named
  tool/``none``; ``disable_parallel_tool_use`` becomes ``parallel_tool_calls: false``;
- ``thinking`` ``enabled``/``adaptive`` sets the template variable ``enable_thinking`` (``disabled``
  clears it); ``budget_tokens`` is the reasoning budget (``reasoning_budget_tokens``);
- ``max_tokens``, ``stop_sequences``, ``temperature``, ``top_p``, ``top_k`` are the sampler's.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Literal

from pydantic import Field

from .conversation import Conversation
from .requests import ChatCompletionRequest, RequestBody, validated

logger = logging.getLogger(__name__)


class ContentBlock(RequestBody):
    """Any content block; which fields matter depends on ``type``, checked in translation."""

    type: str
    text: str | None = None
    thinking: str | None = None
    id: str | None = None
    name: str | None = None
    input: dict[str, Any] | None = None
    tool_use_id: str | None = None
    content: str | list[ContentBlock] | None = None
    is_error: bool = False
    source: dict[str, Any] | None = None


class AnthropicMessage(RequestBody):
    role: Literal["user", "assistant", "system"]
    content: str | list[ContentBlock]


class AnthropicTool(RequestBody):
    type: str | None = None  # None or "custom": a function tool; anything else is a server tool
    name: str
    description: str | None = None
    input_schema: dict[str, Any] | None = None


class AnthropicToolChoice(RequestBody):
    type: Literal["auto", "any", "tool", "none"]
    name: str | None = None
    disable_parallel_tool_use: bool = False


class ThinkingConfig(RequestBody):
    type: str  # enabled | adaptive | disabled
    budget_tokens: int | None = None


class MessagesRequest(RequestBody):
    """``POST /v1/messages`` and ``/v1/messages/count_tokens`` (which ignores the sampler fields)."""

    model: str | None = None
    messages: list[AnthropicMessage] = Field(min_length=1)
    system: str | list[ContentBlock] | None = None
    max_tokens: int | None = Field(None, ge=0)  # required by Anthropic; absent here: up to the context's end
    stop_sequences: list[str] | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    stream: bool = False
    tools: list[AnthropicTool] | None = None
    tool_choice: AnthropicToolChoice | None = None
    thinking: ThinkingConfig | None = None


def _text_of(content: str | list[ContentBlock] | None) -> str:
    if isinstance(content, list):
        return "".join(block.text or "" for block in content if block.type == "text")
    return content or ""


#: Claude Code opens its system prompt with a block like ``x-anthropic-billing-header:
#: cc_version=2.1.332.9f8; cc_entrypoint=sdk-cli;`` whose stamp changes between conversations;
#: it means nothing to a model, and left in it would spoil the prefix cache for the long prompt behind it.
_BILLING_HEADER = "x-anthropic-billing-header:"


def _add_system(conversation: Conversation, system: str | list[ContentBlock] | None) -> None:
    """Each system text block on its own (they are paragraphs), less Claude Code's billing stamp."""
    for block in [ContentBlock(type="text", text=system)] if isinstance(system, str) else system or []:
        if block.type == "text" and not (block.text or "").startswith(_BILLING_HEADER):
            conversation.system(block.text or "")


def _add_user(conversation: Conversation, blocks: list[ContentBlock]) -> None:
    """Tool results first, as ``role: tool`` messages; then the user's own text and images."""
    parts: list[dict[str, Any]] = []
    for block in blocks:
        if block.type == "tool_result":
            text = _text_of(block.content)
            conversation.tool_result(block.tool_use_id, f"Error: {text}" if block.is_error else text)
        elif block.type == "text":
            parts.append({"type": "text", "text": block.text or ""})
        elif block.type == "image":
            parts.append({"type": "image_url", "image_url": block.source or {}})
        else:
            logger.debug("messages: a user %s block is ignored", block.type)
    if parts:
        conversation.user(parts)


def _add_assistant(conversation: Conversation, blocks: list[ContentBlock]) -> None:
    conversation.reasoning("".join(block.thinking or "" for block in blocks if block.type == "thinking"))
    conversation.assistant("".join(block.text or "" for block in blocks if block.type == "text"))
    for block in blocks:
        if block.type == "tool_use":
            conversation.call(block.id, block.name or "", json.dumps(block.input or {}, ensure_ascii=False))


def _tools(tools: list[AnthropicTool]) -> list[dict[str, Any]]:
    functions = []
    for tool in tools:
        if tool.type not in (None, "custom"):
            logger.info("messages: the server tool %r (%s) is not available here and was left out", tool.name,
                        tool.type)
            continue
        functions.append({"type": "function", "function": {
            "name": tool.name, "description": tool.description,
            "parameters": tool.input_schema or {"type": "object", "properties": {}}}})
    return functions


def _tool_choice(choice: AnthropicToolChoice) -> str | dict[str, Any]:
    if choice.type == "tool":
        return {"type": "function", "function": {"name": choice.name}}
    return {"auto": "auto", "any": "required", "none": "none"}[choice.type]


def to_chat_request(body: MessagesRequest) -> ChatCompletionRequest:
    """The chat request that serves a Messages request; a 400 names the Messages field at fault."""
    conversation = Conversation()
    _add_system(conversation, body.system)
    for message in body.messages:
        blocks = [ContentBlock(type="text", text=message.content)] if isinstance(message.content, str) \
            else message.content
        if message.role == "system":
            _add_system(conversation, blocks)
        elif message.role == "user":
            _add_user(conversation, blocks)
        else:
            _add_assistant(conversation, blocks)
    messages = conversation.messages()
    chat: dict[str, Any] = {"model": body.model, "messages": messages, "stream": body.stream,
                            "max_tokens": body.max_tokens, "stop": body.stop_sequences,
                            "temperature": body.temperature, "top_p": body.top_p, "top_k": body.top_k}
    functions = _tools(body.tools or [])
    if functions:
        chat["tools"] = functions
        if body.tool_choice is not None:
            chat["tool_choice"] = _tool_choice(body.tool_choice)
            chat["parallel_tool_calls"] = not body.tool_choice.disable_parallel_tool_use
    if body.thinking is not None:
        chat["enable_thinking"] = body.thinking.type != "disabled"
        if body.thinking.type != "disabled" and body.thinking.budget_tokens is not None:
            chat["reasoning_budget_tokens"] = body.thinking.budget_tokens  # the reasoning budget, as in chat
    return validated({k: v for k, v in chat.items() if v is not None}, ChatCompletionRequest)
