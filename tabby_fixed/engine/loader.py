"""Pick and open the engine for a model folder.

``model.engine: auto`` takes the scripted engine for a folder with ``scripted.yml``, ExLlamaV3
otherwise; a real model on a machine that cannot run ExLlamaV3 gets an error that says so,
never a silent fallback to something else.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from ..config import DraftModelConfig, MemoryConfig, ModelConfig
from . import exllamav3
from .base import Engine, EngineUnavailable
from .scripted import ScriptedEngine, folder_context


def engine_kind(folder: Path, requested: str) -> str:
    if requested != "auto":
        return requested
    return "scripted" if (folder / "scripted.yml").is_file() else "exllamav3"


def open_engine(folder: Path, settings: ModelConfig, draft: DraftModelConfig, memory: MemoryConfig, *,
                templates_dir: Path | None = None, progress: Callable[[int, int], None] | None = None) -> Engine:
    """The engine for a model folder, loaded; ``progress(module, modules)`` reports each module loaded."""
    if not folder.is_dir():
        raise EngineUnavailable(f"model folder {folder} does not exist")
    kind = engine_kind(folder, settings.engine)
    if kind == "scripted":
        engine = ScriptedEngine(folder, max_seq_len=settings.max_seq_len, prompt_template=settings.prompt_template,
                                templates_dir=templates_dir, vision=settings.vision)
        if progress:
            progress(1, 1)
        return engine
    if not exllamav3.runnable():
        raise EngineUnavailable(f"{folder.name} needs the ExLlamaV3 engine, which needs the exllamav3 package and a "
                                f"CUDA GPU; neither is usable here. Serve a scripted model (a folder with "
                                f"scripted.yml) to try the server without a GPU.")
    return exllamav3.ExLlamaV3Engine(folder, settings, draft, memory, templates_dir=templates_dir, progress=progress)


def context_length(folder: Path, settings: ModelConfig) -> int | None:
    """The context a load of ``folder`` with ``settings`` would have, read from its files without
    loading it (for listing models that are not loaded); None when the folder does not say."""
    if engine_kind(folder, settings.engine) == "scripted":
        return folder_context(folder, settings.max_seq_len)
    try:
        card = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    model_max = card.get("max_position_embeddings") or (card.get("text_config") or {}).get("max_position_embeddings")
    return exllamav3.context_sizes(settings, int(model_max))[0] if model_max else None
