"""The OpenAI routes: chat completions, text completions, models.

Each request becomes one engine job per choice (``n``, or per prompt for text completions); the
jobs' steps go through the output parser and out as one JSON body or one SSE stream. Tool calls
stream as OpenAI sends them: the first fragment of a call carries ``id``, ``type`` and ``name``
with empty ``arguments``, later fragments only ``arguments``; ``finish_reason`` comes in its own
chunk with an empty delta, and the usage chunk (``choices: []``) last.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from fastapi import APIRouter, FastAPI, Request
from fastapi.responses import JSONResponse, Response

from ..chat import build_prompt, chat_constraint, last_user_text, output_parser, reasoning_budget, transcript
from ..config import NetworkConfig
from ..domain_errors import DomainError
from ..engine.base import Finish, GenerationParams, GenerationRequest, ImageInput, Step, TokenLogprob
from ..errors import ApiError
from ..output import ChatOutput, OutputEvent, OutputParser
from ..reasoning import ReasoningDelta
from ..sampling import resolve
from ..sampling.constraints import compiled, constraint_for
from ..toolcalls import ContentDelta, ToolCallArgs, ToolCallBegin
from .debug_log import write_chat_log
from .failures import api_error
from .models import LoadedModel
from .requests import ChatCompletionRequest, CompletionRequest, GenerationFields, parse_body
from .sse import DONE, frame, ping, run_jobs, sse_response
from .state import ApiPermission, read_body, read_json, serving, unless_disconnected
from .usage import timings, usage
from .vision import attach_images

router = APIRouter(prefix="/v1", tags=["openai"])
logger = logging.getLogger(__name__)


def _generation(app: FastAPI, model: LoadedModel, fields: GenerationFields) -> tuple[GenerationParams, str]:
    """The job's parameters from every sampler layer, and the ``x-sampler-source`` summary. The
    constraint is as requested; the route compiles it (chat adds the tools and the reasoning section)."""
    effective = resolve(fields.sampler_values(), model.preset or app.state.preset, model.card)
    values = effective.values
    if app.state.config.logging.log_generation_params:
        logger.info("generation params (%s): %s", effective.summary(),
                    {k: v for k, v in values.items() if effective.sources[k] != "default"})
    ignored = [name for name in effective.set_by("forced", "request", "preset", "card")
               if name not in model.engine.sampler_fields]
    if ignored:
        logger.debug("%s's engine does not apply: %s", model.name, ", ".join(ignored))
    _check_stops(values["stop"] or (), app.state.config.network)
    top_logprobs = values["top_logprobs"] or (values["logprobs"] if values["logprobs"] > 1 else 0)
    params = GenerationParams(max_tokens=values["max_tokens"], stop=tuple(values["stop"] or ()), sampler=values,
                              constraint=constraint_for(fields.response_format, values),
                              top_logprobs=top_logprobs if values["logprobs"] or values["top_logprobs"] else None)
    return params, effective.summary()


def _check_stops(stops: Sequence[str | int], network: NetworkConfig) -> None:
    """Stop strings are matched against every token, so their number and length are bounded."""
    if len(stops) > network.max_stop_strings:
        raise ApiError(400, f"This request has {len(stops)} stop strings; the server takes at most "
                            f"{network.max_stop_strings} (network.max_stop_strings).", param="stop")
    longest = max((len(stop) for stop in stops if isinstance(stop, str)), default=0)
    if longest > network.max_stop_string_chars:
        raise ApiError(400, f"A stop string is {longest} characters long; the server takes at most "
                            f"{network.max_stop_string_chars} (network.max_stop_string_chars).", param="stop")


def _logprob_entries(logprobs: list[TokenLogprob]) -> list[dict[str, Any]]:
    """Chat-completion ``logprobs.content`` entries."""
    return [{"token": lp.token, "logprob": lp.logprob, "bytes": list(lp.token.encode()),
             "top_logprobs": [{"token": t, "logprob": p, "bytes": list(t.encode())} for t, p in lp.top]}
            for lp in logprobs]


def _text_logprobs(logprobs: list[TokenLogprob], offset: int = 0) -> dict[str, Any]:
    """Text-completion ``logprobs``: OpenAI's older, column-wise shape."""
    offsets, at = [], offset
    for lp in logprobs:
        offsets.append(at)
        at += len(lp.token)
    return {"tokens": [lp.token for lp in logprobs], "token_logprobs": [lp.logprob for lp in logprobs],
            "top_logprobs": [dict(lp.top) for lp in logprobs], "text_offset": offsets}


def finish_reason(finish: Finish, output: ChatOutput | None = None) -> str:
    """``stop``, ``length`` (also for a call cut short) or ``tool_calls``: what every route maps from."""
    calls = output.tool_calls if output else []
    if finish.reason == "length" or any(not call.complete for call in calls):
        return "length"
    return "tool_calls" if calls else "stop"


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"


class _Choices:
    """The jobs of one request, started together; the context check happens at the start, before any reply."""

    def __init__(self, jobs: list[AsyncIterator[Step | Finish]], max_queued: int) -> None:
        self.jobs = jobs
        self.finishes: list[Finish | None] = [None] * len(jobs)
        self.max_queued = max_queued

    @classmethod
    async def start(cls, request: Request, model: LoadedModel, prompts: list[str], params: GenerationParams,
                    last_user: list[str], transcript: tuple[tuple[str, str], ...] = (),
                    images: tuple[ImageInput, ...] = ()) -> _Choices:
        limit = request.app.state.config.network.max_jobs_per_request
        if len(prompts) > limit:
            raise ApiError(400, f"This request asks for {len(prompts)} generations (prompts times n); the server "
                                f"starts at most {limit} per request (network.max_jobs_per_request).", param="n")
        return cls([await model.engine.generate(GenerationRequest(prompt, params, user, transcript, images))
                    for prompt, user in zip(prompts, last_user, strict=True)],
                   request.app.state.config.network.max_queued_steps)

    async def steps(self, ping_interval: float = 0) -> AsyncIterator[list[tuple[int, Step | Finish]] | None]:
        """Steps of every job in batches of what has arrived; None for a ping when the engine is silent."""
        async for batch in run_jobs(self.jobs, ping_interval, self.max_queued):
            for index, item in batch or ():
                if isinstance(item, Finish):
                    self.finishes[index] = item
            yield batch

    def done(self) -> list[Finish]:
        return [f for f in self.finishes if f is not None]

    async def collect(self) -> tuple[list[str], list[list[TokenLogprob]]]:
        """Every job run to its end: each choice's whole text and token log-probabilities."""
        texts: list[list[str]] = [[] for _ in self.jobs]
        logprobs: list[list[TokenLogprob]] = [[] for _ in self.jobs]
        async for batch in self.steps():
            for index, item in batch or ():
                if isinstance(item, Step):
                    texts[index].append(item.text)
                    logprobs[index].extend(item.logprobs)
        return ["".join(pieces) for pieces in texts], logprobs


def stream_settings(request: Request, fields: GenerationFields) -> tuple[bool, float] | None:
    """``(include_usage, ping_interval)`` when the answer streams; None for one JSON body. Asking
    for ``timings`` asks for the usage chunk too: that is where they go."""
    config = request.app.state.config
    if not fields.stream or config.developer.disable_request_streaming:
        return None
    wants_usage = bool(fields.stream_options and fields.stream_options.include_usage) or fields.timings
    return wants_usage, config.network.sse_ping_interval


def _error_frame(error: ApiError) -> bytes:
    return frame(error.body())


async def guarded(body: AsyncIterator[bytes], error_frame: Callable[[ApiError], bytes] = _error_frame,
                  send_traceback: bool = False) -> AsyncIterator[bytes]:
    """Once the stream has started, an error can only be reported in it: one error event (in the
    route's own shape), then the end (with the traceback under ``network.send_tracebacks``)."""
    try:
        async for piece in body:
            yield piece
    except ApiError as error:
        yield error_frame(error)
    except DomainError as error:
        yield error_frame(api_error(error))
    except Exception as error:
        logger.exception("generation failed mid-stream")
        yield error_frame(ApiError(500, f"Generation failed: {type(error).__name__}: {error}", type="server_error",
                                   trace=traceback.format_exc() if send_traceback else None))


# -- chat ---------------------------------------------------------------------------------------

@dataclass
class ChatJob:
    """A chat request's jobs, started: what every chat-shaped route (chat completions, Anthropic
    messages, OpenAI responses) answers from; each route only maps the result to its wire shape."""

    request: Request  # a whole (non-streamed) answer stops when its client disconnects
    model: LoadedModel
    params: GenerationParams
    headers: dict[str, str]  # x-sampler-source
    choices: _Choices
    parsers: list[OutputParser]  # one per choice

    @classmethod
    async def start(cls, request: Request, permission: str, chat: ChatCompletionRequest,
                    raw_body: bytes | None = None) -> ChatJob:
        """``raw_body``: the request as the client sent it, for ``logging.log_chat_completion_requests``."""
        model = await serving(request.app, chat.model, permission)
        chat, images = await attach_images(chat, model, request.app.state.config)
        inputs = chat.chat_input()
        prompt = build_prompt(model.chat, inputs)
        logging_config = request.app.state.config.logging
        if raw_body is not None and logging_config.log_chat_completion_requests:
            await write_chat_log(request, raw_body, prompt)
        if logging_config.log_prompt:
            logger.info("prompt:\n%s", prompt)
        params, sources = _generation(request.app, model, chat)
        params = dataclasses.replace(
            params, constraint=chat_constraint(model.chat, inputs, prompt, params.constraint,
                                               model.engine.info.added_tokens),
            reasoning_budget=reasoning_budget(model.chat, inputs, prompt))
        choices = await _Choices.start(request, model, [prompt] * chat.n, params,
                                       [last_user_text(inputs)] * chat.n, transcript(inputs), images)
        on_parsed = request.app.state.metrics.parsed_callback(model.name)
        parsers = [output_parser(model.chat, inputs, prompt, on_parsed) for _ in range(chat.n)]
        return cls(request, model, params, {"x-sampler-source": sources}, choices, parsers)

    async def outputs(self) -> tuple[list[ChatOutput], list[list[TokenLogprob]]]:
        """Every choice run to its end and parsed whole (the same result as streaming it, by construction)."""
        texts, logprobs = await unless_disconnected(self.request, self.choices.collect())
        outputs = []
        for parser, text in zip(self.parsers, texts, strict=True):
            parser.feed(text)
            parser.close()
            outputs.append(parser.result())
        return outputs, logprobs

    async def respond(self, streaming: tuple[bool, float] | None, wire: WireAnswer,
                      error_frame: Callable[[ApiError], bytes]) -> Response:
        """The first choice in a route's own shape (the routes that have no ``n``): streamed event by
        event, or run to its end and gathered by the same mapper, so both ways give the same answer."""
        if streaming is not None:
            return sse_response(guarded(wire.stream(self.events(streaming[1])), error_frame), self.headers)
        texts, _ = await unless_disconnected(self.request, self.choices.collect())
        parser = self.parsers[0]
        for event in parser.feed(texts[0]) + parser.close():
            wire.on(event)
        wire.end(Done(self.choices.done()[0], parser.result()))
        return JSONResponse(wire.whole, headers=self.headers)

    async def events(self, ping_interval: float) -> AsyncIterator[OutputEvent | Done | None]:
        """The first choice's output events as they arrive, then ``Done``; None for a keep-alive
        ping while the engine is silent. For the routes that have no ``n``."""
        parser = self.parsers[0]
        async for batch in self.choices.steps(ping_interval):
            if batch is None:
                yield None
                continue
            for _, step in batch:
                for event in parser.feed(step.text) if isinstance(step, Step) else parser.close():
                    yield event
                if isinstance(step, Finish):
                    yield Done(step, parser.result())


@dataclass(frozen=True)
class Done:
    """The end of a streamed choice: how it finished, and its whole parsed output."""

    finish: Finish
    output: ChatOutput


class WireAnswer(Protocol):
    """A route's answer shape built from output events (Anthropic messages, OpenAI responses)."""

    def stream(self, events: AsyncIterator[OutputEvent | Done | None]) -> AsyncIterator[bytes]: ...

    def on(self, item: OutputEvent) -> bytes: ...

    def end(self, done: Done) -> bytes: ...

    @property
    def whole(self) -> dict[str, Any]:
        """The answer as one JSON body, once ``end`` has been called."""
        ...


@router.post("/chat/completions")
async def chat_completions(request: Request, permission: ApiPermission) -> Response:
    body = await read_body(request)
    chat: ChatCompletionRequest = parse_body(body, ChatCompletionRequest,
                                             request.app.state.config.network.max_json_depth)
    job = await ChatJob.start(request, permission, chat, raw_body=body)
    reply = _Reply("chatcmpl", job.model.name, chat.timings)
    if (streaming := stream_settings(request, chat)) is not None:
        return sse_response(guarded(_stream_chat(reply, job.choices, job.parsers, *streaming),
                                    send_traceback=request.app.state.config.network.send_tracebacks), job.headers)
    outputs, logprobs = await job.outputs()
    wanted = job.params.top_logprobs is not None
    return JSONResponse(reply.chat_completion(outputs, job.choices.done(), logprobs if wanted else None),
                        headers=job.headers)


class _Reply:
    """Ids, timestamps and the fixed part of every chunk of one response; ``timings``: the
    request asked for llama.cpp's ``timings`` beside ``usage``."""

    def __init__(self, prefix: str, model: str, timings: bool = False) -> None:
        self.id = f"{prefix}-{uuid.uuid4().hex}"
        self.created = int(time.time())
        self.model = model
        self.timings = timings
        self._chunk_head = (f'data: {{"id":"{self.id}","object":"chat.completion.chunk","created":{self.created},'
                            f'"model":{json.dumps(model)},"choices":[{{"index":').encode()

    def chunk(self, index: int, delta: dict[str, Any], finish_reason: str | None = None,
              logprobs: list[TokenLogprob] | None = None) -> bytes:
        reason = "null" if finish_reason is None else f'"{finish_reason}"'
        probs = b"null" if not logprobs else json.dumps({"content": _logprob_entries(logprobs)}, ensure_ascii=False,
                                                        separators=(",", ":")).encode()
        return b"".join((self._chunk_head, str(index).encode(), b',"delta":',
                         json.dumps(delta, ensure_ascii=False, separators=(",", ":")).encode(),
                         b',"logprobs":', probs, b',"finish_reason":', reason.encode(), b"}]}\r\n\r\n"))

    def usage(self, finishes: list[Finish]) -> dict[str, Any]:
        """``usage``, and ``timings`` when asked for: the fields every body and usage chunk ends with."""
        return {"usage": usage(finishes), **({"timings": timings(finishes)} if self.timings else {})}

    def usage_chunk(self, finishes: list[Finish], obj: str = "chat.completion.chunk") -> bytes:
        return frame({"id": self.id, "object": obj, "created": self.created, "model": self.model,
                      "choices": [], **self.usage(finishes)})

    def chat_completion(self, outputs: list[ChatOutput], finishes: list[Finish],
                        logprobs: list[list[TokenLogprob]] | None) -> dict[str, Any]:
        choices = []
        for index, (output, finish) in enumerate(zip(outputs, finishes, strict=True)):
            calls = [{"id": call.call_id or _call_id(), "type": "function", "index": i,
                      "function": {"name": call.name, "arguments": call.arguments_json}}
                     for i, call in enumerate(output.tool_calls)]
            choices.append({
                "index": index,
                "message": {"role": "assistant", "content": output.content, "reasoning_content": output.reasoning,
                            "reasoning": output.reasoning, "tool_calls": calls or None},
                "logprobs": {"content": _logprob_entries(logprobs[index])} if logprobs is not None else None,
                "finish_reason": finish_reason(finish, output), "stop_str": finish.stop_str,
            })
        return {"id": self.id, "object": "chat.completion", "created": self.created, "model": self.model,
                "choices": choices, **self.usage(finishes)}


def _delta(event: OutputEvent, ids: dict[int, str]) -> dict[str, Any] | None:
    if isinstance(event, ContentDelta):
        return {"content": event.text}
    if isinstance(event, ReasoningDelta):  # both names: clients read one or the other (vLLM renamed it)
        return {"reasoning_content": event.text, "reasoning": event.text}
    if isinstance(event, ToolCallBegin):
        ids[event.index] = event.call_id or _call_id()  # the model's own id (Kimi) round-trips
        return {"tool_calls": [{"index": event.index, "id": ids[event.index], "type": "function",
                                "function": {"name": event.name, "arguments": ""}}]}
    if isinstance(event, ToolCallArgs):
        return {"tool_calls": [{"index": event.index, "function": {"arguments": event.fragment}}]}
    return None


async def _stream_chat(reply: _Reply, choices: _Choices, parsers: list[OutputParser], include_usage: bool,
                       ping_interval: float) -> AsyncIterator[bytes]:
    call_ids: list[dict[int, str]] = [{} for _ in parsers]
    pending: list[list[TokenLogprob]] = [[] for _ in parsers]  # logprobs waiting for their choice's next chunk
    for index in range(len(parsers)):
        yield reply.chunk(index, {"role": "assistant", "content": ""})
    async for batch in choices.steps(ping_interval):
        if batch is None:
            yield ping()
            continue
        out = []
        for index, step in batch:
            parser = parsers[index]
            if isinstance(step, Step):
                pending[index].extend(step.logprobs)
            events = parser.feed(step.text) if isinstance(step, Step) else parser.close()
            for event in events:
                delta = _delta(event, call_ids[index])
                if delta is not None:
                    out.append(reply.chunk(index, delta, logprobs=pending[index]))
                    pending[index] = []
            if isinstance(step, Finish):
                out.append(reply.chunk(index, {}, finish_reason(step, parser.result()), pending[index]))
                pending[index] = []
        yield b"".join(out)
    if include_usage:
        yield reply.usage_chunk(choices.done())
    yield DONE


# -- text completions ---------------------------------------------------------------------------

@router.post("/completions")
async def completions(request: Request, permission: ApiPermission) -> Response:
    completion: CompletionRequest = await read_json(request, CompletionRequest)
    model = await serving(request.app, completion.model, permission)
    prompts = [p for p in completion.prompts for _ in range(completion.n)]
    params, sources = _generation(request.app, model, completion)
    if params.constraint is not None:
        params = dataclasses.replace(params, constraint=compiled(params.constraint))
    choices = await _Choices.start(request, model, prompts, params, prompts)
    reply = _Reply("cmpl", model.name, completion.timings)
    headers = {"x-sampler-source": sources}
    if (streaming := stream_settings(request, completion)) is not None:
        return sse_response(guarded(_stream_text(reply, choices, *streaming),
                                    send_traceback=request.app.state.config.network.send_tracebacks), headers)
    texts, logprobs = await unless_disconnected(request, choices.collect())
    finishes = choices.done()
    wanted = params.top_logprobs is not None
    return JSONResponse(headers=headers, content={
        "id": reply.id, "object": "text_completion", "created": reply.created, "model": reply.model,
        "choices": [{"index": i, "text": text, "logprobs": _text_logprobs(logprobs[i]) if wanted else None,
                     "finish_reason": finish_reason(finish), "stop_str": finish.stop_str}
                    for i, (text, finish) in enumerate(zip(texts, finishes, strict=True))],
        **reply.usage(finishes),
    })


async def _stream_text(reply: _Reply, choices: _Choices, include_usage: bool,
                       ping_interval: float) -> AsyncIterator[bytes]:
    offsets = [0] * len(choices.jobs)

    def chunk(index: int, text: str, finish_reason: str | None, logprobs: tuple[TokenLogprob, ...] = ()) -> bytes:
        probs = _text_logprobs(list(logprobs), offsets[index]) if logprobs else None
        offsets[index] += len(text)
        return frame({"id": reply.id, "object": "text_completion", "created": reply.created, "model": reply.model,
                      "choices": [{"index": index, "text": text, "logprobs": probs, "finish_reason": finish_reason}]})

    async for batch in choices.steps(ping_interval):
        if batch is None:
            yield ping()
            continue
        yield b"".join(chunk(index, step.text, None, step.logprobs) if isinstance(step, Step) else
                       chunk(index, "", finish_reason(step)) for index, step in batch)
    if include_usage:
        yield reply.usage_chunk(choices.done(), "text_completion")
    yield DONE
