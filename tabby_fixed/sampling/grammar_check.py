"""Checking finished text against a request's LLGuidance grammar, token by token with the model's
tokenizer: what the scripted engine does instead of steering (its output is written in advance),
so a script that breaks the grammar is reported at the first token the grammar refuses."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import lru_cache

import llguidance

#: The id of the end-of-sequence token in the byte vocabulary (after the 256 bytes).
_BYTE_EOS = 256


@lru_cache(maxsize=8)
def ll_tokenizer(tokenizer_json: str | None, eos_id: int | None = None) -> llguidance.LLTokenizer:
    """LLGuidance's view of a tokenizer.json; None: one token per byte, for models without one."""
    if tokenizer_json is None:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers

        alphabet = pre_tokenizers.ByteLevel.alphabet()
        byte_chars = sorted(alphabet, key=_byte_of)
        tokenizer = Tokenizer(models.BPE(vocab={c: i for i, c in enumerate(byte_chars)}, merges=[]))
        tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
        tokenizer.decoder = decoders.ByteLevel()
        tokenizer.add_special_tokens(["<|end|>"])
        return llguidance.LLTokenizer(tokenizer.to_str(), eos_token=_BYTE_EOS)
    return llguidance.LLTokenizer(tokenizer_json, eos_token=eos_id)


def _byte_of(char: str) -> int:
    """The byte a ByteLevel alphabet character stands for (GPT-2's printable mapping)."""
    code = ord(char)
    if 33 <= code <= 126 or 161 <= code <= 172 or 174 <= code <= 255:
        return code
    shifted = [b for b in range(256) if not (33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255)]
    return shifted[code - 256]


@dataclass(frozen=True)
class Violation:
    """Where text first breaks a grammar: the token's index and its offset in the text."""

    token: int
    offset: int  # characters of the text before the refused token
    reason: str


def first_violation(grammar: str, tokenizer: llguidance.LLTokenizer, ids: list[int], complete: bool,
                    deadline: float = math.inf) -> Violation | None:
    """The first of ``ids`` the grammar refuses, or (when ``complete``) the end of a text the grammar
    needs more of; None when the text fits. TimeoutError once ``time.monotonic()`` passes ``deadline``."""
    matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)  # the violation is reported, not logged
    for index, token in enumerate(ids):
        if index % 256 == 0 and time.monotonic() > deadline:
            raise TimeoutError
        if not matcher.consume_token(token):
            offset = len(tokenizer.decode_str(ids[:index]))
            return Violation(index, offset, _reason(matcher.get_error()))
    if complete and not matcher.is_accepting():
        return Violation(len(ids), len(tokenizer.decode_str(ids)), "the text ends before the grammar does")
    return None


def byte_ids(text: str) -> list[int]:
    """Text as the byte vocabulary's ids."""
    return list(text.encode())


def _reason(error: str) -> str:
    first = next((line for line in error.splitlines() if line.strip()), error)
    return first.removeprefix("Parser Error: ").strip()
