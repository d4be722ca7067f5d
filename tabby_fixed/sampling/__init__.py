"""Sampling: request fields, override presets, model-card defaults, and the effective sampler."""

from .effective import EffectiveSampler, resolve
from .fields import NEUTRAL, SAMPLER_FIELDS, SamplerFields
from .model_card import read_model_card
from .presets import Override, Preset, list_presets, load_preset, parse_overrides, preset_dirs

__all__ = [
    "NEUTRAL",
    "SAMPLER_FIELDS",
    "EffectiveSampler",
    "Override",
    "Preset",
    "SamplerFields",
    "list_presets",
    "load_preset",
    "parse_overrides",
    "preset_dirs",
    "read_model_card",
    "resolve",
]
