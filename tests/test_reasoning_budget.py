"""The reasoning budget: where it comes from, how its watch follows the output, and the cut it
makes in the scripted engine's answers behind the real server and the openai SDK."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tabby_fixed.chat import ChatModel, reasoning_budget
from tabby_fixed.reasoning_budget import BudgetWatch, ReasoningBudget, chosen_budget
from tabby_fixed.server.requests import ChatCompletionRequest
from tests.server.conftest import API_KEY, serve

THINK = ReasoningBudget(2, "Enough.</think>", "<think>", "</think>", starts_inside=False)


def test_the_first_non_negative_level_wins() -> None:
    assert chosen_budget(None, None, None) is None
    assert chosen_budget(-1, None, 50) == 50  # negative defers, as upstream (llama.cpp's convention)
    assert chosen_budget(-1, -1, -1) is None
    assert chosen_budget(0, 10, 50) == 0
    assert chosen_budget(None, 10, 50) == 10


@pytest.mark.parametrize("tool_format", ["harmony", "muse_glimmer"])
def test_no_budget_for_formats_whose_reasoning_is_a_channel(tool_format: str, caplog: pytest.LogCaptureFixture):
    """Their reasoning ends with the channel's own tokens, not ``</think>``: the budget is dropped
    with a warning rather than forcing a tag that ends nothing into the answer."""
    chat = ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "hi"}],
                                                 "reasoning_budget_tokens": 8}).chat_input()
    model = ChatModel(name="m", chat_template="", chat_template_name=None, tool_format=tool_format, reasoning=True)
    assert reasoning_budget(model, chat, "") is None
    assert "splits reasoning by message channels" in caplog.text
    plain = ChatModel(name="m", chat_template="", chat_template_name=None, tool_format="hermes", reasoning=True)
    assert reasoning_budget(plain, chat, "") is not None


def test_the_watch_counts_only_reasoning_tokens_and_fires_once() -> None:
    watch = BudgetWatch(THINK)
    assert [watch.feed(piece, 1) for piece in ["Hi ", "<th", "ink>", "a", "b", "c"]] == \
        [False, False, False, False, True, False]
    after_close = BudgetWatch(THINK)
    assert not any(after_close.feed(piece, 1) for piece in ["<think>", "a", "</think>", "x", "y", "z"])
    assert BudgetWatch(ReasoningBudget(0, "</think>", "<think>", "</think>", True)).due_at_start()
    assert not BudgetWatch(ReasoningBudget(0, "</think>", "<think>", "</think>", False)).due_at_start()


def test_a_tool_call_opened_in_reasoning_ends_it_for_the_watch() -> None:
    calls = ReasoningBudget(2, "</think>", "<think>", "</think>", starts_inside=True, exit_tags=("<tool_call>",))
    watch = BudgetWatch(calls)
    assert not any(watch.feed(piece, 1) for piece in ["a", "<tool_", "call>", "{", "}", "x", "y"])
    plain = BudgetWatch(ReasoningBudget(2, "</think>", "<think>", "</think>", starts_inside=True))
    assert [plain.feed(piece, 1) for piece in ["a", "<tool_", "call>"]] == [False, True, False]
    ending = BudgetWatch(ReasoningBudget(2, "</think>", "<think>", "</think>", starts_inside=True))
    assert [ending.feed(piece, 1) for piece in ["a", "</th"]] == [False, False]  # maybe ending by itself
    assert not ending.feed("ink>", 1) and not ending.inside


@given(st.lists(st.sampled_from(["<think>", "</think>", "a", "<", "/", "think", ">", "\n"]), max_size=30),
       st.data())
def test_tags_split_anywhere_are_still_seen(parts: list[str], data: st.DataObject) -> None:
    """However the text is cut into pieces, the watch ends up inside reasoning exactly when the
    whole text's last tag is an opening one."""
    text = "".join(parts)
    cuts = sorted(data.draw(st.sets(st.integers(0, len(text)), max_size=10)))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    watch = BudgetWatch(ReasoningBudget(10**6, "", "<think>", "</think>", starts_inside=False))
    for piece in pieces:
        watch.feed(piece, 1)
    assert watch.inside == (text.rfind("<think>") > text.rfind("</think>"))


# -- the scripted engine behind the server ----------------------------------------------------------------------------

THOUGHTS = "RAW:step one, step two, step three, step four</think>The answer is 4."


def ask(client: openai.OpenAI, **extra: object) -> tuple[str, str]:
    message = client.chat.completions.create(model="thinker", messages=[{"role": "user", "content": THOUGHTS}],
                                             extra_body=extra or None).choices[0].message
    return message.model_extra["reasoning_content"], message.content


@pytest.fixture(scope="module")
def budgeted(tmp_path_factory: pytest.TempPathFactory):
    from tests.server.conftest import make_models

    root = Path(tmp_path_factory.mktemp("budget"))
    make_models(root)
    for server in serve(root, "thinker", "--reasoning-budget-tokens", "4", "--reasoning-budget-message",
                        " (budget spent)"):
        yield openai.OpenAI(base_url=server.v1, api_key=API_KEY, max_retries=0, timeout=30)


def test_the_configured_budget_cuts_reasoning_and_shows_the_message(budgeted: openai.OpenAI) -> None:
    reasoning, content = ask(budgeted)
    assert reasoning == "step one, (budget spent)"  # four scripted tokens: "step", " ", "one", ","
    assert content == "The answer is 4."


def test_request_fields_override_the_configured_budget(budgeted: openai.OpenAI) -> None:
    assert ask(budgeted, reasoning_budget_tokens=8, reasoning_budget_message="")[0] == "step one, step two"
    assert ask(budgeted, thinking_budget=2)[0] == "step  (budget spent)"
    assert ask(budgeted, reasoning={"max_tokens": 2})[0] == "step  (budget spent)"
    assert ask(budgeted, reasoning_budget_tokens=-1, reasoning={"max_tokens": 2})[0] == "step  (budget spent)"
    assert ask(budgeted, reasoning_budget_tokens=100)[0] == "step one, step two, step three, step four"


def test_a_negative_configured_budget_means_no_cap(tmp_path: Path) -> None:
    from tests.server.conftest import make_models

    make_models(tmp_path)
    for server in serve(tmp_path, "thinker", "--reasoning-budget-tokens", "-1"):
        client = openai.OpenAI(base_url=server.v1, api_key=API_KEY, max_retries=0, timeout=30)
        assert ask(client) == ("step one, step two, step three, step four", "The answer is 4.")
        assert ask(client, reasoning_budget=2)[0] == "step "


def test_a_tool_call_grammar_drops_the_budget(budgeted: openai.OpenAI) -> None:
    """Forced text would switch the grammar off, so a request whose tool_choice needs one keeps its
    whole reasoning (the budget is dropped, as for response_format)."""
    tools = [{"type": "function", "function": {"name": "answer", "parameters": {"type": "object"}}}]
    thoughts = "RAW:step one, step two, step three, step four</think>\n<tool_call>\n<function=answer>\n" \
               "</function>\n</tool_call>"
    for choice in ("required", "auto"):
        message = budgeted.chat.completions.create(
            model="thinker", messages=[{"role": "user", "content": thoughts}], tools=tools, tool_choice=choice,
            parallel_tool_calls=False).choices[0].message
        assert message.model_extra["reasoning_content"] == "step one, step two, step three, step four"
        assert message.tool_calls[0].function.name == "answer"
