"""Earlier thinking reaches the chat template from every API: chat completions'
``reasoning_content`` or ``reasoning``, Anthropic thinking blocks, Responses reasoning items all
become the assistant message's ``reasoning_content``, which the Qwen3.5, GLM-4.7 and MiniMax-M2
templates render back as ``<think>`` blocks."""

from __future__ import annotations

from tabby_fixed.chat import ChatModel, build_prompt
from tabby_fixed.server import anthropic_models, responses_models
from tabby_fixed.server.requests import ChatCompletionRequest

#: The part of the Qwen3.5 / GLM-4.7 / MiniMax-M2 templates that matters here: they read
#: ``message.reasoning_content`` and render it inside <think> tags.
TEMPLATE = ("{% for m in messages %}[{{ m.role }}]{% if m.reasoning_content is string %}<think>"
            "{{ m.reasoning_content }}</think>{% endif %}{{ m.content }}"
            "{% for c in m.tool_calls or [] %}<call {{ c.function.name }} {{ c.function.arguments | tojson }}>"
            "{% endfor %}{% if m.tool_call_id %}({{ m.tool_call_id }}){% endif %}{{ '\\n' }}{% endfor %}")
MODEL = ChatModel(name="m", chat_template=TEMPLATE, chat_template_name="t", tool_format="qwen3_coder",
                  reasoning=True)
EXPECTED = ("[system]Be brief.\n[user]write it\n"
            "[assistant]<think>I should call write.</think>On it.<call write {\"path\": \"a\"}>\n"
            "[tool]ok(c1)\n[user]thanks\n")


def test_chat_completions_accept_both_names():
    for name in ("reasoning_content", "reasoning"):
        chat = ChatCompletionRequest.model_validate({"messages": [
            {"role": "system", "content": "Be brief."}, {"role": "user", "content": "write it"},
            {"role": "assistant", "content": "On it.", name: "I should call write.",
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "write",
                                                                         "arguments": '{"path": "a"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"}, {"role": "user", "content": "thanks"}]})
        assert build_prompt(MODEL, chat) == EXPECTED


def test_anthropic_thinking_blocks():
    body = anthropic_models.MessagesRequest.model_validate({"system": "Be brief.", "messages": [
        {"role": "user", "content": "write it"},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "I should call write.", "signature": "s"},
            {"type": "text", "text": "On it."},
            {"type": "tool_use", "id": "c1", "name": "write", "input": {"path": "a"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok"},
                                     {"type": "text", "text": "thanks"}]}]})
    assert build_prompt(MODEL, anthropic_models.to_chat_request(body)) == EXPECTED


def test_responses_reasoning_items():
    body = responses_models.ResponsesRequest.model_validate({"instructions": "Be brief.", "input": [
        {"role": "user", "content": "write it"},
        {"type": "reasoning", "id": "rs_1", "summary": [],
         "content": [{"type": "reasoning_text", "text": "I should call write."}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "On it."}]},
        {"type": "function_call", "call_id": "c1", "name": "write", "arguments": '{"path": "a"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "ok"},
        {"role": "user", "content": [{"type": "input_text", "text": "thanks"}]}]})
    assert build_prompt(MODEL, responses_models.to_chat_request(body, [])) == EXPECTED
    summary_only = responses_models.ResponsesRequest.model_validate({"input": [
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "short"}]},
        {"type": "function_call", "call_id": "c1", "name": "write", "arguments": "{}"}]})
    assert "<think>short</think>" in build_prompt(MODEL, responses_models.to_chat_request(summary_only, []))
