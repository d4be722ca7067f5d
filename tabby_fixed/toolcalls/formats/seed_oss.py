"""ByteDance Seed-OSS calls: Qwen3-Coder's markup in ``<seed:tool_call>``, values unframed.

::

    <seed:tool_call>
    <function=write_file>
    <parameter=path>a.py</parameter>
    <parameter=append>True</parameter>
    </function>
    </seed:tool_call>

The template writes every non-string with Python's ``str()`` (``True``, ``['x', 'y']``), which the
schema-typed conversion reads. Reasoning is ``<seed:think>``...``</seed:think>``.
"""

from __future__ import annotations

from .base import CallSyntax
from .qwen3_coder import Qwen3Coder


class SeedOss(Qwen3Coder):
    names = ("seed_oss",)
    wrapper_open = "<seed:tool_call>"
    wrapper_close = "</seed:tool_call>"
    start_markers = ("<seed:tool_call>", "<function=")
    syntax = CallSyntax(
        trigger="<seed:tool_call>", open_gap="\n", block_close="</seed:tool_call>", call_open=("<function={name}>\n",),
        call_close="</function>\n", quotes=("", '"'), param_open=("<parameter={key}>", "<parameter name={key}>"),
        value_close="</parameter>", after_param=("\n",), json_param_open=("<parameter>",))
    framing = False
    reasoning_tags = (("<seed:think>", "</seed:think>"),)

    def detect(self, chat_template: str) -> bool:
        return "<seed:tool_call>" in chat_template
