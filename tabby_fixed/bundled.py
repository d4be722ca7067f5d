"""Files the package carries as package data, found next to this module wherever it is installed.

The checkout's top-level ``sampler_overrides/`` and ``examples/`` are links to these folders, so
users find them where upstream TabbyAPI keeps them, and the wheel carries the same files.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
#: The shipped sampler presets, searched after the config folder's and the working directory's.
PRESETS_DIR = PACKAGE_DIR / "sampler_overrides"
#: The model folder ``tabby-fixed serve --demo`` serves: one scripted model, ``demo``.
DEMO_MODELS_DIR = PACKAGE_DIR / "examples" / "models"
DEMO_MODEL = "demo"
