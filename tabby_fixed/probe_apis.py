"""The probe's requests over the Anthropic Messages and OpenAI Responses APIs.

``tabby-fixed probe --api messages|responses`` asks the same cases as over chat completions;
these functions send one case and read the answer back into what the judge compares: the calls
as ``(name, arguments JSON text)``, the text, a finish reason in chat terms (``tool_calls``,
``stop``, ``length``) and any protocol fault seen on the way (blocks numbered out of order, a
``done`` event that disagrees with its deltas, an error event).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class ApiReply:
    calls: list[tuple[str, str]] = field(default_factory=list)
    content: str = ""
    finish_reason: str | None = None
    problem: str | None = None


_STOP_REASONS = {"tool_use": "tool_calls", "end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length"}


def _events(response: httpx.Response) -> Iterator[dict[str, Any]]:
    """The JSON payload of each ``data:`` line of a server-sent event stream."""
    for line in response.iter_lines():
        if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
            yield json.loads(line[5:])


# -- Anthropic Messages -------------------------------------------------------------------------

def messages_body(model: str, prompt: str, tools: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    return {"model": model, "max_tokens": 1024, "temperature": 0, "stream": stream,
            "messages": [{"role": "user", "content": prompt}],
            "tools": [{"name": t["function"]["name"], "description": t["function"].get("description", ""),
                       "input_schema": t["function"]["parameters"]} for t in tools]}


def ask_messages(client: httpx.Client, body: dict[str, Any]) -> ApiReply:
    if not body["stream"]:
        response = client.post("/messages", json=body)
        response.raise_for_status()
        message = response.json()
        blocks = message.get("content") or []
        reply = ApiReply(finish_reason=_STOP_REASONS.get(message.get("stop_reason"), message.get("stop_reason")))
        reply.content = "".join(b.get("text") or "" for b in blocks if b.get("type") == "text")
        for block in blocks:
            if block.get("type") == "tool_use":
                if not isinstance(block.get("input"), dict):
                    reply.problem = "a tool_use input is not a JSON object"
                reply.calls.append((block.get("name") or "", json.dumps(block.get("input"), ensure_ascii=False)))
        return reply
    return _stream_messages(client, body)


def _stream_messages(client: httpx.Client, body: dict[str, Any]) -> ApiReply:
    reply, blocks, text = ApiReply(), [], []
    with client.stream("POST", "/messages", json=body) as response:
        response.raise_for_status()
        for event in _events(response):
            kind = event.get("type")
            if kind == "error":
                reply.problem = f"the stream reported an error: {(event.get('error') or {}).get('message')}"
                break
            if kind == "content_block_start":
                block = event.get("content_block") or {}
                if event.get("index") != len(blocks):
                    reply.problem = reply.problem or f"block {event.get('index')} started where {len(blocks)} was due"
                if block.get("type") == "tool_use" and block.get("input") not in ({}, None):
                    reply.problem = reply.problem or "a tool_use block started with input (clients add the deltas)"
                blocks.append({"type": block.get("type"), "name": block.get("name") or "", "json": []})
            elif kind == "content_block_delta":
                index, delta = event.get("index"), event.get("delta") or {}
                if not isinstance(index, int) or not 0 <= index < len(blocks):
                    reply.problem = reply.problem or f"a delta for block {index}, which was never started"
                    continue
                if delta.get("type") == "input_json_delta":
                    blocks[index]["json"].append(delta.get("partial_json") or "")
                elif delta.get("type") == "text_delta":
                    text.append(delta.get("text") or "")
            elif kind == "message_delta":
                stop = (event.get("delta") or {}).get("stop_reason")
                reply.finish_reason = _STOP_REASONS.get(stop, stop)
    reply.content = "".join(text)
    reply.calls = [(b["name"], "".join(b["json"]) or "{}") for b in blocks if b["type"] == "tool_use"]
    return reply


# -- OpenAI Responses ---------------------------------------------------------------------------

def responses_body(model: str, prompt: str, tools: list[dict[str, Any]], stream: bool) -> dict[str, Any]:
    return {"model": model, "input": prompt, "max_output_tokens": 1024, "temperature": 0, "stream": stream,
            "store": False, "tools": [{"type": "function", **t["function"]} for t in tools]}


def _finish(status: str | None, calls: list[tuple[str, str]]) -> str:
    return "length" if status == "incomplete" else "tool_calls" if calls else "stop"


def ask_responses(client: httpx.Client, body: dict[str, Any]) -> ApiReply:
    if not body["stream"]:
        response = client.post("/responses", json=body)
        response.raise_for_status()
        result = response.json()
        reply = ApiReply()
        for item in result.get("output") or []:
            if item.get("type") == "function_call":
                if not isinstance(item.get("arguments"), str):
                    reply.problem = "arguments were sent as a JSON object, not a string"
                reply.calls.append((item.get("name") or "", item.get("arguments")))
            elif item.get("type") == "message":
                reply.content += "".join(p.get("text") or "" for p in item.get("content") or [])
        reply.finish_reason = _finish(result.get("status"), reply.calls)
        return reply
    return _stream_responses(client, body)


def _stream_responses(client: httpx.Client, body: dict[str, Any]) -> ApiReply:
    reply, calls, text, status = ApiReply(), {}, [], None
    with client.stream("POST", "/responses", json=body) as response:
        response.raise_for_status()
        for event in _events(response):
            kind = event.get("type")
            if kind in ("error", "response.failed"):
                error = event.get("error") or (event.get("response") or {}).get("error") or {}
                reply.problem = f"the stream reported an error: {error.get('message')}"
                break
            if kind == "response.output_item.added" and (event.get("item") or {}).get("type") == "function_call":
                calls[event.get("output_index")] = {"name": event["item"].get("name") or "", "arguments": []}
            elif kind == "response.function_call_arguments.delta":
                call = calls.get(event.get("output_index"))
                if call is None:
                    reply.problem = reply.problem or "arguments for an output item that was never added"
                    continue
                call["arguments"].append(event.get("delta") or "")
            elif kind == "response.function_call_arguments.done":
                call = calls.get(event.get("output_index"))
                if call is not None and event.get("arguments") != "".join(call["arguments"]):
                    reply.problem = reply.problem or "the arguments' done event differs from their deltas"
            elif kind == "response.output_text.delta":
                text.append(event.get("delta") or "")
            elif kind in ("response.completed", "response.incomplete"):
                status = (event.get("response") or {}).get("status")
    reply.content = "".join(text)
    reply.calls = [(calls[i]["name"], "".join(calls[i]["arguments"])) for i in sorted(calls)]
    reply.finish_reason = _finish(status, reply.calls)
    return reply


APIS = {"messages": (messages_body, ask_messages), "responses": (responses_body, ask_responses)}
