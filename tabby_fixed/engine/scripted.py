"""An engine that replays scripted answers: the whole server runs, is tested and can be tried
without a GPU.

A scripted model is a folder holding ``scripted.yml``::

    tool_format: qwen3_coder          # optional, as in tabby_config.yml
    reasoning: false                  # optional
    chat_template: template.jinja     # optional; the built-in ChatML template with tools otherwise
    token_delay_ms: 0                 # optional pause before each token
    structured_output_examples: false # optional: answer response_format/json_schema with a valid JSON value
    constraint_check_seconds: 1       # optional: longest the check of an answer against the request's grammar may run
    vision_tower: false               # optional; true: takes images when model.vision is on
    max_seq_len: 32768                # optional
    responses:                        # first match wins
      - role: tool                    # the last message is a tool result: answer it, ending the loop
        match: '(?P<result>.*)'
        output: "Done: {result}"
      - match: 'write (?P<path>\\S+) containing exactly: (?P<value>.*)'    # Python regex, DOTALL
        output: "<tool_call>\\n<function=write_file>\\n<parameter=path>\\n{path}\\n</parameter>..."
      - turn: 1                       # only the conversation's first answer
        output: "Hello."
      - match: 'crash'
        output: "Partial answer"
        error: "the GPU fell off the bus"   # optional: fail the job after the output, as an engine can
    default: "I have no scripted answer for that."

A rule without ``role`` (or ``role: user``) is tried against the latest user message, wherever
it is. With ``role: tool``, ``assistant``, ``system`` or ``any`` it is tried only when the
conversation's *last* message has that role (``any``: whatever it is), so a scripted model can
call a tool and then answer its result, as an agent loop needs. ``turn: N`` limits a rule to the
conversation's Nth answer (1 + the assistant messages before it). ``match`` defaults to matching
anything. Each ``match`` is tried with ``re.search``; ``{name}`` in ``output`` is replaced by that named
group's text verbatim (``{{`` and ``}}`` for literal braces). The answer is cut into tokens by
the folder's ``tokenizer.json`` when there is one, else into word, space and punctuation pieces,
and goes through the same limits as a real model's: stop strings, ``max_tokens``, the context,
and the reasoning budget (the scripted reasoning is cut there, the budget message and end tag are
forced, and the script's answer after its own end tag follows).

A request with an output constraint (``response_format``, ``tool_choice``, ...) cannot steer a
script, so the answer is checked against the request's grammar, token by token with the folder's
tokenizer (one token per byte without one), before anything is sent: an answer the grammar refuses
is a 422 naming the first refused character, the script's bug.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import string
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..errors import ApiError
from ..reasoning_budget import BudgetWatch, ReasoningBudget
from ..sampling.constraints import CONSTRAINT_FIELDS, compiled
from ..sampling.grammar_check import Violation, byte_ids, first_violation, ll_tokenizer
from ..templating import find_chat_template
from ..toolcalls import scan
from .base import (
    Constraint,
    Finish,
    GenerationParams,
    GenerationRequest,
    ImageInput,
    ModelInfo,
    Step,
    TokenLogprob,
    completion_budget,
    read_added_tokens,
)
from .schema_example import example

BUILTIN_TEMPLATE = Path(__file__).with_name("chatml_tools.jinja")
_PIECES = re.compile(r"\w+|\s+|[^\w\s]")
_VOCABULARY_LIMIT = 65536
_PIECE_LIMIT = 32
_CHAR_BASE = _VOCABULARY_LIMIT
#: With no delay, give other requests the loop after this many tokens.
_YIELD_EVERY = 16


class ScriptError(ValueError):
    """A scripted model folder that cannot be used; the message names the file and entry."""


class ScriptedFailure(RuntimeError):
    """The failure a response's ``error`` asks for, raised mid-generation like an engine fault;
    also a job cut short by an unload, and a constraint check that ran past ``constraint_check_seconds``
    (output that breaks the constraint is ``ScriptBreaksConstraint``)."""


_ROLES = ("user", "assistant", "tool", "system", "any")


@dataclass(frozen=True)
class _Response:
    pattern: re.Pattern[str]
    output: str
    error: str | None = None
    role: str = "user"  # user: the latest user message; others: the last message, when it has this role
    turn: int | None = None  # only the conversation's Nth answer

    def subject(self, request: GenerationRequest) -> str | None:
        """The text this rule is matched against, or None when the rule does not apply to the request."""
        transcript = request.transcript or (("user", request.last_user_text),)
        if self.turn is not None and self.turn != 1 + sum(role == "assistant" for role, _ in transcript):
            return None
        if self.role == "user":
            return request.last_user_text
        role, text = transcript[-1]
        return text if self.role in ("any", role) else None


def _load_script(path: Path) -> dict[str, Any]:
    try:
        script = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        raise ScriptError(f"{path}: {error}") from error
    if not isinstance(script, dict):
        raise ScriptError(f"{path}: expected a mapping of settings")
    return script


def script_context(script: dict[str, Any], configured: int | None) -> int:
    """The context length: the configured one, else the script's ``max_seq_len``, else 32768."""
    return int(configured or script.get("max_seq_len", 32768))


def folder_context(folder: Path, configured: int | None) -> int:
    """The context a scripted model folder would load with, read without loading it."""
    return script_context(_load_script(folder / "scripted.yml"), configured)


def _responses(path: Path, entries: Any) -> list[_Response]:
    if not isinstance(entries, list):
        raise ScriptError(f"{path}: 'responses' must be a list of {{match, output}} entries")
    responses = []
    for number, entry in enumerate(entries, 1):
        if not isinstance(entry, dict) or not isinstance(entry.get("match", ""), str) \
                or not isinstance(entry.get("output"), str):
            raise ScriptError(f"{path}: response {number} needs an 'output' string (and 'match', if any, a string)")
        role, turn = entry.get("role", "user"), entry.get("turn")
        if role not in _ROLES:
            raise ScriptError(f"{path}: response {number}: 'role' must be one of {', '.join(_ROLES)}")
        if turn is not None and (not isinstance(turn, int) or isinstance(turn, bool) or turn < 1):
            raise ScriptError(f"{path}: response {number}: 'turn' must be a whole number >= 1")
        try:
            pattern = re.compile(entry.get("match", ""), re.DOTALL)
        except re.error as error:
            raise ScriptError(f"{path}: response {number}: bad regex: {error}") from error
        fields = {name for _, name, _, _ in string.Formatter().parse(entry["output"]) if name is not None}
        unknown = fields - set(pattern.groupindex)
        if unknown:
            raise ScriptError(f"{path}: response {number}: output uses {sorted(unknown)}, "
                              f"which the match does not capture (write {{{{ and }}}} for literal braces)")
        failure = entry.get("error")
        if failure is not None and not isinstance(failure, str):
            raise ScriptError(f"{path}: response {number}: 'error' must be a string")
        responses.append(_Response(pattern, entry["output"], failure, role, turn))
    return responses


class _Tokenizer:
    """The folder's tokenizer.json when present; else a vocabulary of word/space/punctuation pieces
    that grows as text is seen (ids are stable for the engine's lifetime).

    Prompts come from clients, so that vocabulary is bounded: once it holds
    ``_VOCABULARY_LIMIT`` pieces, and for any piece longer than ``_PIECE_LIMIT`` characters, new
    text is spelled one character per token (id ``_CHAR_BASE + ord(c)``), which needs no memory.
    """

    def __init__(self, folder: Path) -> None:
        path = folder / "tokenizer.json"
        self._hf = None
        self.json: str | None = None  # the tokenizer.json text, for LLGuidance
        if path.is_file():
            from tokenizers import Tokenizer

            self.json = path.read_text(encoding="utf-8")
            self._hf = Tokenizer.from_str(self.json)
        self._ids: dict[str, int] = {}
        self._pieces: list[str] = []
        self._lock = threading.Lock()  # prompts are counted on worker threads

    def encode(self, text: str) -> list[int]:
        if self._hf is not None:
            return self._hf.encode(text, add_special_tokens=False).ids
        return list(self._word_ids(text))

    def count(self, text: str) -> int:
        """How many tokens encode would give, without building the list."""
        if self._hf is not None:
            return len(self._hf.encode(text, add_special_tokens=False).ids)
        return sum(1 for _ in self._word_ids(text))

    def _word_ids(self, text: str) -> Iterator[int]:
        for found in _PIECES.finditer(text):
            piece = found.group()
            known = self._ids.get(piece)
            if known is None and len(piece) <= _PIECE_LIMIT and len(self._pieces) < _VOCABULARY_LIMIT:
                with self._lock:
                    known = self._ids.setdefault(piece, len(self._pieces))
                    if known == len(self._pieces):
                        self._pieces.append(piece)
            if known is not None:
                yield known
            else:
                yield from (_CHAR_BASE + ord(char) for char in piece)

    def decode(self, ids: list[int]) -> str:
        if self._hf is not None:
            return self._hf.decode(ids, skip_special_tokens=False)
        return "".join(self._piece(i) for i in ids)

    def _piece(self, token: int) -> str:
        if 0 <= token < len(self._pieces):
            return self._pieces[token]
        return chr(token - _CHAR_BASE) if 0 <= token - _CHAR_BASE <= sys.maxunicode else ""

    def pieces(self, text: str) -> Iterator[str]:
        """The text as the tokens a model would emit, each decoded on its own, as they are needed."""
        if self._hf is None:
            return (found.group() for found in _PIECES.finditer(text))
        from tokenizers.decoders import DecodeStream

        stream = DecodeStream(skip_special_tokens=False)
        return (stream.step(self._hf, token) or "" for token in self.encode(text))


class ScriptBreaksConstraint(ApiError):
    """The script's answer breaks the request's constraint: a fixture bug, reported where it is."""


def _violation_error(folder: Path, constraint: Constraint, output: str, violation: Violation) -> ApiError:
    field = CONSTRAINT_FIELDS[constraint.kind]
    before = output[max(0, violation.offset - 40):violation.offset]
    return ScriptBreaksConstraint(
        422, f"The scripted answer of {folder.name} breaks the request's {field} at character {violation.offset} "
             f"(after {before!r}): {violation.reason}. A real model would be steered by the grammar; fix the "
             f"script in {folder / 'scripted.yml'}.", code="script_breaks_constraint", param=field)


class ScriptedEngine:
    sampler_fields = frozenset({"max_tokens", "stop", "logprobs", "top_logprobs"})

    def __init__(self, folder: Path, *, max_seq_len: int | None = None, prompt_template: str | None = None,
                 templates_dir: Path | None = None, vision: bool = False) -> None:
        path = folder / "scripted.yml"
        script = _load_script(path)
        self._responses = _responses(path, script.get("responses", []))
        self._default = str(script.get("default", "I have no scripted answer for that."))
        delay = script.get("token_delay_ms", 0)
        if not isinstance(delay, (int, float)) or delay < 0:
            raise ScriptError(f"{path}: 'token_delay_ms' must be a number >= 0")
        self._delay = delay / 1000
        check_seconds = script.get("constraint_check_seconds", 1)
        if not isinstance(check_seconds, (int, float)) or check_seconds <= 0:
            raise ScriptError(f"{path}: 'constraint_check_seconds' must be a number > 0")
        self._check_seconds = float(check_seconds)
        self._folder = folder
        self._structured_examples = bool(script.get("structured_output_examples", False))
        self._tokenizer = _Tokenizer(folder)
        self._active = 0
        self._held_tokens = 0  # prompt and output tokens of live jobs: what a real KV cache would hold
        self._unloaded = False
        template_file = script.get("chat_template")
        if template_file:
            template = (Path(template_file).stem, (folder / template_file).read_text(encoding="utf-8"))
        else:
            template = find_chat_template(folder, prompt_template, templates_dir) or (
                "chatml_tools", BUILTIN_TEMPLATE.read_text(encoding="utf-8"))
        self.info = ModelInfo(
            name=folder.name,
            max_seq_len=script_context(script, max_seq_len),
            chat_template=template[1],
            chat_template_name=template[0],
            tool_format=script.get("tool_format"),
            reasoning=bool(script.get("reasoning", False)),
            bos_token=None,
            eos_token="<|im_end|>",
            max_batch_size=256,
            added_tokens=read_added_tokens(folder),
            vision=vision and bool(script.get("vision_tower", False)),
        )
        #: Every image a request brought, in order: what the tests read to follow images end to end.
        self.images_seen: list[ImageInput] = []

    def encode(self, text: str, *, add_bos: bool = False, special_tokens: bool = True) -> list[int]:
        return self._tokenizer.encode(text)

    def decode(self, ids: list[int], *, special_tokens: bool = True) -> str:
        return self._tokenizer.decode(ids)

    def active_jobs(self) -> int:
        return self._active

    def cache_usage(self) -> float:
        """Live jobs' tokens against a cache of one context's length, as a model with a cache the
        size of ``max_seq_len`` would fill it (without prefix sharing)."""
        return min(1.0, self._held_tokens / self.info.max_seq_len)

    def health_issues(self) -> list[dict[str, str]]:
        return []

    async def unload(self) -> None:
        """Running jobs end at their next token with an error, as a real engine's are cancelled."""
        self._unloaded = True

    def answer(self, request: GenerationRequest) -> tuple[str, str | None]:
        """The scripted output for a conversation, and the failure to raise after it (if any)."""
        for response in self._responses:
            subject = response.subject(request)
            found = response.pattern.search(subject) if subject is not None else None
            if found:
                groups = {name: value or "" for name, value in found.groupdict().items()}
                return response.output.format_map(groups), response.error
        return self._default, None

    async def generate(self, request: GenerationRequest) -> AsyncIterator[Step | Finish]:
        for image in request.images:  # as a real engine swaps each marker for the image's embedding
            if not self.info.vision or request.prompt.count(image.marker) != 1:
                raise ScriptedFailure(f"image {image.marker} reached a model without vision, or is not in the "
                                      f"prompt exactly once")
        self.images_seen += request.images
        prompt_tokens = await asyncio.to_thread(self._tokenizer.count, request.prompt)
        budget = completion_budget(prompt_tokens, self.info.max_seq_len, request.params.max_tokens)
        output, failure = self.answer(request)
        constraint = request.params.constraint
        if self._structured_examples and constraint is not None and constraint.kind in ("json", "json_schema"):
            output, failure = json.dumps(example(constraint.value or {}), ensure_ascii=False), None
        stops = tuple(stop for stop in request.params.stop if isinstance(stop, str) and stop)
        if constraint is not None:
            await asyncio.to_thread(self._check, output, budget, stops, constraint)
        return self._replay(self._tokenizer.pieces(output), budget, stops, prompt_tokens, failure,
                            request.params)

    def _check(self, output: str, budget: int, stops: tuple[str, ...], constraint: Constraint) -> None:
        """The output a job would emit (to its first stop string, within its budget), checked against
        the request's grammar token by token before anything is sent, within
        ``constraint_check_seconds``; it must be complete unless a stop string or the budget cuts it."""
        pieces = self._tokenizer.pieces(output)
        emitted = "".join(itertools.islice(pieces, budget))
        cut = [at for at in (emitted.find(stop) for stop in stops) if at >= 0]
        if cut:
            emitted = emitted[:min(cut)]
        complete = not cut and next(pieces, None) is None
        grammar = constraint.grammar or compiled(constraint).grammar
        assert grammar is not None, "compiled() always sets the grammar"
        try:
            violation = first_violation(grammar, *self._grammar_view(emitted), complete,
                                        deadline=time.monotonic() + self._check_seconds)
        except TimeoutError:
            raise ScriptedFailure(f"checking the scripted output against the request's grammar took longer than "
                                  f"{self._check_seconds:g} s (constraint_check_seconds)") from None
        if violation is not None:
            raise _violation_error(self._folder, constraint, emitted, violation)

    def _grammar_view(self, text: str) -> tuple[Any, list[int]]:
        """LLGuidance's tokenizer and the text's ids: the folder's tokenizer.json, or one token per
        byte without one (or with one LLGuidance cannot read, such as a word list without a decoder)."""
        if self._tokenizer.json is not None:
            ids = self._tokenizer.encode(self.info.eos_token or "")
            try:
                return ll_tokenizer(self._tokenizer.json, ids[0] if len(ids) == 1 else None), \
                    self._tokenizer.encode(text)
            except ValueError:
                pass
        return ll_tokenizer(None), byte_ids(text)

    def _cut_reasoning(self, rest: Iterator[str], budget: ReasoningBudget) -> Iterator[str]:
        """The scripted output after its reasoning budget is spent: the forced message and end tag,
        then the script's answer (what follows its own end tag), as a model that was made to stop
        thinking would go on to answer."""
        text = "".join(rest)
        end = text.find(budget.end_tag)
        answer = text[end + len(budget.end_tag):] if end >= 0 else ""
        return itertools.chain(self._tokenizer.pieces(budget.injection), self._tokenizer.pieces(answer))

    async def _replay(self, pieces: Iterator[str], budget: int, stops: tuple[str, ...], prompt_tokens: int,
                      failure: str | None, params: GenerationParams) -> AsyncIterator[Step | Finish]:
        """Scripted tokens are certain: each has log-probability 0, and is its own only alternative."""
        self._active += 1
        self._held_tokens += prompt_tokens
        started = time.perf_counter()
        held = ""  # text that could still be the start of a stop string
        count = 0
        queue = pieces  # pieces come lazily (a long answer is never held whole); a budget cut replaces the rest
        watch = BudgetWatch(params.reasoning_budget) if params.reasoning_budget is not None else None
        if watch is not None and watch.due_at_start():
            queue = self._cut_reasoning(queue, watch.budget)
        try:
            while (piece := next(queue, None)) is not None:
                if self._unloaded:
                    raise ScriptedFailure("the job was aborted because the model was unloaded")
                if count == budget:
                    yield Finish("length", prompt_tokens, count, completion_seconds=time.perf_counter() - started)
                    return
                if self._delay:
                    await asyncio.sleep(self._delay)
                elif count % _YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                count += 1
                self._held_tokens += 1
                if watch is not None and watch.feed(piece, 1):
                    queue = self._cut_reasoning(queue, watch.budget)
                certain = (TokenLogprob(piece, 0.0, ((piece, 0.0),)[:params.top_logprobs]),) \
                    if params.top_logprobs is not None else ()
                text = held + piece
                size, stop = scan(text, stops, final=False)
                if stop is not None:
                    if size:
                        yield Step(text[:size], logprobs=certain)
                    yield Finish("stop", prompt_tokens, count, stop_str=stop,
                                 completion_seconds=time.perf_counter() - started)
                    return
                held = text[size:]
                if size or certain:
                    yield Step(text[:size], logprobs=certain)
            if held:
                yield Step(held, token_count=0)
            if failure is not None:
                raise ScriptedFailure(failure)
            yield Finish("stop", prompt_tokens, count, completion_seconds=time.perf_counter() - started)
        finally:
            self._active -= 1
            self._held_tokens -= prompt_tokens + count
