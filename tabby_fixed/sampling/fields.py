"""Sampler fields a request may carry: TabbyAPI's names, aliases and ranges, OpenAI's where they differ.

Every field defaults to None, meaning "not set here": the effective value then comes from a lower
layer (``effective.py``). ``NEUTRAL`` holds the value that changes nothing, used when no layer
sets a field.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..errors import ApiError


def _aliases(*names: str) -> AliasChoices:
    return AliasChoices(*names)


class SamplerFields(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    max_tokens: int | None = Field(None, ge=0, validation_alias=_aliases("max_tokens", "max_completion_tokens",
                                                                           "max_length"))
    min_tokens: int | None = Field(None, ge=0, validation_alias=_aliases("min_tokens", "min_length"))
    stop: list[str | int] | None = Field(None, validation_alias=_aliases("stop", "stop_sequence"))
    banned_strings: list[str] | None = None
    banned_tokens: list[int] | None = Field(None, validation_alias=_aliases("banned_tokens", "custom_token_bans"))
    allowed_tokens: list[int] | None = Field(None, validation_alias=_aliases("allowed_tokens", "allowed_token_ids"))
    token_healing: bool | None = None
    temperature: float | None = Field(None, ge=0, le=10)
    temperature_last: bool | None = None
    smoothing_factor: float | None = Field(None, ge=0)
    top_k: int | None = Field(None, ge=-1)
    top_p: float | None = Field(None, ge=0, le=1)
    top_a: float | None = Field(None, ge=0)
    min_p: float | None = Field(None, ge=0, le=1)
    tfs: float | None = Field(None, ge=0, le=1)
    typical: float | None = Field(None, gt=0, le=1, validation_alias=_aliases("typical", "typical_p"))
    skew: float | None = None
    xtc_probability: float | None = Field(None, ge=0, le=1)
    xtc_threshold: float | None = Field(None, ge=0, le=1)
    frequency_penalty: float | None = Field(None, ge=-2, le=2)
    presence_penalty: float | None = Field(None, ge=-2, le=2)
    repetition_penalty: float | None = Field(None, gt=0, validation_alias=_aliases("repetition_penalty", "rep_pen"))
    penalty_range: int | None = Field(None, ge=-1, validation_alias=_aliases(
        "penalty_range", "repetition_range", "repetition_penalty_range", "rep_pen_range"))
    repetition_decay: int | None = Field(None, ge=0)
    dry_multiplier: float | None = Field(None, ge=0)
    dry_base: float | None = Field(None, ge=0)
    dry_allowed_length: int | None = Field(None, ge=0)
    dry_range: int | None = Field(None, ge=0, validation_alias=_aliases("dry_range", "dry_penalty_last_n"))
    dry_sequence_breakers: list[str] | None = None
    mirostat_mode: int | None = Field(None, ge=0, le=2, validation_alias=_aliases("mirostat_mode", "mirostat"))
    mirostat_tau: float | None = None
    mirostat_eta: float | None = None
    max_temp: float | None = Field(None, ge=0, validation_alias=_aliases("max_temp", "dynatemp_high"))
    min_temp: float | None = Field(None, ge=0, validation_alias=_aliases("min_temp", "dynatemp_low"))
    temp_exponent: float | None = Field(None, ge=0, validation_alias=_aliases("temp_exponent", "dynatemp_exponent"))
    add_bos_token: bool | None = None
    ban_eos_token: bool | None = Field(None, validation_alias=_aliases("ban_eos_token", "ignore_eos"))
    logit_bias: dict[int, float] | None = None
    json_schema: dict[str, Any] | None = None
    regex_pattern: str | None = None
    grammar_string: str | None = None
    logprobs: int | None = Field(None, ge=0)
    top_logprobs: int | None = Field(None, ge=0, le=20)
    adaptive_target: float | None = None
    adaptive_decay: float | None = None
    loop_detect_window: int | None = Field(None, ge=0)
    seed: int | None = None

    @field_validator("stop", "banned_strings", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("dry_sequence_breakers", mode="before")
    @classmethod
    def _json_breakers(cls, value: Any) -> Any:
        """SillyTavern sends the breakers as one JSON string, '["\\n", ":"]' (or without the
        brackets); upstream reads that as the list. A string that is not JSON is one breaker
        (upstream drops it)."""
        if not isinstance(value, str):
            return value
        with contextlib.suppress(ValueError):
            parsed = json.loads(value if value.lstrip().startswith("[") else f"[{value}]")
            if isinstance(parsed, list) and all(isinstance(item, str) for item in parsed):
                return parsed
        return [value]

    @field_validator("banned_tokens", "allowed_tokens", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [int(part) for part in value.split(",") if part.strip()]
        return value

    @field_validator("logprobs", mode="before")
    @classmethod
    def _boolean_logprobs(cls, value: Any) -> Any:
        return int(value) if isinstance(value, bool) else value

    def sampler_values(self) -> dict[str, Any]:
        """The sampler fields this request set (a null counts as not set)."""
        return {name: value for name in SAMPLER_FIELDS if (value := getattr(self, name)) is not None}


SAMPLER_FIELDS: tuple[str, ...] = tuple(SamplerFields.model_fields)

#: The value of each field that leaves sampling as the model's raw distribution.
NEUTRAL: dict[str, Any] = {
    "max_tokens": None, "min_tokens": 0, "stop": [], "banned_strings": [], "banned_tokens": [], "allowed_tokens": [],
    "token_healing": False, "temperature": 1.0, "temperature_last": False, "smoothing_factor": 0.0, "top_k": 0,
    "top_p": 1.0, "top_a": 0.0, "min_p": 0.0, "tfs": 1.0, "typical": 1.0, "skew": 0.0, "xtc_probability": 0.0,
    "xtc_threshold": 0.1, "frequency_penalty": 0.0, "presence_penalty": 0.0, "repetition_penalty": 1.0,
    "penalty_range": -1, "repetition_decay": 0, "dry_multiplier": 0.0, "dry_base": 0.0, "dry_allowed_length": 0,
    "dry_range": 0, "dry_sequence_breakers": [], "mirostat_mode": 0, "mirostat_tau": 1.5, "mirostat_eta": 0.3,
    "max_temp": 1.0, "min_temp": 1.0, "temp_exponent": 1.0, "add_bos_token": None, "ban_eos_token": False,
    "logit_bias": None, "json_schema": None, "regex_pattern": None, "grammar_string": None, "logprobs": 0,
    "top_logprobs": 0, "adaptive_target": 1.0, "adaptive_decay": 0.9, "loop_detect_window": 800, "seed": None,
}
assert set(NEUTRAL) == set(SAMPLER_FIELDS), "every sampler field needs a neutral value"


def checked_values(values: dict[str, Any], source: str) -> dict[str, Any]:
    """Values from a preset or a model card, checked by the same rules as a request's.

    Unknown names and bad values are an ``ApiError`` naming the source, so a broken preset is
    refused when it is selected rather than producing a strange sampler later.
    """
    unknown = sorted(set(values) - set(SAMPLER_FIELDS))
    if unknown:
        raise ApiError(400, f"{source}: unknown sampler fields {', '.join(unknown)}", code="invalid_preset")
    try:
        checked = SamplerFields.model_validate(values)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise ApiError(400, f"{source}: {where}: {first['msg']}", code="invalid_preset") from None
    return {name: getattr(checked, name) for name in values}
