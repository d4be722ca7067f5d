"""A chat request made into a prompt, and the parser its output goes through.

Both depend on the loaded model (its template, tool format and reasoning tags) and on the request
(its tools, ``tool_choice``, template variables), given as a ``ChatInput`` of plain values that
every chat-shaped API builds from its own request body. Nothing here knows about HTTP: problems
are domain errors (``domain_errors``), which the server reports in each API's shape.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .domain_errors import (
    ArgumentsNotJson,
    ConstraintRejected,
    NoChatTemplate,
    ReservedTemplateVariable,
    TemplateFailed,
)
from .engine.base import Constraint
from .output import OutputParser, ParsedCallback, ReasoningSettings
from .reasoning import starts_in_reasoning
from .reasoning_budget import ReasoningBudget, chosen_budget
from .sampling.constraints import compiled
from .sampling.tool_grammar import enforces, tool_call_grammar
from .tags import THINK_END, THINK_START
from .templating import ChatTemplateError, render_chat
from .toolcalls import FORMATS, MessageChannels, ToolCallParser

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
    pad_token: str | None = None
    unk_token: str | None = None
    reasoning_budget_tokens: int | None = None
    reasoning_budget_message: str | None = None


@dataclass(frozen=True)
class ReasoningOptions:
    """OpenRouter's and the Responses API's ``reasoning`` object."""

    effort: str | None = None
    enabled: bool | None = None
    max_tokens: int | None = None


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
    reasoning: ReasoningOptions | None = None
    verbosity: str | None = None
    functions: list[dict[str, Any]] | None = None  # OpenAI's deprecated tools list, passed to the template
    reasoning_budget_tokens: int | None = None
    reasoning_budget_message: str | None = None
    constrained: bool = False  # the output must match a schema, regex or grammar


def in_call_order(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each run of tool results after an assistant's calls, sorted into the order of the calls
    (by ``tool_call_id``), as upstream does: clients return parallel results in any order, and
    some templates (DeepSeek-V4) pair them with the calls by position. Results whose id matches no
    call keep their order, after the others."""
    ordered = list(messages)
    for index, message in enumerate(ordered):
        if message["role"] != "assistant" or not message.get("tool_calls"):
            continue
        order = {call.get("id"): place for place, call in enumerate(message["tool_calls"]) if call.get("id")}
        end = index + 1
        while end < len(ordered) and ordered[end]["role"] == "tool":
            end += 1
        ordered[index + 1:end] = sorted(ordered[index + 1:end],
                                        key=lambda result: order.get(result.get("tool_call_id"), len(order)))
    return ordered


def template_variables(model: ChatModel, chat: ChatInput) -> dict[str, Any]:
    """The variables a template sees besides messages and tools, lowest priority first: the model's
    defaults, the request's ``reasoning`` object, its flat fields, its ``template_vars``, the
    model's forced values; then the tokenizer's special tokens and ``functions`` (upstream's order)."""
    variables: dict[str, Any] = dict(model.template_vars_default or {})
    if chat.reasoning is not None:
        if chat.reasoning.enabled is not None:
            variables["enable_thinking"] = chat.reasoning.enabled
        if chat.reasoning.effort is not None:
            variables["reasoning_effort"] = chat.reasoning.effort
    for name in ("reasoning_effort", "enable_thinking", "verbosity"):
        if getattr(chat, name) is not None:
            variables[name] = getattr(chat, name)
    variables.update(chat.template_vars)
    variables.update(model.template_vars_force or {})
    variables.update(bos_token=model.bos_token or "", eos_token=model.eos_token or "",
                     pad_token=model.pad_token or "", unk_token=model.unk_token or "", functions=chat.functions)
    return variables


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


#: What ``render_chat`` passes itself; a template variable of the same name would collide.
_RESERVED_VARIABLES = frozenset({"messages", "tools", "add_generation_prompt"})


def build_prompt(model: ChatModel, chat: ChatInput) -> str:
    if not model.chat_template:
        raise NoChatTemplate("Chat completions are disabled because the model has no chat template; use "
                             "/v1/completions or give the model a chat_template.jinja.")
    reserved = sorted(_RESERVED_VARIABLES & chat.template_vars.keys())
    if reserved:
        raise ReservedTemplateVariable(f"template_vars cannot set {', '.join(reserved)}: the request's own fields "
                                       f"give them.", "template_vars")
    variables = template_variables(model, chat)
    try:
        prompt = render_chat(model.chat_template, in_call_order(chat.messages), tools=chat.tools or None,
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


def output_parser(model: ChatModel, chat: ChatInput, prompt: str,
                  on_parsed: ParsedCallback | None = None) -> OutputParser:
    """Reasoning split when the model reasons; tool parsing when the request can get calls.

    A prompt that ends inside an opened reasoning block (Qwen3.5, GLM-4.7 and MiniMax-M2 templates
    open ``<think>`` themselves) is split even with ``model.reasoning`` off: the output certainly
    starts with reasoning, and leaving it in the content would hand the client the thoughts and a
    stray ``</think>``. Formats whose answer is channelled messages (harmony) always split by
    their channels, whatever the reasoning settings.
    """
    return OutputParser(tool_parser=tool_parser(model, chat), reasoning=reasoning_settings(model, prompt),
                        first_call_only=not chat.parallel_tool_calls, on_parsed=on_parsed,
                        channels=_channels(model))


def _channels(model: ChatModel) -> MessageChannels | None:
    """The message channels the model's tool format splits reasoning by, if it does."""
    fmt = FORMATS.get(model.tool_format or "")
    return fmt.channels if fmt is not None else None


def tool_parser(model: ChatModel, chat: ChatInput) -> ToolCallParser | None:
    """The request's tool-call parser, when it can get calls: it has tools, and calls are not off."""
    if not chat.tools or chat.tool_choice == "none" or model.tool_format is None:
        return None
    return ToolCallParser(model.tool_format, chat.tools)


def reasoning_settings(model: ChatModel, prompt: str) -> ReasoningSettings | None:
    """How this prompt's output is split into reasoning and content; None when it is not."""
    opened = starts_in_reasoning(prompt, model.reasoning_start, model.reasoning_end)
    if not (model.reasoning or (opened and model.start_in_reasoning != "never")):
        return None
    start = {"always": True, "never": False}.get(model.start_in_reasoning, opened)
    return ReasoningSettings(start, model.reasoning_start, model.reasoning_end, model.tool_calls_in_reasoning)


def tool_choice_name(chat: ChatInput) -> str:
    """``auto``, ``none``, ``required`` or the forced tool's name (no tools: ``none``)."""
    choice = chat.tool_choice
    if not chat.tools:
        return "none"
    if isinstance(choice, dict):
        return str((choice.get("function") or {}).get("name"))
    return choice or "auto"


def chat_constraint(model: ChatModel, chat: ChatInput, prompt: str, requested: Constraint | None,
                    added_tokens: Mapping[str, int]) -> Constraint | None:
    """The request's one output constraint: the tool-call grammar its ``tool_choice``, strict tools
    and ``parallel_tool_calls`` need, or its ``response_format``; starting after the reasoning section."""
    fmt = FORMATS.get(model.tool_format or "")
    syntax = fmt.call_syntax() if fmt is not None else None
    choice = tool_choice_name(chat)
    tools = chat.tools or []
    needed = enforces(tools, choice, chat.parallel_tool_calls) and not (choice == "none" and requested is not None)
    if needed and syntax is None:
        logger.warning("tool_choice %r (strict tools, parallel_tool_calls) is not enforced: the model's tool format "
                       "(%s) has no call grammar", choice, model.tool_format)
    lark = tool_call_grammar(syntax, tools, choice, chat.parallel_tool_calls, added_tokens) \
        if needed and syntax is not None else None
    if lark is not None and requested is not None:
        raise ConstraintRejected(f"response_format cannot be combined with tool_choice {choice!r} (or strict tools, "
                                 f"or parallel_tool_calls: false): the output follows one grammar.", "response_format")
    constraint = Constraint("tools", lark) if lark is not None else requested
    return compiled(constraint, reasoning_settings(model, prompt), added_tokens) if constraint else None


def reasoning_budget(model: ChatModel, chat: ChatInput, prompt: str) -> ReasoningBudget | None:
    """The request's reasoning budget (``reasoning_budget.py`` says where it comes from), or None.

    Like upstream, a budget is dropped with a warning when the output has no reasoning to end, or
    when the output is constrained (forcing text would switch the constraint off). It is dropped
    too for formats whose reasoning is a message channel (harmony): forcing ``</think>`` into
    their output would end nothing.
    """
    tokens = chosen_budget(chat.reasoning_budget_tokens, chat.reasoning.max_tokens if chat.reasoning else None,
                           model.reasoning_budget_tokens)
    if tokens is None:
        return None
    if _channels(model) is not None:
        logger.warning("the reasoning budget is ignored: %s splits reasoning by message channels, which the "
                       "budget cannot close yet", model.tool_format)
        return None
    settings = reasoning_settings(model, prompt)
    if settings is None:
        logger.warning("a reasoning budget of %d tokens was asked for, but %s has no reasoning set up "
                       "(model.reasoning); it is ignored", tokens, model.name)
        return None
    if chat.constrained or (model.tool_format is not None
                            and enforces(chat.tools or [], tool_choice_name(chat), chat.parallel_tool_calls)):
        logger.warning("the reasoning budget is ignored because the request constrains its output")
        return None
    message = chat.reasoning_budget_message if chat.reasoning_budget_message is not None \
        else model.reasoning_budget_message
    calls = tool_parser(model, chat) if settings.calls_end_reasoning else None
    return ReasoningBudget(tokens, (message or "") + settings.end_tag, settings.start_tag, settings.end_tag,
                           settings.start_in_reasoning, exit_tags=(calls.call_start,) if calls else ())
