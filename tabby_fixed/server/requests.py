"""Request bodies of the OpenAI routes, checked field by field.

Unknown fields are accepted (clients send ``store``, ``metadata``, ``user`` and more), known
fields are typed so a wrong type is a 400 naming the field. The sampler fields, with TabbyAPI's
aliases, live in ``sampling/fields.py``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, TypeVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..chat import ChatInput, ReasoningOptions
from ..errors import ApiError
from ..sampling import SamplerFields
from ..validation import first_problem


class RequestBody(BaseModel):
    """Unknown fields are kept, not refused: clients send many we do not use."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


#: Any request body model (the sampler fields' base is a pydantic model of its own)
Body = TypeVar("Body", bound=BaseModel)


class FunctionCall(RequestBody):
    name: str
    arguments: str | dict[str, Any] = "{}"


class ToolCallIn(RequestBody):
    id: str | None = None
    type: str = "function"
    function: FunctionCall


class ContentPart(RequestBody):
    type: str
    text: str | None = None
    #: ``{"url": ...}`` (OpenAI), a bare URL string, or an Anthropic image ``source``
    image_url: dict[str, Any] | str | None = None


class ChatMessage(RequestBody):
    role: str = "user"
    content: str | list[ContentPart] | None = None
    reasoning_content: str | None = Field(None, validation_alias=AliasChoices("reasoning_content", "reasoning"))
    tool_calls: list[ToolCallIn] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    def text(self) -> str:
        """The message's text parts. Images have been replaced by their markers (``server/vision.py``)
        by the time a prompt is built; other part types were refused there."""
        if isinstance(self.content, list):
            return "".join(part.text or "" for part in self.content if part.type == "text")
        return self.content or ""

    def for_template(self) -> dict[str, Any]:
        """The message as templates expect it: text content, and no keys whose value is None."""
        item: dict[str, Any] = {"role": self.role, "content": self.text()}
        if self.reasoning_content is not None:
            item["reasoning_content"] = self.reasoning_content
        if self.tool_calls:
            item["tool_calls"] = [call.model_dump(exclude_none=True) for call in self.tool_calls]
        for key in ("tool_call_id", "name"):
            if getattr(self, key) is not None:
                item[key] = getattr(self, key)
        return item


class FunctionSpec(RequestBody):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None


class ToolSpec(RequestBody):
    type: str = "function"
    function: FunctionSpec


class NamedToolChoice(RequestBody):
    type: str = "function"
    function: dict[str, Any]


class StreamOptions(RequestBody):
    include_usage: bool = False


class ResponseFormat(RequestBody):
    type: Literal["text", "json_object", "json_schema", "json"] = "text"
    json_schema: dict[str, Any] | None = None


class GenerationFields(SamplerFields):
    """Fields shared by chat and text completions: the sampler fields, and how to answer."""

    model: str | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: int = Field(1, ge=1, le=16)
    response_format: ResponseFormat | None = None
    #: llama.cpp's ``timings`` object beside ``usage`` (in the usage chunk when streaming).
    timings: bool = False


class ReasoningRequest(RequestBody):
    """OpenRouter's and the Responses API's ``reasoning`` object, as upstream reads it."""

    effort: str | None = None
    enabled: bool | None = None
    max_tokens: int | None = None


class ChatCompletionRequest(GenerationFields):
    messages: list[ChatMessage] = Field(min_length=1)
    tools: list[ToolSpec] | None = None
    tool_choice: Literal["none", "auto", "required"] | NamedToolChoice | None = None
    parallel_tool_calls: bool = True
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    response_prefix: str | None = None
    template_vars: dict[str, Any] = Field(default_factory=dict,
                                          validation_alias=AliasChoices("template_vars", "chat_template_kwargs"))
    reasoning_effort: str | None = None
    enable_thinking: bool | None = None
    reasoning: ReasoningRequest | None = None
    verbosity: str | None = None
    functions: list[dict[str, Any]] | None = None  # OpenAI's deprecated tools list, passed to the template
    reasoning_budget_tokens: int | None = Field(None, validation_alias=AliasChoices(
        "reasoning_budget_tokens", "reasoning_budget", "thinking_budget", "thinking_token_budget"))
    reasoning_budget_message: str | None = None

    @field_validator("continue_final_message")
    @classmethod
    def _continue_needs_no_generation_prompt(cls, value: bool, info: Any) -> bool:
        if value and info.data.get("add_generation_prompt", True):
            raise ValueError("continue_final_message needs add_generation_prompt: false")
        return value

    @field_validator("tool_choice")
    @classmethod
    def _choice_names_a_tool(cls, value: Any, info: Any) -> Any:
        """A forced tool must be one of the request's tools: the grammar could not call any other."""
        tools = info.data.get("tools") or []
        if value == "required" and not tools:
            raise ValueError("tool_choice 'required' needs tools")
        if isinstance(value, NamedToolChoice):
            name = value.function.get("name")
            if name not in {tool.function.name for tool in tools}:
                raise ValueError(f"tool_choice names {name!r}, which is not one of the request's tools")
        return value

    def chat_input(self) -> ChatInput:
        """The request as the pipeline takes it: plain values, no request models."""
        choice = self.tool_choice.model_dump() if isinstance(self.tool_choice, NamedToolChoice) else self.tool_choice
        return ChatInput(
            messages=[message.for_template() for message in self.messages],
            tools=[tool.model_dump(exclude_none=True) for tool in self.tools] if self.tools else None,
            tool_choice=choice, parallel_tool_calls=self.parallel_tool_calls,
            add_generation_prompt=self.add_generation_prompt, continue_final_message=self.continue_final_message,
            response_prefix=self.response_prefix, template_vars=self.template_vars,
            reasoning_effort=self.reasoning_effort, enable_thinking=self.enable_thinking,
            reasoning=ReasoningOptions(self.reasoning.effort, self.reasoning.enabled, self.reasoning.max_tokens)
            if self.reasoning is not None else None,
            verbosity=self.verbosity, functions=self.functions, reasoning_budget_tokens=self.reasoning_budget_tokens,
            reasoning_budget_message=self.reasoning_budget_message,
            constrained=bool((self.response_format is not None and self.response_format.type != "text")
                             or self.json_schema or self.regex_pattern or self.grammar_string))


class CompletionRequest(GenerationFields):
    prompt: str | list[str]

    @field_validator("prompt")
    @classmethod
    def _some_prompt(cls, value: str | list[str]) -> str | list[str]:
        if isinstance(value, list) and not value:
            raise ValueError("give at least one prompt")
        return value

    @property
    def prompts(self) -> list[str]:
        return [self.prompt] if isinstance(self.prompt, str) else list(self.prompt)


class EncodeRequest(RequestBody):
    text: str | list[ChatMessage]
    add_bos_token: bool = True
    encode_special_tokens: bool = True
    decode_special_tokens: bool = True
    template_vars: dict[str, Any] = Field(default_factory=dict,
                                          validation_alias=AliasChoices("template_vars", "chat_template_kwargs"))


class DecodeRequest(RequestBody):
    tokens: list[int]
    add_bos_token: bool = True
    encode_special_tokens: bool = True
    decode_special_tokens: bool = True


#: ``network.max_json_depth``'s default, for callers without the config at hand.
MAX_JSON_DEPTH = 100
_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_body(raw: bytes, model: type[Body], max_depth: int = MAX_JSON_DEPTH) -> Body:
    """A request body as the given model; malformed JSON and wrong fields become a 400 naming the spot."""
    try:
        data = json.loads(raw)
    except UnicodeDecodeError:
        raise ApiError(400, "The request body is not UTF-8 text.", code="invalid_json") from None
    except json.JSONDecodeError as error:
        raise ApiError(400, f"The request body is not valid JSON: {error.msg} at line {error.lineno}, "
                            f"column {error.colno}.", code="invalid_json") from None
    except RecursionError:
        raise _too_deep(max_depth) from None
    if not isinstance(data, dict):
        raise ApiError(400, "The request body must be a JSON object.", code="invalid_json")
    _check_values(data, max_depth)
    return validated(data, model)


def validated(data: dict[str, Any], model: type[Body]) -> Body:
    """A decoded body (or one a route translated) as the given model; wrong fields become a 400 naming the spot."""
    try:
        return model.model_validate(data)
    except ValidationError as error:
        where, problem = first_problem(error.errors())
        raise ApiError(400, f"Invalid request: {problem}.", param=where) from None


def _check_values(data: Any, max_depth: int) -> None:
    """Refuse what would fail later, deep inside: nesting past ``max_depth`` (templates, schemas and
    encoders recurse) and lone surrogates (``"\\ud800"`` decodes, but no UTF-8 encoder takes it)."""
    pending: list[tuple[Any, int, tuple[Any, ...]]] = [(data, 1, ())]
    while pending:
        value, depth, where = pending.pop()
        if isinstance(value, str):
            if _SURROGATE.search(value):
                _lone_surrogate(where)
            continue
        if not isinstance(value, (dict, list)):
            continue
        if depth > max_depth:
            raise _too_deep(max_depth, where)
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            if isinstance(key, str) and _SURROGATE.search(key):
                _lone_surrogate((*where, key))
            pending.append((item, depth + 1, (*where, key)))


def _spot(where: tuple[Any, ...]) -> str:
    return ".".join(str(part) for part in where) or "body"


def _too_deep(max_depth: int, where: tuple[Any, ...] = ()) -> ApiError:
    return ApiError(400, f"The request body nests arrays and objects deeper than {max_depth} levels"
                         f"{' at ' + _spot(where) if where else ''} (network.max_json_depth).",
                    code="invalid_json", param=_spot(where) if where else None)


def _lone_surrogate(where: tuple[Any, ...]) -> None:
    raise ApiError(400, f"Invalid request: {_spot(where)}: contains a lone UTF-16 surrogate (such as \\ud800), "
                        f"which is not text.", param=_spot(where))
