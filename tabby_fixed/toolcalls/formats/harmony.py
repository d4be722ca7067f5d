"""gpt-oss (harmony) calls: a commentary message addressed to a function.

::

    <|channel|>analysis<|message|>reasoning…<|end|>
    <|start|>assistant to=functions.write_file<|channel|>commentary json<|message|>{"path": "a.py"}<|call|>
    <|start|>assistant<|channel|>commentary to=functions.write_file <|constrain|>json<|message|>{…}<|call|>
    <|start|>assistant<|channel|>final<|message|>the answer<|return|>

The whole answer is messages; ``reasoning.ChannelSplitter`` routes them by header: a recipient
(``to=…``, in the role header or after the channel, on any channel) makes a tool call, the
analysis channel is reasoning, final and commentary preambles are content. A call message reaches
this parser as ``<|start|>assistant HEADER<|message|>{json}<|call|>``; the recipient names the
tool (``functions.`` dropped) and the body is the arguments object. ``<|call|>`` is a stop token,
so usually one call ends the generation.
"""

from __future__ import annotations

import re

from ..schema import ToolSchemas
from .base import Answer, CallFormat, MessageChannels, Route, between_tags, json_arguments

_START, _MESSAGE = "<|start|>", "<|message|>"
_RECIPIENT = re.compile(r"(?:^|\s)to=(?:functions\.)?([^\s<]+)")
_CHANNEL = re.compile(r"<\|channel\|>\s*(\w+)")


class HarmonyChannels(MessageChannels):
    ends = ("<|end|>", "<|return|>", "<|call|>")
    tool_end = "<|call|>"

    def route(self, header: str) -> Route:
        if _RECIPIENT.search(header):
            return "tool"
        channel = _CHANNEL.search(header)
        return "reasoning" if channel and channel.group(1) == "analysis" else "content"


class Harmony(CallFormat):
    names = ("harmony", "gpt_oss")
    wrapper_open = _START
    json_call_close = "<|call|>"
    start_markers = (_START,)
    channels = HarmonyChannels()

    def open_call(self, text: str, final: bool, schemas: ToolSchemas) -> Answer:
        header = between_tags(text, 0, _START, _MESSAGE, final)
        if not isinstance(header, tuple):
            return header
        recipient = _RECIPIENT.search(header[0])
        return json_arguments(text, header[1], final, recipient.group(1)) if recipient else None

    def detect(self, chat_template: str) -> bool:
        return "<|channel|>" in chat_template and _MESSAGE in chat_template
