"""The sampler one request runs with, and which layer set each field.

From highest to lowest priority:

====================  ======================================================================
forced                a preset value with ``force: true`` (falsy values too)
request               what the request sent
preset                a preset value without ``force`` (``additive`` lists join the request's)
card                  the model's ``generation_config.json`` (``sampling.model_card_defaults``)
default               the neutral value, which changes nothing
====================  ======================================================================

The preset is read once per request, so switching presets mid-flight never mixes two presets
in one request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from .fields import NEUTRAL
from .presets import Preset

Layer = Literal["forced", "request", "preset", "card", "default"]
LAYERS: tuple[Layer, ...] = ("forced", "request", "preset", "card", "default")


@dataclass(frozen=True)
class EffectiveSampler:
    values: Mapping[str, Any]
    sources: Mapping[str, Layer]

    def summary(self) -> str:
        """``forced=top_k:20; request=max_tokens:100,stop; card=temperature:0.7``: every field not
        left at its neutral value, by layer, with scalar values (the ``x-sampler-source`` header)."""
        groups = []
        for layer in LAYERS[:-1]:
            fields = [name if isinstance(value := self.values[name], (list, dict, str)) or value is None
                      else f"{name}:{str(value).lower() if isinstance(value, bool) else value}"
                      for name, source in self.sources.items() if source == layer]
            if fields:
                groups.append(f"{layer}={','.join(fields)}")
        return "; ".join(groups) or "default"

    def set_by(self, *layers: Layer) -> list[str]:
        return [name for name, source in self.sources.items() if source in layers]


def resolve(request: Mapping[str, Any], preset: Preset | None, card: Mapping[str, Any]) -> EffectiveSampler:
    values: dict[str, Any] = dict(NEUTRAL)
    sources: dict[str, Layer] = dict.fromkeys(NEUTRAL, "default")

    def put(name: str, value: Any, layer: Layer) -> None:
        values[name] = value
        sources[name] = layer

    for name, value in card.items():
        put(name, value, "card")
    overrides = preset.overrides if preset else {}
    for name, override in overrides.items():
        if not override.force:
            put(name, override.value, "preset")
    for name, value in request.items():
        layered = overrides.get(name)
        if layered and layered.additive and not layered.force and isinstance(layered.value, list) \
                and isinstance(value, list):
            value = layered.value + value
        put(name, value, "request")
    for name, override in overrides.items():
        if override.force:
            put(name, override.value, "forced")
    return EffectiveSampler(values, sources)
