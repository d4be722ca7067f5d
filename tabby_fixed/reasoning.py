"""Split reasoning (``<think>``...``</think>``) from the rest of a generation.

Where generation starts is the caller's to say, because many templates pre-open the reasoning
in the generation prompt (Qwen3.5, GLM-4.7, MiniMax-M2 write ``<think>`` there), so the output
holds only the closing tag. ``starts_in_reasoning(prompt)`` reads that from the rendered prompt's
tail. Otherwise an opening tag counts only before any other text: a ``<think>`` written later,
in prose or code, stays content.

A tool-call opening tag inside reasoning ends the reasoning (Qwen3.5 and Kimi open calls without
closing their thoughts); the tag and what follows go on as content, to the tool-call parser.

Like the tool-call parser, ``split`` is the stream fed in one piece, and tags split across
deltas are held back by the same scanner. The tags themselves are dropped; every other
character goes to exactly one of reasoning or content.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto

from .toolcalls.events import ContentDelta
from .toolcalls.formats.base import MessageChannels, Route
from .toolcalls.scanner import HEADER_LIMIT, scan


@dataclass(frozen=True)
class ReasoningDelta:
    text: str


class _State(Enum):
    OPENING = auto()  # nothing but whitespace yet: an opening tag may still come
    REASONING = auto()
    CONTENT = auto()  # everything from here on is content


def starts_in_reasoning(prompt: str, start_tag: str = "<think>", end_tag: str = "</think>") -> bool:
    """True when the rendered prompt ends inside an opened reasoning block (only whitespace after it)."""
    opened = prompt.rfind(start_tag)
    return opened >= 0 and prompt.rfind(end_tag) < opened \
        and not prompt[opened + len(start_tag):].strip()


class _Splitter:
    """What both splitters share: text fed in pieces, each character sent to reasoning or content."""

    def __init__(self) -> None:
        self._buffer = ""
        self._reasoning: list[str] = []
        self._content: list[str] = []
        self._events: list[ReasoningDelta | ContentDelta] = []

    def feed(self, delta: str) -> list[ReasoningDelta | ContentDelta]:
        self._buffer += delta
        return self._run(final=False)

    def close(self) -> list[ReasoningDelta | ContentDelta]:
        return self._run(final=True)

    @property
    def reasoning(self) -> str | None:
        """The reasoning text so far; None when there is none (or only whitespace)."""
        text = "".join(self._reasoning)
        return text if text.strip() else None

    @property
    def content(self) -> str:
        return "".join(self._content)

    def split(self, text: str) -> tuple[str | None, str]:
        """Reasoning and content of a whole generation."""
        self.feed(text)
        self.close()
        return self.reasoning, self.content

    def _run(self, final: bool) -> list[ReasoningDelta | ContentDelta]:
        raise NotImplementedError

    def _emit(self, sink: list[str], kind: type[ReasoningDelta] | type[ContentDelta], text: str) -> None:
        if text:
            sink.append(text)
            self._events.append(kind(text))


class ReasoningSplitter(_Splitter):
    """Incremental splitter for one generation; ``feed`` pieces, then ``close`` once."""

    def __init__(self, start_in_reasoning: bool, start_tag: str = "<think>", end_tag: str = "</think>",
                 exit_tags: tuple[str, ...] = ()) -> None:
        super().__init__()
        self._start_tag = start_tag
        self._end_tag = end_tag
        self._exit_tags = exit_tags  # tags that end reasoning and stay in the content
        self._state = _State.REASONING if start_in_reasoning else _State.OPENING

    def _run(self, final: bool) -> list[ReasoningDelta | ContentDelta]:
        self._events = []
        while self._buffer and self._step(final):
            pass
        return self._events

    def _step(self, final: bool) -> bool:
        if self._state is _State.CONTENT:
            self._emit(self._content, ContentDelta, self._buffer)
            self._buffer = ""
            return False
        if self._state is _State.OPENING:
            size, marker = scan(self._buffer, (self._start_tag,), final)
            before = self._buffer[:size]
            if before.strip() or (marker is None and final):
                self._state = _State.CONTENT
                return True
            self._emit(self._content, ContentDelta, before)
            self._buffer = self._buffer[size:]
            if marker is None:
                return False
            self._buffer = self._buffer[len(marker):]
            self._state = _State.REASONING
            return True
        size, marker = scan(self._buffer, (self._end_tag, *self._exit_tags), final)
        self._emit(self._reasoning, ReasoningDelta, self._buffer[:size])
        self._buffer = self._buffer[size:]
        if marker is None:
            return False
        if marker == self._end_tag:
            self._buffer = self._buffer[len(marker):]
        self._state = _State.CONTENT
        return True


class ChannelSplitter(_Splitter):
    """Splits an answer made of channelled messages (harmony, Muse Glimmer) into reasoning and
    content; ``feed`` pieces, then ``close`` once. Same interface as ``ReasoningSplitter``.

    Headers and the structural tokens are the envelope and are dropped, as the reasoning tags
    are; every body character goes to exactly one of reasoning or content. A tool message goes
    on as content, for the tool-call parser, in the form ``MessageChannels`` describes. Text that
    never reaches a ``<|message|>`` within ``HEADER_LIMIT`` characters is content (a model that
    answers without the envelope).
    """

    def __init__(self, channels: MessageChannels) -> None:
        super().__init__()
        self._channels = channels
        self._tokens = (channels.message, channels.start, *channels.ends)
        self._header: list[str] = []
        self._header_size = 0
        self._route: Route | None = None  # None: inside a header

    def close(self) -> list[ReasoningDelta | ContentDelta]:
        self._run(final=True)
        if self._route is None and "".join(self._header).strip():
            self._body("content", "".join(self._header))  # no envelope after all: nothing is lost
        return self._events

    def _run(self, final: bool) -> list[ReasoningDelta | ContentDelta]:
        """One pass over the buffer by position: tokens repeated all through a long piece cost
        linear time (the rest of the buffer is not copied at each one)."""
        self._events = []
        buffer, at = self._buffer, 0
        while at < len(buffer):
            size, marker = scan(buffer, self._tokens, final, at)
            self._text(buffer[at:at + size])
            at += size
            if marker is None:
                break
            at += len(marker)
            self._token(marker)
        self._buffer = buffer[at:]
        return self._events

    def _text(self, text: str) -> None:
        if not text:
            return
        if self._route is not None:
            self._body(self._route, text)
            return
        self._header.append(text)
        self._header_size += len(text)
        if self._header_size > HEADER_LIMIT:
            self._route = "content"
            self._body("content", "".join(self._header))

    def _token(self, token: str) -> None:
        channels = self._channels
        if token == channels.message and self._route is None:
            header = "".join(self._header)
            self._route = channels.route(header)
            if self._route == "tool" and channels.tool_end:
                named = header.lstrip()
                named = named if named.startswith("assistant") else "assistant " + named
                self._body("tool", channels.start + named + channels.message)
            return
        if token == channels.message:
            self._body(self._route, token)  # type: ignore[arg-type]
            return
        if self._route == "tool" and channels.tool_end:
            self._body("tool", channels.tool_end)
        self._route = None
        self._header, self._header_size = [], 0

    def _body(self, route: Route, text: str) -> None:
        if route == "reasoning":
            self._emit(self._reasoning, ReasoningDelta, text)
        else:
            self._emit(self._content, ContentDelta, text)
