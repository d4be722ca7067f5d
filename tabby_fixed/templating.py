"""Chat template rendering, as Hugging Face's ``apply_chat_template`` does it.

Templates are untrusted model-repository data, so they run in jinja2's immutable sandbox. The
environment matches the one HF templates are written for: ``trim_blocks``, ``lstrip_blocks``,
``tojson`` that keeps non-ASCII text and accepts ``indent``, ``raise_exception`` and
``strftime_now``, and the ``{% generation %}`` block (Hugging Face marks assistant text with it
for training masks; rendering ignores the tag). OpenAI clients send a past call's ``arguments``
as a JSON string, but XML-style templates (Qwen3-Coder, GLM, MiniMax) iterate over them as a
mapping, so they are decoded first.
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
from datetime import datetime
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

from jinja2 import TemplateError, nodes
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment

logger = logging.getLogger(__name__)

#: Templates shipped with the server (chatml, alpaca), found after the user's templates/ folder.
BUILTIN_TEMPLATES = Path(__file__).resolve().parent / "templates"


class ChatTemplateError(ValueError):
    """The template refused the conversation or could not be rendered; the message says why."""


def _raise_exception(message: str) -> None:
    raise ChatTemplateError(message)


def _tojson(value: Any, ensure_ascii: bool = False, indent: int | None = None,
            separators: tuple[str, str] | None = None, sort_keys: bool = False) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(pattern: str) -> str:
    return datetime.now().strftime(pattern)


class _GenerationBlock(Extension):
    """``{% generation %}...{% endgeneration %}`` renders its body unchanged."""

    tags: ClassVar[set[str]] = {"generation"}

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


@lru_cache(maxsize=16)
def _compile(source: str) -> Any:
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                extensions=["jinja2.ext.loopcontrols", _GenerationBlock])
    environment.filters["tojson"] = _tojson
    environment.globals["raise_exception"] = _raise_exception
    environment.globals["strftime_now"] = _strftime_now
    return environment.from_string(source)


def decode_call_arguments(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy of messages whose tool calls carry ``arguments`` as a mapping, not a JSON string."""
    decoded = copy.deepcopy(messages)
    for message in decoded:
        for call in message.get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and isinstance(function.get("arguments"), str):
                with contextlib.suppress(ValueError):
                    function["arguments"] = json.loads(function["arguments"] or "{}")
    return decoded


def render_chat(source: str, messages: list[dict[str, Any]], *, tools: list[dict[str, Any]] | None = None,
                add_generation_prompt: bool = True, **variables: Any) -> str:
    """The prompt text a chat template makes of a conversation."""
    try:
        return _compile(source).render(messages=decode_call_arguments(messages), tools=tools,
                                       add_generation_prompt=add_generation_prompt, **variables)
    except ChatTemplateError:
        raise
    except (TemplateError, TypeError, ValueError, KeyError, AttributeError) as error:
        raise ChatTemplateError(f"chat template failed: {error}") from error


def _template_from_tokenizer_config(data: Any, wanted: str | None) -> str | None:
    """``chat_template`` is a string, or a list of ``{name, template}`` entries (named variants)."""
    template = data.get("chat_template") if isinstance(data, dict) else None
    if isinstance(template, str):
        return template if wanted is None else None
    if isinstance(template, list):
        entries = {e.get("name"): e.get("template") for e in template if isinstance(e, dict)}
        chosen = entries.get(wanted) if wanted else entries.get("default", next(iter(entries.values()), None))
        return chosen if isinstance(chosen, str) else None
    return None


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def template_folders(templates_dir: Path | None) -> list[Path]:
    """Where named templates are looked up: the user's templates/ folder, then the shipped ones."""
    return [templates_dir or Path("templates"), BUILTIN_TEMPLATES]


def template_names(templates_dir: Path | None) -> list[str]:
    return sorted({p.stem for folder in template_folders(templates_dir) if folder.is_dir()
                   for p in folder.glob("*.jinja")})


def named_template(name: str, templates_dir: Path | None) -> tuple[str, str] | None:
    """``<name>.jinja`` as ``(name, source)`` from the first folder that has it; ``name`` may carry
    the suffix already (upstream's config samples write ``prompt_template: chatml.jinja``)."""
    stem = name.removesuffix(".jinja")
    for folder in template_folders(templates_dir):
        path = folder / f"{stem}.jinja"
        if path.is_file():
            return stem, path.read_text(encoding="utf-8")
    return None


def _template_named_like(model_folder: Path, templates_dir: Path | None) -> tuple[str, str] | None:
    """The template whose name is part of the model folder's name (the longest such name), as
    upstream's last resort; upstream compares only the first file it lists."""
    folder_name = model_folder.name.lower()
    matching = sorted((n for n in template_names(templates_dir) if n.lower() in folder_name),
                      key=lambda n: (-len(n), n))
    return named_template(matching[0], templates_dir) if matching else None


def find_chat_template(model_folder: Path, prompt_template: str | None = None,
                       templates_dir: Path | None = None) -> tuple[str, str] | None:
    """The model's chat template as ``(name, source)``, in TabbyAPI's lookup order.

    With ``prompt_template`` set (``name`` or ``name.jinja``): ``templates/<name>.jinja`` (the
    user's folder, then the shipped ones), then the entry of that name in
    ``tokenizer_config.json``. Then the model folder's ``tabby_template.jinja``,
    ``chat_template.jinja``, ``chat_template.json`` and ``tokenizer_config.json``; last, a
    template whose name is part of the model folder's name.
    """
    tokenizer_config = _read_json(model_folder / "tokenizer_config.json")
    if prompt_template:
        named = named_template(prompt_template, templates_dir)
        if named is not None:
            return named
        source = _template_from_tokenizer_config(tokenizer_config, prompt_template)
        if source is not None:
            return prompt_template, source
        logger.warning("prompt_template %r: no %s.jinja in %s and no template of that name in %s; using the "
                       "model's own", prompt_template, prompt_template.removesuffix(".jinja"),
                       " or ".join(str(folder) for folder in template_folders(templates_dir)),
                       model_folder / "tokenizer_config.json")
    for file_name in ("tabby_template.jinja", "chat_template.jinja"):
        path = model_folder / file_name
        if path.is_file():
            return path.stem, path.read_text(encoding="utf-8")
    chat_template_json = _read_json(model_folder / "chat_template.json")
    if isinstance(chat_template_json, dict) and isinstance(chat_template_json.get("chat_template"), str):
        return "chat_template", chat_template_json["chat_template"]
    source = _template_from_tokenizer_config(tokenizer_config, None)
    if source is not None:
        return "tokenizer_config", source
    return _template_named_like(model_folder, templates_dir)
