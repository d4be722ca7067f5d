"""Muse Glimmer calls: ATEM invoke blocks in a message addressed to a tool.

::

    <|start|>assistant to=self<|message|>reasoning…<|eom|>
    <|start|>assistant to=get_weather<|message|><atem:function_calls>
    <atem:invoke name="get_weather">
    <atem:parameter name="location">Paris</atem:parameter>
    </atem:invoke>
    </atem:function_calls><|eom|>
    <|start|>assistant to=user<|message|>the answer<|eot|>

Like harmony the whole answer is messages, routed by recipient (``reasoning.ChannelSplitter``):
``to=self`` is reasoning, ``to=user`` or none is content, any other recipient a tool message,
whose body alone reaches this parser. The invoke name is authoritative (the recipient repeats
it). Values are raw text with no framing newlines; lists and objects are JSON.
"""

from __future__ import annotations

import re

from .base import Answer, InvokeCalls, MessageChannels, Route, parameter_tag

_INVOKE = "<atem:invoke"
_RECIPIENT = re.compile(r"(?:^|\s)to=([^\s<]+)")


class GlimmerChannels(MessageChannels):
    ends = ("<|eom|>", "<|eot|>")

    def route(self, header: str) -> Route:
        recipient = _RECIPIENT.search(header)
        name = recipient.group(1) if recipient else "user"
        return "reasoning" if name == "self" else "content" if name == "user" else "tool"


class MuseGlimmer(InvokeCalls):
    names = ("muse_glimmer", "glimmer")
    wrapper_open = "<atem:function_calls>"
    wrapper_close = "</atem:function_calls>"
    call_close = "</atem:invoke>"
    invoke_tag = _INVOKE
    start_markers = ("<atem:function_calls>",)
    param_prefixes = ("<atem:parameter",)
    channels = GlimmerChannels()

    def open_param(self, text: str, final: bool) -> Answer:
        return parameter_tag(text, final, self.call_close, prefix="<atem:parameter")

    def detect(self, chat_template: str) -> bool:
        return "<atem:function_calls>" in chat_template \
            or ("<|eom|>" in chat_template and "<|message|>" in chat_template)
