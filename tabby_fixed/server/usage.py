"""What a response says about its cost and speed: OpenAI's ``usage`` with TabbyAPI's additions,
and llama.cpp's ``timings`` object for the clients and dashboards that read that one.

Both come from the jobs' ``Finish``es (one per choice). The prompt is shared by the choices, so
it counts once; generation counts every choice's tokens over the longest choice's time, since
the choices ran side by side.
"""

from __future__ import annotations

from typing import Any

from ..engine.base import Finish

#: What TabbyAPI reports for a rate whose time was zero (nothing was computed, or too fast to time).
INDETERMINATE = "Indeterminate"


def _rate(tokens: int, seconds: float) -> float | str:
    return round(tokens / seconds, 2) if seconds > 0 else INDETERMINATE


def _totals(finishes: list[Finish]) -> tuple[int, int, int, float, float]:
    """``(prompt, cached, completion, prompt_seconds, completion_seconds)`` of one request."""
    first = finishes[0] if finishes else Finish("stop", 0, 0)
    return (first.prompt_tokens, first.cached_tokens, sum(f.completion_tokens for f in finishes),
            max((f.prompt_seconds for f in finishes), default=0.0),
            max((f.completion_seconds for f in finishes), default=0.0))


def usage(finishes: list[Finish]) -> dict[str, Any]:
    """OpenAI's fields, and TabbyAPI's times and rates. The prompt rate counts only the prompt
    tokens that were computed: cached ones cost nothing."""
    prompt, cached, completion, prompt_time, completion_time = _totals(finishes)
    return {
        "prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {
            "accepted_prediction_tokens": sum(f.accepted_draft_tokens for f in finishes),
            "rejected_prediction_tokens": sum(f.rejected_draft_tokens for f in finishes)},
        "prompt_time": prompt_time, "prompt_tokens_per_sec": _rate(prompt - cached, prompt_time),
        "completion_time": completion_time, "completion_tokens_per_sec": _rate(completion, completion_time),
        "total_time": prompt_time + completion_time,
    }


def timings(finishes: list[Finish]) -> dict[str, Any]:
    """llama.cpp's ``timings``: milliseconds, per-token milliseconds and tokens per second for the
    computed prompt (``prompt_*``) and the generated tokens (``predicted_*``); ``cache_n`` prompt
    tokens came from the cache; ``draft_n`` / ``draft_n_accepted`` count speculative tokens.
    A figure that would divide by zero is null."""
    prompt, cached, completion, prompt_time, completion_time = _totals(finishes)
    computed = prompt - cached
    accepted = sum(f.accepted_draft_tokens for f in finishes)
    return {
        "cache_n": cached,
        "prompt_n": computed, "prompt_ms": prompt_time * 1000,
        "prompt_per_token_ms": prompt_time * 1000 / computed if computed else None,
        "prompt_per_second": computed / prompt_time if prompt_time > 0 else None,
        "predicted_n": completion, "predicted_ms": completion_time * 1000,
        "predicted_per_token_ms": completion_time * 1000 / completion if completion else None,
        "predicted_per_second": completion / completion_time if completion_time > 0 else None,
        "draft_n": accepted + sum(f.rejected_draft_tokens for f in finishes), "draft_n_accepted": accepted,
    }
