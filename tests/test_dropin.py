"""Drop-in conformance: upstream TabbyAPI's own config_sample.yml, key by key.

Every key must be accepted, have upstream's default, and either be read by the server (its
effect) or be named in the start-up warning when its value asks for what this build cannot do.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tabby_fixed.config import SECTIONS, TabbyConfig, load_config
from tabby_fixed.unsupported import UNSUPPORTED, unsupported_settings, warn_unsupported

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM_SAMPLE = Path(__file__).resolve().parent / "fixtures" / "upstream_config_sample.yml"
UPSTREAM = yaml.safe_load(UPSTREAM_SAMPLE.read_text(encoding="utf-8"))
UPSTREAM_KEYS = [(section, key) for section, block in UPSTREAM.items() for key in block]

#: Keys whose upstream effect needs nothing here, and why.
INERT = {
    ("network", "disable_fetch_requests"): "this build never fetches URLs, so refusing to is always true",
    ("embeddings", "embedding_model_dir"): "read only with embedding_model_name, which the warning names",
    ("embeddings", "embeddings_device"): "read only with embedding_model_name, which the warning names",
    ("developer", "seqlog_server_url"): "read only with seqlog, which the warning names",
    ("developer", "seqlog_api_key"): "read only with seqlog, which the warning names",
}
#: Keys whose effect lives in config.py itself.
READ_BY_CONFIG = {("model", "use_as_default"): "load_settings takes these keys from the config for API loads"}

#: A value for each unsupported key that asks for the missing feature.
ASKING = {"api_servers": ["OAI", "Kobold"], "vision": True, "rope_scale": 2.0, "rope_alpha": 2.5,
          "draft_rope_scale": 2.0, "draft_rope_alpha": 2.5,
          "lora_dir": "adapters", "loras": [{"name": "style"}],
          "embedding_model_name": "bge", "seqlog": True, "unsafe_launch": True}


def source_text() -> str:
    skip = {"config.py", "unsupported.py"}
    return "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "tabby_fixed").rglob("*.py") if p.name not in skip)


def test_every_upstream_key_is_accepted_quietly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert len(UPSTREAM_KEYS) == 71  # + force_enable_thinking, which upstream's sample leaves out: 72
    for section, key in [*UPSTREAM_KEYS, ("model", "force_enable_thinking")]:
        assert key in SECTIONS[section].model_fields, f"{section}.{key}"
    with caplog.at_level(logging.WARNING):
        config = load_config(["--config", str(UPSTREAM_SAMPLE)], {}, tmp_path)
        warn_unsupported(config)
    assert caplog.records == []


def test_upstream_sample_values_are_our_defaults(tmp_path: Path) -> None:
    config = load_config(["--config", str(UPSTREAM_SAMPLE)], {}, tmp_path)
    ours = TabbyConfig().model_dump()
    for section, key in UPSTREAM_KEYS:
        value = getattr(getattr(config, section), key)
        if (section, key) == ("sampling", "override_preset"):
            # Upstream's sample picks safe_defaults (its code default is none, as ours); we ship it.
            assert value == "safe_defaults" and (ROOT / "sampler_overrides" / "safe_defaults.yml").is_file()
            continue
        assert (value.model_dump() if hasattr(value, "model_dump") else value) == ours[section][key], f"{section}.{key}"


@pytest.mark.parametrize(("section", "key"), UPSTREAM_KEYS, ids=[f"{s}.{k}" for s, k in UPSTREAM_KEYS])
def test_every_key_has_an_effect_or_a_warning(section: str, key: str) -> None:
    unsupported = {(entry.section, entry.key) for entry in UNSUPPORTED}
    if (section, key) in unsupported:
        asking = TabbyConfig.model_validate({section: {key: ASKING[key]}})
        assert any(line.startswith(f"{section}.{key} (") for line in unsupported_settings(asking))
        assert unsupported_settings(TabbyConfig()) == []  # the defaults ask for nothing
    elif (section, key) not in INERT | READ_BY_CONFIG.keys():
        assert re.search(rf"\b{key}\b", source_text()), f"{section}.{key} is accepted but never read"


def test_the_warning_is_one_line_naming_each_setting_and_why(caplog: pytest.LogCaptureFixture) -> None:
    config = TabbyConfig.model_validate({"developer": {"seqlog": True}, "model": {"rope_alpha": 2.0},
                                         "lora": {"loras": [{"name": "x"}]}})
    with caplog.at_level(logging.WARNING, logger="tabby_fixed.unsupported"):
        warn_unsupported(config)
    [record] = caplog.records
    assert record.message.startswith("settings accepted but not honoured by this build: ")
    for name in ("developer.seqlog (logs go", "model.rope_alpha (ExLlamaV3 reads RoPE", "lora.loras (ExLlamaV3 cannot"):
        assert name in record.message


def test_our_sample_names_every_upstream_key_in_upstream_order() -> None:
    ours: dict[str, Any] = yaml.safe_load((ROOT / "config_sample.yml").read_text(encoding="utf-8"))
    for section, block in UPSTREAM.items():
        keys = [key for key in ours[section] if key in block]
        assert keys == list(block), section


def test_the_readme_table_marks_every_upstream_key_and_counts_them() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Swapping from TabbyAPI"):]
    section = section[:section.index("\n## ", 1)]
    marks = dict(re.findall(r"^\| `([a-z_]+\.[a-z_]+)` \| (same|better|not supported) \|", section, re.M))
    assert set(marks) == {f"{s}.{k}" for s, k in UPSTREAM_KEYS} | {"model.force_enable_thinking"}
    counted = {mark: list(marks.values()).count(mark) for mark in ("same", "better", "not supported")}
    assert f"**Config keys** (72: {counted['same']} same, {counted['better']} better, " \
           f"{counted['not supported']} not supported)" in section
    unsupported = {f"{entry.section}.{entry.key}" for entry in UNSUPPORTED}
    # the inert keys, read only with a key that is warned
    assert {key for key, mark in marks.items() if mark == "not supported"} - unsupported <= {
        "developer.seqlog_server_url", "developer.seqlog_api_key"}
