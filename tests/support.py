"""Shared checks: run one text through both modes and assert every parser invariant."""

from __future__ import annotations

import itertools
import json
import random
from collections.abc import Iterator

from tabby_fixed.toolcalls import (
    ContentDelta,
    ParseResult,
    ToolCallArgs,
    ToolCallBegin,
    ToolCallEnd,
    ToolCallParser,
)


def random_chunks(text: str, seed: int, largest: int = 8) -> list[str]:
    rng = random.Random(seed)
    chunks, at = [], 0
    while at < len(text):
        size = rng.randint(1, largest)
        chunks.append(text[at:at + size])
        at += size
    return chunks


def chunks_at(text: str, cuts: list[int]) -> list[str]:
    """Text cut at the given positions (taken modulo its length, so any integers will do)."""
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    return [text[a:b] for a, b in itertools.pairwise(bounds)] or [""]


def chunkings(text: str, random_count: int = 12) -> Iterator[list[str]]:
    """The whole text, one character at a time, and seeded random batchings."""
    yield [text]
    yield list(text)
    for seed in range(random_count):
        yield random_chunks(text, seed)


def stream_events(parser: ToolCallParser, chunks: list[str]) -> tuple[list, ParseResult]:
    stream = parser.stream()
    events = []
    for chunk in chunks:
        events += stream.feed(chunk)
    events += stream.close()
    return events, stream.result


def check_events(events: list, result: ParseResult) -> None:
    """Events rebuild the result: content, then per call begin, fragments, end, in order."""
    content = "".join(e.text for e in events if isinstance(e, ContentDelta))
    if result.content is None:
        assert not content.strip()
    else:
        assert content == result.content
    open_calls: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    ended: set[int] = set()
    for event in events:
        if isinstance(event, ToolCallBegin):
            assert event.index == len(names), "indexes rise by one"
            assert not open_calls, "one call at a time"
            names[event.index] = event.name
            open_calls[event.index] = []
        elif isinstance(event, ToolCallArgs):
            open_calls[event.index].append(event.fragment)
        elif isinstance(event, ToolCallEnd):
            fragments = open_calls.pop(event.index)
            call = result.tool_calls[event.index]
            assert "".join(fragments) == call.arguments_json
            ended.add(event.index)
    assert not open_calls and ended == set(range(len(result.tool_calls)))
    assert [c.name for c in result.tool_calls] == [names[i] for i in range(len(names))]
    for call in result.tool_calls:
        if call.complete:
            assert json.loads(call.arguments_json) == call.arguments
            assert json.dumps(call.arguments, ensure_ascii=False) == call.arguments_json


def check_coverage(text: str, result: ParseResult) -> None:
    """Nothing lost: removing each call's raw text, in order, leaves exactly the content."""
    rest, at = [], 0
    for call in result.tool_calls:
        found = text.find(call.raw, at)
        assert found >= 0, f"call text {call.raw!r} not in input"
        rest.append(text[at:found])
        at = found + len(call.raw)
    rest.append(text[at:])
    outside = "".join(rest)
    if result.content is None:
        assert not outside.strip()
    else:
        assert outside == result.content


def parse_both(parser: ToolCallParser, text: str, random_count: int = 12) -> ParseResult:
    """The non-streaming result, after checking every chunking streams to exactly it."""
    expected = parser.parse(text)
    check_coverage(text, expected)
    for chunks in chunkings(text, random_count):
        events, result = stream_events(parser, chunks)
        assert result == expected, f"chunking {chunks!r} differs"
        check_events(events, result)
    return expected


def tool(name: str, **properties: dict) -> dict:
    return {"type": "function", "function": {
        "name": name, "parameters": {"type": "object", "properties": properties}}}
