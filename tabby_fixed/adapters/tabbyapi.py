"""Upstream TabbyAPI's parser interface, served by our schema-aware parser.

The patch series in ``patches/`` makes upstream's ``qwen3_coder``, ``glm4_5`` and ``minimax_m2``
parsers call :func:`parse_toolcalls` when the request carries tools, so the logic lives here,
tested with this project, and the upstream hunks stay a few lines long. It runs inside an
upstream process: upstream's own ``ToolCall`` and ``Tool`` types are imported from there.
"""

from __future__ import annotations

from typing import Any

from ..toolcalls import ToolCallParser


def _as_dicts(tools: list[Any]) -> list[Any]:
    """Upstream hands its pydantic ``ToolSpec`` objects; our parser reads plain dicts."""
    return [tool.model_dump() if hasattr(tool, "model_dump") else tool for tool in tools]


def parse_toolcalls(tool_format: str, text: str, tools: list[Any]) -> list[Any]:
    """Upstream's ``parse_toolcalls`` result: one ``ToolCall`` per complete call.

    Upstream hands over only the text of its tool phase, so content is dropped here; a call cut
    off by the end of generation is left out, as upstream's own parsers leave out what their
    regexes do not match.
    """
    from endpoints.OAI.types.tools import Tool, ToolCall

    result = ToolCallParser(tool_format, _as_dicts(tools)).parse(text)
    return [ToolCall(function=Tool(name=call.name, arguments=call.arguments_json))
            for call in result.tool_calls if call.complete]
