"""Pick and open the engine for a model folder.

``model.engine: auto`` takes the scripted engine for a folder with ``scripted.yml`` and
ExLlamaV3 otherwise. The ExLlamaV3 engine is not part of this build yet, so a real model folder
gets an error that says so instead of a silent fallback.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .base import Engine
from .scripted import ScriptedEngine


class EngineUnavailable(RuntimeError):
    """The model folder needs an engine this machine or build cannot run."""


def engine_kind(folder: Path, requested: str) -> str:
    if requested != "auto":
        return requested
    return "scripted" if (folder / "scripted.yml").is_file() else "exllamav3"


def open_engine(folder: Path, requested: str, *, max_seq_len: int | None = None, prompt_template: str | None = None,
                templates_dir: Path | None = None, progress: Callable[[int, int], None] | None = None) -> Engine:
    """The engine for a model folder, loaded; ``progress(module, modules)`` reports each module loaded."""
    if not folder.is_dir():
        raise EngineUnavailable(f"model folder {folder} does not exist")
    kind = engine_kind(folder, requested)
    if kind == "scripted":
        engine = ScriptedEngine(folder, max_seq_len=max_seq_len, prompt_template=prompt_template,
                                templates_dir=templates_dir)
        if progress:
            progress(1, 1)
        return engine
    raise EngineUnavailable(f"{folder.name} needs the {kind} engine, which this build does not include yet; "
                            f"serve a scripted model (a folder with scripted.yml) or set model.engine: scripted")
