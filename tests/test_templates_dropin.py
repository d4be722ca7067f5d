"""Chat templates as upstream TabbyAPI finds and feeds them: shipped chatml and alpaca, ``x.jinja``
names, ``{% generation %}``, the model-folder-name fallback, and the variables a template sees."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tabby_fixed.chat import ChatModel, build_prompt, in_call_order, template_variables
from tabby_fixed.server.requests import ChatCompletionRequest
from tabby_fixed.templating import BUILTIN_TEMPLATES, find_chat_template, render_chat

CHATML = (BUILTIN_TEMPLATES / "chatml.jinja").read_text(encoding="utf-8")
ALPACA = (BUILTIN_TEMPLATES / "alpaca.jinja").read_text(encoding="utf-8")
SYSTEM_USER = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]


def test_chatml_turns_and_an_open_last_turn_without_generation_prompt() -> None:
    assert render_chat(CHATML, SYSTEM_USER) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    history = [*SYSTEM_USER, {"role": "assistant", "content": "Hel"}]
    assert render_chat(CHATML, history, add_generation_prompt=False).endswith("<|im_start|>assistant\nHel")
    assert render_chat(CHATML, history).endswith("<|im_start|>assistant\nHel<|im_end|>\n")  # no second header


def test_alpaca_sections() -> None:
    messages = [*SYSTEM_USER, {"role": "user_context", "content": " notes "}, {"role": "assistant", "content": "Ok"},
                {"role": "user", "content": "More"}]
    assert render_chat(ALPACA, messages) == (
        "Be brief.\n\n### Instruction:\nHi\n\n### Input:\nnotes\n\n### Response:\nOk\n\n### Instruction:\nMore"
        "\n\n### Response:\n")
    assert render_chat(ALPACA, [{"role": "user", "content": "Hi"}], add_generation_prompt=False) == (
        "\n\n### Instruction:\nHi")


@pytest.mark.parametrize("name", ["chatml", "chatml.jinja"])
def test_prompt_template_names_with_or_without_the_suffix(tmp_path: Path, name: str) -> None:
    assert find_chat_template(tmp_path, name, tmp_path / "templates") == ("chatml", CHATML)


def test_the_users_templates_folder_wins_over_the_shipped_one(tmp_path: Path) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "chatml.jinja").write_text("mine")
    assert find_chat_template(tmp_path, "chatml.jinja", tmp_path / "templates") == ("chatml", "mine")


def test_a_missing_prompt_template_is_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    (tmp_path / "chat_template.jinja").write_text("own")
    with caplog.at_level(logging.WARNING, logger="tabby_fixed.templating"):
        assert find_chat_template(tmp_path, "nope.jinja", tmp_path / "templates") == ("chat_template", "own")
    assert "prompt_template 'nope.jinja'" in caplog.text and "nope.jinja in" in caplog.text


def test_a_template_named_like_the_model_folder_is_the_last_resort(tmp_path: Path) -> None:
    model = tmp_path / "Llama-2-7B-Alpaca-exl3"
    model.mkdir()
    assert find_chat_template(model, None, tmp_path / "templates") == ("alpaca", ALPACA)
    (model / "chat_template.jinja").write_text("own")
    assert find_chat_template(model, None, tmp_path / "templates") == ("chat_template", "own")
    plain = tmp_path / "plain"
    plain.mkdir()
    assert find_chat_template(plain, None, tmp_path / "templates") is None


def test_generation_blocks_render_their_body() -> None:
    source = ("{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}[{{ m.content }}]"
              "{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}")
    assert render_chat(source, [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]) == "a[b]"


MODEL = ChatModel(name="m", chat_template="", chat_template_name=None, tool_format=None, reasoning=False,
                  template_vars_default={"reasoning_effort": "low", "verbosity": "low"},
                  template_vars_force={"forced": 1}, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                  unk_token="<unk>")


def chat(**fields: object) -> ChatCompletionRequest:
    return ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "hi"}], **fields})


def test_template_variables_in_upstreams_priority_order() -> None:
    plain = template_variables(MODEL, chat())
    assert plain == {"reasoning_effort": "low", "verbosity": "low", "forced": 1, "bos_token": "<s>",
                     "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>", "functions": None}
    mapped = template_variables(MODEL, chat(reasoning={"effort": "high", "enabled": False}, verbosity="high"))
    assert (mapped["reasoning_effort"], mapped["enable_thinking"], mapped["verbosity"]) == ("high", False, "high")
    flat = template_variables(MODEL, chat(reasoning={"effort": "high"}, reasoning_effort="medium",
                                          template_vars={"forced": 0, "x": 2}))
    assert (flat["reasoning_effort"], flat["forced"], flat["x"]) == ("medium", 1, 2)
    functions = [{"name": "f", "parameters": {"type": "object"}}]
    assert template_variables(MODEL, chat(functions=functions))["functions"] == functions


def test_the_prompt_sees_functions_verbosity_and_special_tokens() -> None:
    source = ("{{ pad_token }}{{ unk_token }}|{{ verbosity }}|{{ enable_thinking }}|"
              "{% for f in functions or [] %}{{ f.name }}{% endfor %}")
    model = ChatModel(**{**MODEL.__dict__, "chat_template": source})
    prompt = build_prompt(model, chat(functions=[{"name": "lookup"}], verbosity="high", reasoning={"enabled": True}))
    assert prompt == "<pad><unk>|high|True|lookup"


def test_tool_results_are_put_in_the_order_of_the_calls() -> None:
    calls = [{"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}} for i in ("a", "b", "c")]
    messages = [{"role": "user", "content": "go"}, {"role": "assistant", "content": "", "tool_calls": calls},
                {"role": "tool", "tool_call_id": "x", "content": "stray"},
                {"role": "tool", "tool_call_id": "c", "content": "3"},
                {"role": "tool", "tool_call_id": "a", "content": "1"},
                {"role": "tool", "tool_call_id": "b", "content": "2"},
                {"role": "user", "content": "and"}, {"role": "tool", "tool_call_id": "b", "content": "later"}]
    ordered = in_call_order(messages)
    assert [m["content"] for m in ordered] == ["go", "", "1", "2", "3", "stray", "and", "later"]
    source = "{% for m in messages if m.role == 'tool' %}{{ m.content }}{% endfor %}"
    request = chat(messages=messages)
    assert build_prompt(ChatModel(**{**MODEL.__dict__, "chat_template": source}), request) == "123straylater"


def test_every_shipped_template_is_package_data() -> None:
    """A non-editable install (the Docker image) only carries the .jinja files pyproject names."""
    import tomllib

    package = BUILTIN_TEMPLATES.parent
    globs = tomllib.loads((package.parent / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    shipped = {path.relative_to(package) for path in package.rglob("*.jinja")}
    assert {BUILTIN_TEMPLATES.relative_to(package) / "chatml.jinja"} <= shipped
    assert all(any(path.match(glob) for glob in globs["tabby_fixed"]) for path in shipped), shipped
