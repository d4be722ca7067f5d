"""Sampler override presets: ``sampler_overrides/<name>.yml`` in TabbyAPI's format.

Each key is a sampler field; its value is ``{override: VALUE, force: BOOL, additive: BOOL}``.
A forced value beats the request, falsy ones included (upstream skips forcing 0, false, [] and
null, so "force top_k: 0" did nothing). A non-forced value is a default the request may replace;
``additive`` (lists only, not forced) puts the preset's items before the request's.
A preset file's bad entry is skipped with a warning and the rest apply (as upstream); an inline
``overrides`` object sent to the switch route is refused whole, so its sender hears why.
Presets are looked up next to the config file first, then in the working directory (upstream
looks only in the working directory), then among the presets the package ships, so a shipped
name such as ``safe_defaults`` works from any folder and from an installed wheel.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..bundled import PRESETS_DIR
from ..errors import ApiError, not_found
from ..names import plain_name
from .fields import checked_values

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Override:
    value: Any
    force: bool = False
    additive: bool = False


@dataclass(frozen=True)
class Preset:
    name: str | None  # None: overrides sent inline to the switch route
    overrides: Mapping[str, Override]


def parse_overrides(data: Any, source: str, *, skip_bad: bool = False) -> dict[str, Override]:
    """Overrides from a preset document (or an inline ``overrides`` object), checked field by field.

    A bad entry (unknown field, wrong value, no ``override``) is an ``ApiError``; with ``skip_bad``
    (preset files, as upstream) it is left out with a warning and the rest still apply, so one
    typo does not cost every forced value.
    """
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ApiError(400, f"{source}: expected a mapping of sampler fields", code="invalid_preset")
    entries: dict[str, Override] = {}
    for key, entry in data.items():
        try:
            entries[str(key)] = _override(str(key), entry, source)
        except ApiError as error:
            if not skip_bad:
                raise
            logger.warning("%s; the preset's other fields still apply", error.message)
    return entries


def _override(key: str, entry: Any, source: str) -> Override:
    if not isinstance(entry, Mapping) or "override" not in entry:
        raise ApiError(400, f"{source}: {key} needs an 'override' value (and optional force, additive)",
                       code="invalid_preset")
    force, additive = entry.get("force", False), entry.get("additive", False)
    if not isinstance(force, bool) or not isinstance(additive, bool):
        raise ApiError(400, f"{source}: {key}: force and additive are true or false", code="invalid_preset")
    return Override(checked_values({key: entry["override"]}, source)[key], force, additive)


def preset_dirs(config_dir: Path, cwd: Path | None = None) -> list[Path]:
    dirs = [config_dir / "sampler_overrides", (cwd or Path.cwd()) / "sampler_overrides", PRESETS_DIR]
    return list(dict.fromkeys(d.resolve() for d in dirs))


def list_presets(dirs: Iterable[Path]) -> list[str]:
    return sorted({p.stem for d in dirs if d.is_dir() for p in d.glob("*.yml")})


def load_preset(name: str, dirs: Iterable[Path]) -> Preset:
    plain_name(name, "preset")
    searched = list(dirs)
    for folder in searched:
        path = folder / f"{name}.yml"
        if path.is_file():
            try:
                data = yaml.safe_load(path.read_text(encoding="utf-8"))
            except (OSError, yaml.YAMLError) as error:
                raise ApiError(400, f"{path}: {error}", code="invalid_preset") from error
            return Preset(name, parse_overrides(data, str(path), skip_bad=True))
    raise not_found(f"No sampler preset '{name}': looked for {name}.yml in "
                    f"{', '.join(str(d) for d in searched)}.", param="preset")
