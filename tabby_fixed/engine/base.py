"""What the server needs from an engine, and nothing more.

An engine holds one loaded model: its tokenizer, its chat template and model card, and a way to
generate. ``await generate(request)`` starts a job and returns an async iterator of ``Step`` objects
ending with exactly one ``Finish``. Obligations every engine keeps:

- **The event loop never blocks.** Forward passes run on the engine's own thread; the iterator
  only awaits results.
- **Closing the iterator cancels the job** (the server closes it when the client disconnects),
  and frees its place in the batch at once.
- **Stop strings and ``max_tokens`` are the engine's.** Text after a stop string never appears;
  ``Finish.reason`` is ``"stop"`` (end of sequence or a stop string, named in ``stop_str``) or
  ``"length"`` (``max_tokens`` or the context ran out).
- **Request errors are domain errors** (``domain_errors``): a prompt that does not fit raises
  ``ContextTooLong`` before anything is generated; a failure during generation raises from the
  iterator.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from ..domain_errors import ContextTooLong
from ..reasoning_budget import ReasoningBudget


@dataclass(frozen=True)
class Constraint:
    """What the output must match: any JSON value, a JSON schema, a regex, a grammar (Lark, or
    GBNF when it contains ``::=``), or the request's tool-call grammar (``tools``, Lark).
    ``grammar`` is the whole LLGuidance grammar engines apply (reasoning section included), made at
    request time by ``sampling/constraints.py``."""

    kind: Literal["json", "json_schema", "regex", "grammar", "tools"]
    value: Any = None
    grammar: str | None = None


@dataclass(frozen=True)
class GenerationParams:
    """Limits, sampler and constraint for one job. Sampler fields an engine cannot honour are
    ignored by it (the server logs which, at debug level)."""

    max_tokens: int | None = None  # None: up to the end of the context
    stop: tuple[str | int, ...] = ()  # strings, or token ids
    sampler: Mapping[str, Any] = field(default_factory=dict)  # every sampler field's effective value
    constraint: Constraint | None = None
    top_logprobs: int | None = None  # None: no logprobs; else log-probabilities with this many alternatives
    reasoning_budget: ReasoningBudget | None = None  # None: reasoning is not capped


@dataclass(frozen=True)
class ImageInput:
    """One image of a request, already read and checked to be an image. ``marker`` is the text
    that stands for it in the prompt, once, where the image was in its message; an engine with a
    vision tower puts the image's embedding there."""

    marker: str
    data: bytes
    media_type: str  # image/png, image/jpeg, image/gif, image/webp or image/bmp


@dataclass(frozen=True)
class GenerationRequest:
    prompt: str
    params: GenerationParams
    #: The conversation's last user message. Real engines ignore it; the scripted engine answers it.
    last_user_text: str = ""
    #: Every message as ``(role, text)``, tool results included (empty for text completions). Real
    #: engines ignore it; scripted rules match on its last message and count its turns.
    transcript: tuple[tuple[str, str], ...] = ()
    #: The request's images, in prompt order; only an engine whose ``info.vision`` is true gets any.
    images: tuple[ImageInput, ...] = ()


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token's log-probability under the model (before sampling changes it), with
    the most likely alternatives when asked for."""

    token: str
    logprob: float
    top: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Step:
    text: str
    token_count: int = 1
    logprobs: tuple[TokenLogprob, ...] = ()  # one per token, when the request asked for them


@dataclass(frozen=True)
class Finish:
    reason: Literal["stop", "length"]
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # prompt tokens served from the prefix cache
    stop_str: str | None = None
    prompt_seconds: float = 0.0
    completion_seconds: float = 0.0
    accepted_draft_tokens: int = 0  # speculative decoding: draft tokens the model confirmed
    rejected_draft_tokens: int = 0


@dataclass(frozen=True)
class ModelInfo:
    """What the routes report about the loaded model, read once at load."""

    name: str  # the model folder's name: what clients send as ``model``
    max_seq_len: int
    chat_template: str | None
    chat_template_name: str | None
    tool_format: str | None  # from the model folder's settings; the server may still detect one
    reasoning: bool
    bos_token: str | None = None
    eos_token: str | None = None
    pad_token: str | None = None
    unk_token: str | None = None
    max_batch_size: int = 1
    cache_size: int | None = None
    cache_mode: str = "FP16"
    vision: bool = False  # takes images: a vision tower is loaded
    #: The tokenizer's added tokens (text to id): grammars must write them as tokens.
    added_tokens: Mapping[str, int] = field(default_factory=dict)


class Engine(Protocol):
    # Read-only properties, so an engine may hold them as attributes or compute them (a wrapper
    # such as ObservedEngine passes the inner engine's on).
    @property
    def info(self) -> ModelInfo: ...

    @property
    def sampler_fields(self) -> frozenset[str]:
        """Sampler fields this engine applies; a request setting others gets a debug log line."""
        ...

    def encode(self, text: str, *, add_bos: bool = False, special_tokens: bool = True) -> list[int]: ...

    def decode(self, ids: list[int], *, special_tokens: bool = True) -> str: ...

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Step | Finish]:
        """Start a job: tokenizing and the context check happen here, off the event loop where they
        are slow, and a prompt that does not fit raises before anything is sent. The returned
        iterator yields the job's steps."""
        ...

    def active_jobs(self) -> int:
        """Jobs generating or waiting right now (a cancelled job no longer counts)."""
        ...

    def cache_usage(self) -> float:
        """The share of the KV cache that live jobs hold now, from 0 to 1 (a load balancer's signal)."""
        ...

    def health_issues(self) -> list[dict[str, str]]:
        """Failures not yet recovered from, as ``{"time", "description"}``; empty when healthy."""
        ...

    async def unload(self) -> None: ...


class EngineUnavailable(RuntimeError):
    """The model folder needs an engine this machine or build cannot run, or a part it lacks."""


def read_added_tokens(folder: Path) -> dict[str, int]:
    """A model folder's added tokens (text to id) from its tokenizer.json; none without one."""
    try:
        saved = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
        return {str(token["content"]): int(token["id"]) for token in saved.get("added_tokens") or ()}
    except (OSError, ValueError, TypeError, KeyError):
        return {}


def completion_budget(prompt_tokens: int, max_seq_len: int, max_tokens: int | None) -> int:
    """Tokens a job may generate: what was asked, clamped to the context that is left."""
    if prompt_tokens >= max_seq_len:
        raise ContextTooLong(prompt_tokens, max_seq_len)
    left = max_seq_len - prompt_tokens
    return left if max_tokens is None or max_tokens <= 0 else min(max_tokens, left)
