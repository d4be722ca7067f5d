"""``tabby-fixed export-openapi`` and ``tabby-fixed export-config``: upstream's two export commands.

The OpenAPI document is the one the app itself serves at ``/openapi.json``, built for the chosen
API families without starting a server. The config is every section and key with its default
and its description, generated from the settings models so it can never miss a key.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from .config import SECTIONS, NetworkConfig, TabbyConfig


def openapi_document(api_servers: list[str]) -> dict[str, Any]:
    from .server.app import create_app

    network = NetworkConfig(api_servers=api_servers, disable_auth=True)  # no api_tokens.yml is written
    return create_app(TabbyConfig(network=network)).openapi()


def _value(value: Any) -> str:
    """A default as YAML: JSON is YAML, and unlike ``yaml.dump`` of a scalar it adds no ``...``."""
    if value is None:
        return ""
    if isinstance(value, BaseModel):
        value = value.model_dump()
    return " " + json.dumps(value)


def sample_config() -> str:
    """Every key with its default (blank: none), under a comment holding its description."""
    defaults = TabbyConfig()
    lines = ["# tabby-fixed settings with their defaults (tabby-fixed export-config). A blank value",
             "# means the default; see config_sample.yml and the README for more on each key.", ""]
    for section, model in SECTIONS.items():
        lines.append(f"{section}:")
        values = getattr(defaults, section)
        for key, field in model.model_fields.items():
            if field.description:
                lines.append(f"  # {field.description}")
            lines.append(f"  {key}:{_value(getattr(values, key))}")
            lines.append("")
    return "\n".join(lines)
