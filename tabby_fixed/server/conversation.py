"""A conversation in another API's terms, gathered into chat-completion messages.

The Anthropic Messages and OpenAI Responses routes both describe a conversation as a list of
parts (text, thinking or reasoning, tool calls, tool results) that chat templates expect as
chat messages. This is the one place that does the gathering:

- every system text (Anthropic's ``system`` and ``role: system`` entries, Responses'
  ``instructions`` and system/developer messages) goes into one leading system message, in order,
  because chat templates accept a system message only first;
- reasoning is kept for the next assistant message, as its ``reasoning_content``;
- a tool call joins the assistant message right before it (or starts one), so a turn that
  thought, wrote and called tools stays one assistant message.
"""

from __future__ import annotations

from typing import Any


class Conversation:
    def __init__(self) -> None:
        self._system: list[str] = []
        self._messages: list[dict[str, Any]] = []
        self._reasoning: list[str] = []

    def system(self, text: str) -> None:
        if text:
            self._system.append(text)

    def user(self, content: str | list[dict[str, Any]]) -> None:
        self._messages.append({"role": "user", "content": content})

    def reasoning(self, text: str) -> None:
        if text:
            self._reasoning.append(text)

    def assistant(self, text: str) -> None:
        self._messages.append({"role": "assistant", "content": text, **self._take_reasoning()})

    def call(self, call_id: str | None, name: str, arguments: str) -> None:
        last = self._messages[-1] if self._messages else None
        if last is None or last["role"] != "assistant" or self._reasoning:
            self.assistant("")
            last = self._messages[-1]
        last.setdefault("tool_calls", []).append(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}})

    def tool_result(self, call_id: str | None, text: str) -> None:
        self._messages.append({"role": "tool", "tool_call_id": call_id, "content": text})

    def messages(self) -> list[dict[str, Any]]:
        """The chat messages; reasoning not followed by an assistant turn is dropped."""
        system = [{"role": "system", "content": "\n\n".join(self._system)}] if self._system else []
        return system + self._messages

    def _take_reasoning(self) -> dict[str, str]:
        taken, self._reasoning = "".join(self._reasoning), []
        return {"reasoning_content": taken} if taken else {}
