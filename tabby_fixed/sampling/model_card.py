"""The sampler values a model was published with, from its ``generation_config.json``.

vLLM and SGLang apply these by default; TabbyAPI did not, so agents that send no sampler
fields (OpenCode) got the server's preset instead of the model card's values.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from ..errors import ApiError
from .fields import checked_values

logger = logging.getLogger(__name__)

CARD_FIELDS = ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty",
               "frequency_penalty")


def read_model_card(folder: Path) -> dict[str, Any]:
    """The card's sampler values; a missing or broken file gives none (and a warning), never a failed load."""
    path = folder / "generation_config.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        logger.warning("%s is unreadable, its sampler values are not used: %s", path, error)
        return {}
    found = {key: data[key] for key in CARD_FIELDS if isinstance(data, dict) and data.get(key) is not None}
    try:
        return checked_values(found, str(path))
    except ApiError as error:
        logger.warning("sampler values of the model card are not used: %s", error.message)
        return {}
