"""The scripted engine: answers, tokens, limits and cancellation, like a real engine's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from tokenizers import Tokenizer, models, pre_tokenizers

from tabby_fixed.domain_errors import ContextTooLong
from tabby_fixed.engine.base import Constraint, Finish, GenerationParams, GenerationRequest, Step
from tabby_fixed.engine.scripted import ScriptedEngine, ScriptedFailure, ScriptError
from tabby_fixed.errors import ApiError
from tabby_fixed.sampling.constraints import compiled


def folder_with(tmp_path: Path, script: dict, tokenizer: bool = False) -> Path:
    (tmp_path / "scripted.yml").write_text(yaml.safe_dump(script))
    if tokenizer:
        vocab = {piece: i for i, piece in enumerate(["[UNK]", "hello", "world", "ü", "!", "<tool_call>"])}
        hf = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        hf.pre_tokenizer = pre_tokenizers.Whitespace()
        hf.save(str(tmp_path / "tokenizer.json"))
    return tmp_path


def run(engine: ScriptedEngine, user: str, **params) -> tuple[list[str], Finish]:
    async def collect():
        job = await engine.generate(GenerationRequest("prompt", GenerationParams(**params), user))
        steps = [s async for s in job]
        return [s.text for s in steps if isinstance(s, Step)], steps[-1]
    return asyncio.run(collect())


def test_first_match_wins_and_groups_fill_the_output(tmp_path):
    engine = ScriptedEngine(folder_with(tmp_path, {"responses": [
        {"match": r"say (?P<word>\w+)", "output": "{word}! {{literal}}"},
        {"match": r"say", "output": "never"}], "default": "fallback"}))
    pieces, finish = run(engine, "please say hi")
    assert "".join(pieces) == "hi! {literal}" and finish.reason == "stop" and finish.completion_tokens == len(pieces)
    assert "".join(run(engine, "nothing")[0]) == "fallback"


def test_stop_strings_and_max_tokens(tmp_path):
    engine = ScriptedEngine(folder_with(tmp_path, {"default": "one two three four"}))
    pieces, finish = run(engine, "x", stop=("thr",))
    assert "".join(pieces) == "one two " and finish.stop_str == "thr"
    pieces, finish = run(engine, "x", max_tokens=3)
    assert "".join(pieces) == "one two" and finish.reason == "length" and finish.completion_tokens == 3


def test_the_context_is_enforced_before_generation(tmp_path):
    engine = ScriptedEngine(folder_with(tmp_path, {"default": "ok", "max_seq_len": 3}))
    with pytest.raises(ContextTooLong) as error:
        asyncio.run(engine.generate(GenerationRequest("a b c d e", GenerationParams())))
    assert error.value.max_seq_len == 3 and error.value.prompt_tokens > 3


def test_tokenizer_json_cuts_the_output(tmp_path):
    engine = ScriptedEngine(folder_with(tmp_path, {"default": "hello world!"}, tokenizer=True))
    pieces, finish = run(engine, "x")
    assert finish.completion_tokens == 3 and len(pieces) == 3
    assert engine.decode(engine.encode("hello world")) == "hello world"


def test_failure_after_output(tmp_path):
    engine = ScriptedEngine(folder_with(tmp_path, {"responses": [{"match": "x", "output": "part", "error": "boom"}]}))
    with pytest.raises(ScriptedFailure, match="boom"):
        run(engine, "x")
    assert engine.active_jobs() == 0


@pytest.mark.parametrize(("script", "message"), [
    ({"responses": [{"match": "(", "output": "x"}]}, "bad regex"),
    ({"responses": [{"match": "(?P<a>x)", "output": "{b}"}]}, "does not capture"),
    ({"responses": [{"match": 1, "output": "x"}]}, "needs an 'output'"),
    ({"responses": [{"role": "robot", "output": "x"}]}, "'role' must be one of"),
    ({"responses": [{"turn": 0, "output": "x"}]}, "'turn' must be"),
    ({"responses": "x"}, "must be a list"),
    ({"token_delay_ms": -1}, "token_delay_ms"),
])
def test_bad_scripts_are_refused_with_the_reason(tmp_path, script, message):
    with pytest.raises(ScriptError, match=message):
        ScriptedEngine(folder_with(tmp_path, script))


def test_cancelled_job_stops_counting(tmp_path):
    engine = ScriptedEngine(folder_with(tmp_path, {"default": "tick " * 100, "token_delay_ms": 5}))

    async def cancel_midway() -> int:
        steps = await engine.generate(GenerationRequest("p", GenerationParams()))
        await steps.__anext__()
        during = engine.active_jobs()
        await steps.aclose()
        return during

    assert asyncio.run(cancel_midway()) == 1 and engine.active_jobs() == 0


def test_cache_usage_counts_live_jobs_tokens(tmp_path):
    """Prompt and output tokens of running jobs over max_seq_len; nothing once they end."""
    engine = ScriptedEngine(folder_with(tmp_path, {"default": "tick " * 100, "max_seq_len": 1000}))

    async def after_three_tokens() -> float:
        steps = await engine.generate(GenerationRequest("one two three four", GenerationParams()))
        for _ in range(3):
            await steps.__anext__()
        usage = engine.cache_usage()
        await steps.aclose()
        return usage

    assert asyncio.run(after_three_tokens()) == (7 + 3) / 1000, "7 prompt pieces (words and spaces), 3 tokens"
    assert engine.cache_usage() == 0.0


def ask(engine: ScriptedEngine, *transcript: tuple[str, str]) -> str:
    last_user = next((text for role, text in reversed(transcript) if role == "user"), "")

    async def collect() -> str:
        job = await engine.generate(GenerationRequest("p", GenerationParams(), last_user, transcript))
        return "".join([s.text async for s in job if isinstance(s, Step)])
    return asyncio.run(collect())


def test_rules_answer_tool_results_so_an_agent_loop_ends(tmp_path):
    engine = ScriptedEngine(folder_with(tmp_path, {"responses": [
        {"role": "tool", "match": r"(?P<result>.+)", "output": "done: {result}"},
        {"match": "write", "output": "CALL"}]}))
    assert ask(engine, ("user", "write it")) == "CALL"
    assert ask(engine, ("user", "write it"), ("assistant", ""), ("tool", "ok")) == "done: ok"
    # a user message after the tool result is answered by the user rules again
    assert ask(engine, ("user", "x"), ("assistant", ""), ("tool", "ok"), ("user", "write more")) == "CALL"


def test_rules_by_turn_and_by_any_role(tmp_path):
    engine = ScriptedEngine(folder_with(tmp_path, {"responses": [
        {"turn": 2, "output": "second"},
        {"role": "any", "match": r"^sys$", "output": "any role"},
        {"turn": 1, "output": "first"}], "default": "other"}))
    assert ask(engine, ("user", "hi")) == "first"
    assert ask(engine, ("user", "hi"), ("assistant", "a"), ("user", "again")) == "second"
    assert ask(engine, ("user", "hi"), ("assistant", "a"), ("user", "b"), ("assistant", "c"), ("system", "sys")) \
        == "any role"
    assert ask(engine, ("user", "hi"), ("assistant", "a"), ("user", "b"), ("assistant", "c"), ("user", "d")) == "other"


def test_the_demo_model_answers_the_tool_result_of_its_write():
    engine = ScriptedEngine(Path(__file__).parents[1] / "examples" / "models" / "demo")
    call = ask(engine, ("user", "write notes.txt containing exactly: 123"))
    assert "<function=write_file>" in call and "\n123\n" in call
    assert ask(engine, ("user", "write notes.txt containing exactly: 123"), ("assistant", "I'll write that file."),
               ("tool", "Wrote notes.txt")) == "Done."


def test_an_answer_breaking_the_constraint_is_a_422_at_its_first_refused_character(tmp_path):
    engine = ScriptedEngine(folder_with(tmp_path, {"default": "12a4"}))
    digits = compiled(Constraint("regex", "[0-9]+"))
    with pytest.raises(ApiError) as error:
        run(engine, "x", constraint=digits)
    assert error.value.status == 422 and error.value.param == "regex_pattern"
    assert "at character 2 (after '12')" in error.value.message and "scripted.yml" in error.value.message
    assert engine.active_jobs() == 0


def test_an_answer_cut_short_needs_only_to_fit_so_far(tmp_path):
    engine = ScriptedEngine(folder_with(tmp_path, {"default": '{"a": [1, 2, 3]} and prose'}))
    json_object = compiled(Constraint("json"))
    with pytest.raises(ApiError, match="at character 16"):
        run(engine, "x", constraint=json_object)
    assert "".join(run(engine, "x", constraint=json_object, stop=(" and",))[0]) == '{"a": [1, 2, 3]}'
    pieces, finish = run(engine, "x", constraint=json_object, max_tokens=4)
    assert finish.reason == "length" and '{"a": [1, 2, 3]}'.startswith("".join(pieces))


def test_the_tokenizer_json_is_the_one_checked_with(tmp_path):
    from tokenizers import decoders, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(["hello world"] * 10, trainers.BpeTrainer(
        vocab_size=300, special_tokens=["<|im_end|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    folder = folder_with(tmp_path, {"default": "hello world"})
    bpe.save(str(folder / "tokenizer.json"))
    engine = ScriptedEngine(folder)
    assert engine.encode("hello world") == [bpe.token_to_id("hello"), bpe.token_to_id("Ġworld")]
    assert run(engine, "x", constraint=compiled(Constraint("regex", "hello world")))[1].reason == "stop"
    with pytest.raises(ApiError, match="at character 5 "):  # " world" is one token: the whole of it is refused
        run(engine, "x", constraint=compiled(Constraint("regex", "hello wor")))


def test_a_tokenizer_llguidance_cannot_read_is_checked_byte_by_byte(tmp_path):
    engine = ScriptedEngine(folder_with(tmp_path, {"default": "hello world"}, tokenizer=True))  # no decoder
    with pytest.raises(ApiError, match="at character 9 "):
        run(engine, "x", constraint=compiled(Constraint("regex", "hello wor")))
