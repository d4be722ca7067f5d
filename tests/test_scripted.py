"""The scripted engine: answers, tokens, limits and cancellation, like a real engine's."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import yaml
from tokenizers import Tokenizer, models, pre_tokenizers

from tabby_fixed.engine.base import Finish, GenerationParams, GenerationRequest, Step
from tabby_fixed.engine.scripted import ScriptedEngine, ScriptedFailure, ScriptError
from tabby_fixed.errors import ApiError


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
    with pytest.raises(ApiError) as error:
        asyncio.run(engine.generate(GenerationRequest("a b c d e", GenerationParams())))
    assert error.value.code == "context_length_exceeded"


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
    ({"responses": [{"output": "x"}]}, "needs a 'match'"),
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
