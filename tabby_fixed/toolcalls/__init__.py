"""Schema-aware tool-call parsing: calls reach the client exactly as the model wrote them.

A pure library: no server, engine or torch imports.
"""

from .events import (
    ContentDelta,
    Event,
    ParseResult,
    ToolCall,
    ToolCallArgs,
    ToolCallBegin,
    ToolCallEnd,
)
from .formats import FORMATS, UnknownFormatError, detect_format, reasoning_tags
from .parser import ToolCallParser, ToolCallStream

__all__ = [
    "FORMATS",
    "ContentDelta",
    "Event",
    "ParseResult",
    "ToolCall",
    "ToolCallArgs",
    "ToolCallBegin",
    "ToolCallEnd",
    "ToolCallParser",
    "ToolCallStream",
    "UnknownFormatError",
    "detect_format",
    "reasoning_tags",
]
