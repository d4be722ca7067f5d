"""The grammar that makes a model honour ``tool_choice``, strict tools and ``parallel_tool_calls``
while it generates, in LLGuidance's Lark syntax, built once per request from the request's tools
and the format's ``CallSyntax`` (declared next to each format's parser).

- ``auto`` (built only when a tool is strict or ``parallel_tool_calls`` is false): free text; once
  the format's trigger tag appears the call is constrained (a lazy lexeme ends the free text at the
  trigger), so prose and reasoning before it are untouched.
- ``required``: the answer is calls only, at least one; a named tool: exactly one call of it.
- ``parallel_tool_calls: false``: at most one call, then the end of the turn.
- ``none``: free text in which the trigger cannot appear.

String parameters are free text up to the value's closing tag; other parameters are JSON by their
schema; a strict tool's parameters come in the schema's order, the required ones always.
Text equal to one of the tokenizer's added tokens is written as that token (``<[id]>``): LLGuidance
sees added tokens only as whole tokens, never as the text they spell.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..toolcalls.formats.base import CallSyntax
from ..toolcalls.schema import ToolSchemas

#: What the free text of a lazy rule is; the rule ends at the first occurrence of what follows it.
FREE = "/(?s:.*)/"
_REGEX_SPECIAL = set("\\.+*?()|[]{}^$/-&~#")


def regex_literal(text: str) -> str:
    """Text as a Lark ``/regex/`` that matches it exactly."""
    escaped = "".join("\\" + c if c in _REGEX_SPECIAL else {"\n": "\\n", "\t": "\\t", "\r": "\\r"}.get(c, c)
                      for c in text)
    return f"/{escaped}/"


class Literals:
    """Literal text in Lark, added tokens written as token references."""

    def __init__(self, added_tokens: Mapping[str, int]) -> None:
        self._tokens = dict(added_tokens)
        self._longest_first = sorted(self._tokens, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        parts, plain, at = [], "", 0
        while at < len(text):
            token = next((t for t in self._longest_first if t and text.startswith(t, at)), None)
            if token is None:
                plain += text[at]
                at += 1
                continue
            if plain:
                parts.append(json.dumps(plain, ensure_ascii=False))
                plain = ""
            parts.append(f"<[{self._tokens[token]}]>")
            at += len(token)
        if plain:
            parts.append(json.dumps(plain, ensure_ascii=False))
        return " ".join(parts)

    def _token_at_start(self, text: str) -> str | None:
        return next((t for t in self._longest_first if t and text.startswith(t)), None)

    def text_until(self, text: str) -> tuple[str, bool]:
        """A rule body for free text ending with ``text``, and whether the rule must be lazy (the
        end is plain text, found by the shortest match) rather than a token free text cannot hold."""
        if self._token_at_start(text) is not None:
            return f"{FREE} {self(text)}", False
        return f"{FREE} {json.dumps(text, ensure_ascii=False)}", True

    def anything_but(self, text: str) -> str | None:
        """Any tokens but the one ``text`` starts with, when it starts with one (else None)."""
        token = self._token_at_start(text)
        return None if token is None else f"<[^{self._tokens[token]}]>*"

    def anything_until(self, text: str) -> tuple[str, bool]:
        """As ``text_until``, but when ``text`` starts with a token, any other tokens may come before
        it (a reasoning section, or prose before a call, may hold a model's special tokens)."""
        before = self.anything_but(text)
        return (f"{before} {self(text)}", False) if before is not None else self.text_until(text)


def _rule(name: str, body: str, lazy: bool = False) -> str:
    return f"{name}{'[lazy]' if lazy else ''}: {body}"


def _alternatives(items: Iterable[str]) -> str:
    """One Lark group of the alternatives (a lone one as it is)."""
    items = list(items)
    return items[0] if len(items) == 1 else "(" + " | ".join(items) + ")"


def _function(tool: Mapping[str, Any]) -> Mapping[str, Any]:
    return tool.get("function", tool)


def _strict_schema(parameters: Mapping[str, Any]) -> dict[str, Any]:
    return {"additionalProperties": False, **parameters, "type": "object"}


def _definitions(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The shared definitions a tool's ``$ref``s point at (from the root of its parameters)."""
    return {key: parameters[key] for key in ("$defs", "definitions") if key in parameters}


def _loose_schema(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """A non-strict tool's arguments: its parameters' types, none of them required."""
    return {"type": "object", "properties": dict(parameters.get("properties") or {}), **_definitions(parameters)}


class _Builder:
    def __init__(self, syntax: CallSyntax, literal: Literals, tools: Sequence[Mapping[str, Any]]) -> None:
        self.syntax, self.literal = syntax, literal
        self.rules: list[str] = []
        self.schemas = ToolSchemas(tools)

    def named(self, template: str, slot: str, value: str) -> str:
        """A header template with its name slot filled, in every accepted quoting."""
        head, tail = template.split("{" + slot + "}")
        return _alternatives(" ".join(p for p in (self.numbered(head), json.dumps(q + value + q, ensure_ascii=False),
                                                 self.numbered(tail)) if p) for q in self.syntax.quotes)

    def numbered(self, text: str) -> str:
        """Literal text in which ``{index}`` is any call number."""
        return " /[0-9]+/ ".join(self.literal(part) for part in text.split("{index}")).strip()

    def call(self, index: int, tool: Mapping[str, Any]) -> str:
        function = _function(tool)
        name, parameters = function["name"], function.get("parameters") or {}
        strict = bool(function.get("strict"))
        schema = _strict_schema(parameters) if strict else _loose_schema(parameters)
        rule = f"call_{index}"
        syntax = self.syntax
        shared = _definitions(parameters)
        if syntax.json_call:  # references are to the root: the definitions move up with the arguments
            whole = {"type": "object", "properties": {"name": {"const": name}, "arguments": schema},
                     "required": ["name", "arguments"], "additionalProperties": False, **shared}
            self.rules.append(_rule(rule, f"%json {json.dumps(whole)}"))
            return rule
        header = _alternatives(self.named(t, "name", name) for t in syntax.call_open)
        if syntax.json_arguments:
            self.rules.append(_rule(rule, f"{header} %json {json.dumps(schema)} {self.literal(syntax.call_close)}"))
            return rule
        properties = parameters.get("properties") or {}
        params = [self.param(f"param_{index}_{n}", name, key, {**sub, **shared} if isinstance(sub, Mapping) else sub,
                             strict) for n, (key, sub) in enumerate(properties.items())]
        required = set(parameters.get("required") or ()) if strict else set()
        if strict:
            body = " ".join(p if key in required else f"{p}?" for p, key in zip(params, properties, strict=True))
        else:
            body = f"({' | '.join(params)})*" if params else ""
        nameless = [" ".join(x for x in (self.literal(opening), f"%json {json.dumps(schema)}",
                                          self.literal(syntax.value_close)) if x) for opening in syntax.json_param_open]
        after = _alternatives(self.literal(a) or '""' for a in syntax.after_param) if syntax.json_param_open else ""
        if nameless:
            body = _alternatives([body or '""', *(f"{n} {after}" for n in nameless)])
        close = self.literal(syntax.call_close)
        self.rules.append(_rule(rule, " ".join(p for p in (header, body, close) if p)))
        return rule

    def param(self, rule: str, tool: str, key: str, schema: Any, strict: bool) -> str:
        """A parameter: free text up to its closing tag when a string may be meant (or, for a tool
        that is not strict, when the schema does not say), else JSON by its schema (which carries
        the tool's ``$defs`` its references need)."""
        syntax, kind = self.syntax, self.schemas.kind(tool, key)
        free = not isinstance(schema, Mapping) or ("string" in kind if kind is not None else not strict)
        opening = _alternatives(self.named(t.replace("{string}", "true" if free else "false"), "key", key)
                                for t in syntax.param_open)
        after = _alternatives(self.literal(a) or '""' for a in syntax.after_param)
        if free:
            body, lazy = self.literal.text_until(syntax.value_close)
            self.rules.append(_rule(f"{rule}_value", body, lazy))
            value = f"{rule}_value"
        else:
            value = f"%json {json.dumps(schema)} {self.literal(syntax.value_close)}"
        self.rules.append(_rule(rule, f"{opening} {value} {after}"))
        return rule


def enforces(tools: Sequence[Mapping[str, Any]], choice: Any, parallel: bool) -> bool:
    """Whether a request's tool calls need a grammar: not for ``auto`` with parallel calls allowed
    and no strict tool (a call is then whatever the model writes), nor without tools."""
    return bool(tools) and (choice != "auto" or not parallel or any(_function(t).get("strict") for t in tools))


def tool_call_grammar(syntax: CallSyntax, tools: Sequence[Mapping[str, Any]], choice: Any, parallel: bool,
                      added_tokens: Mapping[str, int]) -> str | None:
    """The Lark grammar for a request's tool calls (its rule ``start``), or None when nothing needs
    enforcing (``auto`` with no strict tool and parallel calls allowed).

    ``choice`` is ``auto``, ``none``, ``required`` or the name of the one tool to call.
    """
    if not enforces(tools, choice, parallel):
        return None
    literal = Literals(added_tokens)
    after = literal.anything_but(syntax.trigger)  # a token trigger: any other tokens, else text without it
    tail = [_rule("tail", after)] if after is not None else [_rule("tail", "TAIL"), _no_trigger(syntax, "TAIL")]
    if choice == "none":
        return "\n".join(["start: tail", *tail])
    named = choice not in ("auto", "required")
    chosen = [t for t in tools if _function(t)["name"] == choice] if named else list(tools)
    builder = _Builder(syntax, literal, chosen)
    calls = " | ".join(builder.call(i, tool) for i, tool in enumerate(chosen))
    one = parallel is False or named
    if syntax.shares_block:
        inner = "call" if one else f"call ({literal(syntax.call_separator)} call)*" if syntax.call_separator \
            else "call+"
        rest = " ".join(p for p in (literal(syntax.open_gap), inner, literal(syntax.block_close)) if p)
    else:
        rest = " ".join(p for p in (literal(syntax.open_gap), "call", literal(syntax.block_close)) if p)
    trigger = literal(syntax.trigger)
    rules = [*builder.rules, _rule("call", calls), _rule("rest", rest)]
    if choice == "auto":
        body, lazy = literal.anything_until(syntax.trigger)
        head = "start: tail | pre rest" if one else "start: (pre rest)* tail"
        rules += [_rule("pre", body, lazy), *tail]
        return "\n".join([head, *rules])
    separator = literal(syntax.block_separator)
    blocks = f"{trigger} rest" if one or syntax.shares_block else f"{trigger} rest ({separator} {trigger} rest)*"
    return "\n".join([f"start: {blocks}", *rules])


def _no_trigger(syntax: CallSyntax, name: str) -> str:
    """A terminal of free text in which the format's trigger does not appear."""
    trigger = regex_literal(syntax.trigger)[1:-1]
    return f"{name}: {FREE} & ~/(?s:.*){trigger}(?s:.*)/"
