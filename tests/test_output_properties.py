"""Invariants of the combined reasoning-plus-tool-call ``OutputParser``: any chunking of a
generation gives the same result and the same events (adjacent pieces of one kind merged) as the
generation fed in one piece, and the events rebuild the result."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tabby_fixed.output import OutputEvent, OutputParser, ReasoningSettings
from tabby_fixed.reasoning import ReasoningDelta
from tabby_fixed.toolcalls import ContentDelta, ToolCallArgs, ToolCallParser
from tests.support import chunks_at
from tests.toolcalls.test_formats import TOOLS
from tests.toolcalls.test_properties import FORMAT_NAMES, TOKENS

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Tool-call markup mixed with reasoning tags (the default pair and a custom one), so random text
# keeps opening, closing and half-writing thoughts around calls.
REASONING_TOKENS = ["<think>", "</think>", "<think", "</thi", "[THINK]", "[/THINK]", "\n\n"]
soup = st.lists(st.sampled_from(TOKENS + REASONING_TOKENS), max_size=60).map("".join)
generation = st.one_of(soup, st.text(max_size=120))
reasoning_settings = st.one_of(
    st.none(),
    st.builds(ReasoningSettings, st.booleans(), st.just("<think>"), st.just("</think>"), st.booleans()),
    st.builds(ReasoningSettings, st.booleans(), st.just("[THINK]"), st.just("[/THINK]"), st.booleans()),
)
tool_format = st.one_of(st.none(), st.sampled_from(FORMAT_NAMES))


def make_parser(fmt: str | None, reasoning: ReasoningSettings | None, first_call_only: bool) -> OutputParser:
    tools = ToolCallParser(fmt, TOOLS) if fmt is not None else None
    return OutputParser(tool_parser=tools, reasoning=reasoning, first_call_only=first_call_only)


def run(parser: OutputParser, chunks: list[str]) -> list[OutputEvent]:
    events: list[OutputEvent] = []
    for chunk in chunks:
        events += parser.feed(chunk)
    return events + parser.close()


def merged(events: list[OutputEvent]) -> list[OutputEvent]:
    """Events with adjacent text of one kind joined: what a chunking may not change."""
    out: list[OutputEvent] = []
    for event in events:
        last = out[-1] if out else None
        if isinstance(event, ReasoningDelta) and isinstance(last, ReasoningDelta):
            out[-1] = ReasoningDelta(last.text + event.text)
        elif isinstance(event, ContentDelta) and isinstance(last, ContentDelta):
            out[-1] = ContentDelta(last.text + event.text)
        elif isinstance(event, ToolCallArgs) and isinstance(last, ToolCallArgs) and last.index == event.index:
            out[-1] = ToolCallArgs(event.index, last.fragment + event.fragment)
        else:
            out.append(event)
    return out


@SETTINGS
@given(fmt=tool_format, reasoning=reasoning_settings, first_call_only=st.booleans(), text=generation,
       cuts=st.lists(st.integers(0, 10_000), max_size=40))
def test_any_chunking_equals_the_whole(fmt, reasoning, first_call_only, text, cuts):
    whole = make_parser(fmt, reasoning, first_call_only)
    whole_events = run(whole, [text])
    chunked = make_parser(fmt, reasoning, first_call_only)
    chunked_events = run(chunked, chunks_at(text, cuts))
    assert chunked.result() == whole.result()
    assert merged(chunked_events) == merged(whole_events)


@SETTINGS
@given(fmt=tool_format, reasoning=reasoning_settings, text=generation)
def test_single_character_deltas_equal_the_whole_and_events_rebuild_the_result(fmt, reasoning, text):
    whole = make_parser(fmt, reasoning, False)
    run(whole, [text])
    chunked = make_parser(fmt, reasoning, False)
    events = run(chunked, list(text))
    result = chunked.result()
    assert result == whole.result()
    thoughts = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert (thoughts if thoughts.strip() else None) == result.reasoning
    content = "".join(e.text for e in events if isinstance(e, ContentDelta))
    assert content == result.content if result.content is not None else not content.strip()
    for index, call in enumerate(result.tool_calls):
        fragments = "".join(e.fragment for e in events if isinstance(e, ToolCallArgs) and e.index == index)
        assert fragments == call.arguments_json
