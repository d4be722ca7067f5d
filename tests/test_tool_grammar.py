"""The tool-call grammar on CPU with the real LLGuidance and a real BPE tokenizer that has the
format's tags as added tokens (special, as some models have them, or not): for every format and
``tool_choice`` mode, what it accepts and what it refuses."""

from __future__ import annotations

import functools
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from tabby_fixed.engine.base import Constraint
from tabby_fixed.output import ReasoningSettings
from tabby_fixed.sampling.constraints import compiled
from tabby_fixed.sampling.grammar_check import first_violation, ll_tokenizer
from tabby_fixed.sampling.tool_grammar import tool_call_grammar
from tabby_fixed.toolcalls import ToolCallParser
from tabby_fixed.toolcalls.conformance import CASES, TOOLS
from tabby_fixed.toolcalls.formats import get_format
from tabby_fixed.toolcalls.formats.base import CallSyntax

FORMATS = ["qwen3_coder", "glm4_5", "minimax_m2", "hermes"]
TAGS = ["<|im_end|>", "<tool_call>", "</tool_call>", "<think>", "</think>", "<minimax:tool_call>",
        "</minimax:tool_call>", "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
        "<|tool_call_argument_begin|>", "<|tool_call_end|>", "[TOOL_CALLS]", "[ARGS]"]


def make_tokenizer(special: bool) -> str:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=TAGS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(["<function=write_file>\n<parameter=path>\n</parameter> def return"] * 20,
                                  trainer)
    saved = json.loads(tokenizer.to_str())
    for added in saved["added_tokens"]:
        added["special"] = special or added["content"] == "<|im_end|>"
    return json.dumps(saved)


@functools.cache
def vocabulary(special: bool):
    """The tokenizer, LLGuidance's view of it, and its added tokens; made once per kind."""
    text = make_tokenizer(special)
    added = {a["content"]: a["id"] for a in json.loads(text)["added_tokens"]}
    return Tokenizer.from_str(text), ll_tokenizer(text, 0), added


@pytest.fixture(scope="module", params=[True, False], ids=["special-tags", "text-tags"])
def vocab(request):
    return vocabulary(request.param)


def grammar_for(vocab, fmt: str, choice="auto", parallel=True, tools=TOOLS, reasoning=None) -> str:
    _, _, added = vocab
    lark = tool_call_grammar(get_format(fmt).syntax, tools, choice, parallel, added)
    assert lark is not None
    return compiled(Constraint("tools", lark), reasoning, added).grammar


def accepts(vocab, grammar: str, text: str) -> bool:
    hf, ll, _ = vocab
    return first_violation(grammar, ll, hf.encode(text, add_special_tokens=False).ids, complete=True) is None


def _qwen(name="write_file", value="x"):
    return f"<tool_call>\n<function={name}>\n<parameter=path>\n{value}\n</parameter>\n</function>\n</tool_call>"


CALLS = {
    "qwen3_coder": _qwen,
    "glm4_5": lambda name="write_file", value="x":
        f"<tool_call>{name}\n<arg_key>path</arg_key>\n<arg_value>{value}</arg_value>\n</tool_call>",
    "minimax_m2": lambda name="write_file", value="x": f'<minimax:tool_call>\n<invoke name="{name}">\n'
        f'<parameter name="path">{value}</parameter>\n</invoke>\n</minimax:tool_call>',
    "hermes": lambda name="write_file", value="x":
        f'<tool_call>\n{{"name": "{name}", "arguments": {{"path": "{value}"}}}}\n</tool_call>',
}
#: Conformance texts the grammar steers away from: a bare <function= block (the grammar writes the
#: wrapper) and a boolean spelt as Python (the grammar writes JSON).
STEERED = {"qwen3_coder bare function block", "qwen3_coder typed by schema"}
VALID = [c for c in CASES if c.calls and c.content is None and c.name not in STEERED]


@pytest.mark.parametrize("case", VALID, ids=lambda c: c.name)
@pytest.mark.parametrize("choice", ["auto", "required"])
def test_the_conformance_suites_calls_are_accepted(vocab, case, choice):
    assert accepts(vocab, grammar_for(vocab, case.tool_format, choice, parallel=False), case.text)


@pytest.mark.parametrize("fmt", FORMATS)
def test_required_takes_calls_and_refuses_plain_text_and_unknown_names(vocab, fmt):
    grammar = grammar_for(vocab, fmt, "required")
    assert accepts(vocab, grammar, CALLS[fmt]())
    gap = get_format(fmt).syntax.block_separator
    assert accepts(vocab, grammar, CALLS[fmt]() + ("" if fmt == "minimax_m2" else gap + CALLS[fmt](value="y")))
    assert not accepts(vocab, grammar, "I would rather talk.")
    assert not accepts(vocab, grammar, CALLS[fmt]("delete_everything"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_named_tool_is_the_only_call(vocab, fmt):
    grammar = grammar_for(vocab, fmt, "write_file")
    assert accepts(vocab, grammar, CALLS[fmt]())
    assert not accepts(vocab, grammar, CALLS[fmt]("probe"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_no_second_call_when_parallel_calls_are_off(vocab, fmt):
    for choice in ("auto", "required"):
        grammar = grammar_for(vocab, fmt, choice, parallel=False)
        assert accepts(vocab, grammar, CALLS[fmt]())
        gap = get_format(fmt).syntax.block_separator
        assert not accepts(vocab, grammar, CALLS[fmt]() + gap + CALLS[fmt](value="y"))


@pytest.mark.parametrize("fmt", FORMATS)
def test_none_refuses_any_call_and_keeps_text_free(vocab, fmt):
    grammar = grammar_for(vocab, fmt, "none")
    assert accepts(vocab, grammar, "Plain words, <b>tags</b>, <think> and def f(): return 1")
    assert not accepts(vocab, grammar, "Sure. " + CALLS[fmt]())


STRICT = [{"type": "function", "function": {"name": "write_file", "strict": True, "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "mode": {"type": "integer"}},
    "required": ["path", "mode"], "additionalProperties": False}}}]


@pytest.mark.parametrize("fmt", FORMATS)
def test_lazy_trigger_leaves_text_free_and_strict_arguments_follow_the_schema(vocab, fmt):
    grammar = grammar_for(vocab, fmt, "auto", tools=STRICT)
    good = {"qwen3_coder": "<tool_call>\n<function=write_file>\n<parameter=path>\na\n</parameter>\n"
                           "<parameter=mode>\n644\n</parameter>\n</function>\n</tool_call>",
            "glm4_5": "<tool_call>write_file\n<arg_key>path</arg_key>\n<arg_value>a</arg_value>\n"
                      "<arg_key>mode</arg_key>\n<arg_value>644</arg_value>\n</tool_call>",
            "minimax_m2": '<minimax:tool_call>\n<invoke name="write_file">\n<parameter name="path">a</parameter>\n'
                          '<parameter name="mode">644</parameter>\n</invoke>\n</minimax:tool_call>',
            "hermes": '<tool_call>\n{"name": "write_file", "arguments": {"path": "a", "mode": 644}}\n</tool_call>'}[fmt]
    prose = "Anything at all first, even <function=x>, {json} or <think>.\n"
    assert accepts(vocab, grammar, prose + good)
    assert accepts(vocab, grammar, prose)
    assert not accepts(vocab, grammar, prose + good.replace("644", '"rw"'))  # mode is an integer
    missing = {"qwen3_coder": good.replace("<parameter=mode>\n644\n</parameter>\n", ""),
               "glm4_5": good.replace("<arg_key>mode</arg_key>\n<arg_value>644</arg_value>\n", ""),
               "minimax_m2": good.replace('<parameter name="mode">644</parameter>\n', ""),
               "hermes": good.replace(', "mode": 644', "")}[fmt]
    assert not accepts(vocab, grammar, prose + missing)  # mode is required


def test_the_constraint_starts_after_the_reasoning_section(vocab):
    thinking = ReasoningSettings(True)
    grammar = grammar_for(vocab, "qwen3_coder", "required", reasoning=thinking)
    assert accepts(vocab, grammar, "Let me think: <tool_call> maybe.\n</think>\n\n" + _qwen())
    assert not accepts(vocab, grammar, "thinking</think>\n\nno call")
    schema = compiled(Constraint("json_schema", {"type": "object", "properties": {"a": {"type": "integer"}},
                                                 "required": ["a"]}), ReasoningSettings(False), vocab[2]).grammar
    assert accepts(vocab, schema, '<think>free {"a": "x"}</think>\n{"a": 1}')
    assert accepts(vocab, schema, '{"a": 1}')
    assert not accepts(vocab, schema, '<think>hm</think>{"a": "x"}')




@settings(max_examples=60, deadline=None)
@given(fmt=st.sampled_from(["qwen3_coder", "glm4_5", "minimax_m2"]),
       value=st.text(st.sampled_from("ab <>/=\n\t\"{}[]1é"), max_size=30).filter(lambda v: "</" not in v))
def test_every_string_value_the_grammar_accepts_is_parsed_back_exactly(fmt, value):
    """Free text up to the closing tag: any value is accepted, and the parser reads the call the
    grammar let through as the declared tool with that exact value."""
    vocab = vocabulary(False)
    text = CALLS[fmt](value=value)
    assert accepts(vocab, grammar_for(vocab, fmt, "required", parallel=False), text)
    parsed = ToolCallParser(fmt, TOOLS).parse(text)
    assert [(c.name, c.arguments) for c in parsed.tool_calls] == [("write_file", {"path": value})]


@pytest.mark.parametrize("fmt", FORMATS)
def test_parameters_referring_to_shared_definitions_are_typed_by_them(vocab, fmt):
    tools = [{"type": "function", "function": {"name": "write_file", "strict": True, "parameters": {
        "type": "object", "$defs": {"Where": {"type": "object", "properties": {"path": {"type": "string"}},
                                              "required": ["path"], "additionalProperties": False}},
        "properties": {"path": {"$ref": "#/$defs/Where"}}, "required": ["path"]}}}]
    grammar = grammar_for(vocab, fmt, "required", tools=tools)
    assert accepts(vocab, grammar, CALLS[fmt](value="VALUE").replace('"VALUE"', "VALUE")
                   .replace("VALUE", '{"path": "a"}'))
    assert not accepts(vocab, grammar, CALLS[fmt](value="VALUE").replace('"VALUE"', "VALUE")
                       .replace("VALUE", '{"where": "a"}'))


#: The JSON-arguments shape, as Kimi-K2 and Mistral (v11+) write it.
JSON_ARGUMENT_SYNTAXES = {
    "kimi": (CallSyntax(trigger="<|tool_calls_section_begin|>", block_close="<|tool_calls_section_end|>",
                        shares_block=True, call_separator="", call_open=(
                            "<|tool_call_begin|>functions.{name}:{index}<|tool_call_argument_begin|>",),
                        call_close="<|tool_call_end|>", json_arguments=True),
             lambda name, i, args: f"<|tool_call_begin|>functions.{name}:{i}<|tool_call_argument_begin|>{args}"
                                   "<|tool_call_end|>",
             lambda calls: f"<|tool_calls_section_begin|>{''.join(calls)}<|tool_calls_section_end|>"),
    "mistral": (CallSyntax(trigger="[TOOL_CALLS]", block_close="", block_separator="", call_open=("{name}[ARGS]",),
                           json_arguments=True),
                lambda name, i, args: f"[TOOL_CALLS]{name}[ARGS]{args}",
                "".join),
}


@pytest.mark.parametrize("shape", JSON_ARGUMENT_SYNTAXES)
def test_json_arguments_after_a_header(vocab, shape):
    syntax, one, block = JSON_ARGUMENT_SYNTAXES[shape]

    def grammar(choice, parallel=True, tools=TOOLS):
        return compiled(Constraint("tools", tool_call_grammar(syntax, tools, choice, parallel, vocab[2])),
                        None, vocab[2]).grammar

    first, second = one("write_file", 0, '{"path": "a"}'), one("Bash", 1, '{"command": "ls", "timeout": 5}')
    if shape == "mistral":  # one block per call
        assert accepts(vocab, grammar("required"), first + second)
    else:
        assert accepts(vocab, grammar("required"), block([first, second]))
    assert not accepts(vocab, grammar("required"), block([one("rm_rf", 0, "{}")]))
    assert not accepts(vocab, grammar("required"), block([one("Bash", 0, '{"timeout": "soon"}')]))
    assert not accepts(vocab, grammar("required", parallel=False), block([first, second]) if shape == "kimi"
                       else first + second)
    assert accepts(vocab, grammar("auto", tools=STRICT), "Prose [ARGS] first.\n" + block(
        [one("write_file", 0, '{"path": "a", "mode": 644}')]))
    assert not accepts(vocab, grammar("auto", tools=STRICT), block([one("write_file", 0, '{"path": "a"}')]))


def test_a_format_that_moves_the_start_tag_does_not_inherit_its_parents_grammar():
    """Seed-OSS writes Qwen3-Coder's markup inside <seed:tool_call>: a subclass like it that does
    not declare its own syntax gets none, rather than a grammar steering it to <tool_call>."""
    from tabby_fixed.toolcalls.formats.qwen3_coder import Qwen3Coder

    class Moved(Qwen3Coder):
        start_markers = ("<seed:tool_call>", "<function=")

    assert Moved().syntax is Qwen3Coder.syntax and Moved().call_syntax() is None
    assert Qwen3Coder().call_syntax() is Qwen3Coder.syntax


def test_a_model_without_a_call_grammar_says_the_choice_is_not_enforced(caplog):
    from tabby_fixed.chat import ChatModel, chat_constraint
    from tabby_fixed.server.requests import ChatCompletionRequest

    chat = ChatCompletionRequest.model_validate({"messages": [{"role": "user", "content": "hi"}], "tools": TOOLS,
                                                 "tool_choice": "required"}).chat_input()
    model = ChatModel("plain", "{{ messages }}", None, None, reasoning=False)
    assert chat_constraint(model, chat, "prompt", None, {}) is None
    assert "tool_choice 'required' (strict tools, parallel_tool_calls) is not enforced" in caplog.text
    with_format = ChatModel("coder", "{{ messages }}", None, "qwen3_coder", reasoning=False)
    assert chat_constraint(with_format, chat, "prompt", None, {}).kind == "tools"


#: One call as each of the later formats writes it (write_file, path "a.py").
MORE_CALLS = {
    "seed_oss": "<seed:tool_call>\n<function=write_file>\n<parameter=path>a.py</parameter>\n</function>\n"
                "</seed:tool_call>",
    "kimi_k2": '<|tool_calls_section_begin|><|tool_call_begin|>functions.write_file:0<|tool_call_argument_begin|>'
               '{"path": "a.py"}<|tool_call_end|><|tool_calls_section_end|>',
    "deepseek_v31": '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>write_file<｜tool▁sep｜>{"path": "a.py"}'
                    "<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
    "mistral": '[TOOL_CALLS]write_file[ARGS]{"path": "a.py"}',
    "hy3": "<tool_calls:opensource>\n<tool_call:opensource>write_file<tool_sep:opensource>\n"
           "<arg_key:opensource>path</arg_key:opensource>\n<arg_value:opensource>a.py</arg_value:opensource>\n"
           "</tool_call:opensource>\n</tool_calls:opensource>",
    "deepseek_v4": '<｜DSML｜tool_calls>\n<｜DSML｜invoke name="write_file">\n'
                   '<｜DSML｜parameter name="path" string="true">a.py</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
                   "</｜DSML｜tool_calls>",
    "deepseek_v32": '<｜DSML｜function_calls>\n<｜DSML｜invoke name="write_file">\n'
                    '<｜DSML｜parameter name="path" string="true">a.py</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
                    "</｜DSML｜function_calls>",
    "hy3_preview": "<tool_calls>\n<tool_call>write_file<tool_sep>\n<arg_key>path</arg_key>\n"
                   "<arg_value>a.py</arg_value>\n</tool_call>\n</tool_calls>",
}


@pytest.mark.parametrize("fmt", MORE_CALLS)
def test_later_formats_accept_their_own_calls_and_refuse_unknown_tools(vocab, fmt):
    text = MORE_CALLS[fmt]
    grammar = grammar_for(vocab, fmt, "required")
    assert accepts(vocab, grammar, text)
    assert [(c.name, c.arguments) for c in ToolCallParser(fmt, TOOLS).parse(text).tool_calls] == \
        [("write_file", {"path": "a.py"})]
    assert not accepts(vocab, grammar, text.replace("write_file", "rm_rf"))
    assert not accepts(vocab, grammar_for(vocab, fmt, "none"), "Sure. " + text)


def test_dsml_says_string_for_free_text_and_not_for_json(vocab):
    text = ('<｜DSML｜tool_calls>\n<｜DSML｜invoke name="probe">\n'
            '<｜DSML｜parameter name="path" string="true">123</｜DSML｜parameter>\n'
            '<｜DSML｜parameter name="n" string="false">7</｜DSML｜parameter>\n</｜DSML｜invoke>\n'
            '</｜DSML｜tool_calls>')
    grammar = grammar_for(vocab, "deepseek_v4", "required")
    assert accepts(vocab, grammar, text)
    assert ToolCallParser("deepseek_v4", TOOLS).parse(text).tool_calls[0].arguments == {"path": "123", "n": 7}
    assert not accepts(vocab, grammar, text.replace('"n" string="false"', '"n" string="true"'))
