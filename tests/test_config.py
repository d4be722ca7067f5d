"""config.yml, TABBY_* environment and flags: upstream's keys and precedence, our loud failures."""

from __future__ import annotations

import argparse
import logging
import textwrap
from pathlib import Path

import pytest
import yaml
from pydantic import BaseModel

from tabby_fixed.config import (
    SECTIONS,
    ConfigError,
    TabbyConfig,
    _options,
    add_config_arguments,
    load_config,
    load_settings,
    model_overlay,
)

SAMPLE = Path(__file__).resolve().parent.parent / "config_sample.yml"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def config_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger="tabby_fixed.config")
    return caplog


def test_no_config_file_gives_upstream_defaults(tmp_path: Path, config_log: pytest.LogCaptureFixture) -> None:
    config = load_config([], {}, tmp_path)
    assert config == TabbyConfig(config_dir=tmp_path, work_dir=tmp_path)
    assert (config.network.host, config.network.port, config.network.api_servers) == ("127.0.0.1", 5000, ["OAI"])
    assert config.network.max_request_bytes == 32 * 1024 * 1024
    assert config.model.model_dir == "models"
    assert config.model.engine == "auto"
    assert config.model.autosplit_reserve == [96]
    assert config.draft_model.ngram_match_min == 2
    assert config.memory.cuda_malloc_async is True
    assert config.sampling.override_preset is None
    assert config.config_dir == tmp_path
    assert config_log.records == []


FILE = """\
network:
  port: 5001
model:
  model_name: from-file
  gpu_split: [10, 11]
"""
ENV = {"TABBY_NETWORK_PORT": "5002", "TABBY_MODEL_MODEL_NAME": "from-env", "TABBY_MODEL_GPU_SPLIT": "[20, 21]"}
FLAGS = ["--port", "5003", "--model-name", "from-flag", "--gpu-split", "30", "31.5"]


@pytest.mark.parametrize(
    ("env", "flags", "expected"),
    [
        ({}, [], (5001, "from-file", [10, 11])),
        (ENV, [], (5002, "from-env", [20, 21])),
        (ENV, FLAGS, (5003, "from-flag", [30, 31.5])),
        ({}, FLAGS, (5003, "from-flag", [30, 31.5])),
    ],
)
def test_file_then_environment_then_flags(tmp_path: Path, env: dict, flags: list[str], expected: tuple) -> None:
    write(tmp_path / "config.yml", FILE)
    config = load_config(flags, env, tmp_path)
    assert (config.network.port, config.model.model_name, config.model.gpu_split) == expected


def test_blank_keys_and_empty_values_mean_default(tmp_path: Path) -> None:
    write(tmp_path / "config.yml", """\
        network:
          port:
          host:
        model:
        draft_model:
          draft_mode:
        """)
    config = load_config(["--model-name", ""], {"TABBY_NETWORK_HOST": ""}, tmp_path)
    assert config == TabbyConfig(config_dir=tmp_path, work_dir=tmp_path)


def test_empty_config_file_is_all_defaults(tmp_path: Path) -> None:
    write(tmp_path / "config.yml", "# nothing set\n")
    assert load_config([], {}, tmp_path) == TabbyConfig(config_dir=tmp_path, work_dir=tmp_path)


def test_config_flag_file_over_environment_over_config_yml_and_flags_on_top(tmp_path: Path) -> None:
    # Upstream: ./config.yml < environment < the --config file; here other flags still apply on top.
    write(tmp_path / "config.yml", "network:\n  port: 6000\n  api_servers: [OAI, Kobold]\nmodel:\n  model_name: a\n")
    other = write(tmp_path / "etc" / "mine.yml", "network:\n  port: 6001\n  host: 0.0.0.0\n")
    env = {"TABBY_NETWORK_HOST": "10.0.0.1", "TABBY_MODEL_MODEL_NAME": "b"}
    config = load_config(["--config", "etc/mine.yml", "--disable-auth"], env, tmp_path)
    assert (config.network.host, config.network.port, config.network.disable_auth) == ("0.0.0.0", 6001, True)
    assert (config.network.api_servers, config.model.model_name) == (["OAI", "KOBOLD"], "b")
    assert config.config_dir == other.parent
    assert load_config(["--config", "etc/mine.yml", "--port", "6002"], env, tmp_path).network.port == 6002


def test_legacy_keys_are_read_as_their_new_names(tmp_path: Path, config_log: pytest.LogCaptureFixture) -> None:
    write(tmp_path / "config.yml", """\
        logging:
          prompt: true
          generation_params: true
        model:
          model_name: big
          draft:
            draft_model_name: small
            draft_cache_mode: Q4
          lora:
            loras: [{name: style, scaling: 0.5}]
        """)
    config = load_config([], {}, tmp_path)
    assert config.logging.log_prompt and config.logging.log_generation_params
    assert (config.draft_model.draft_model_name, config.draft_model.draft_cache_mode) == ("small", "Q4")
    assert config.lora.loras is not None and config.lora.loras[0].name == "style"
    assert config.model.model_name == "big"
    [record] = config_log.records
    assert "legacy config keys" in record.message and "model.draft -> draft_model" in record.message
    assert "logging.prompt -> logging.log_prompt" in record.message
    assert "unknown" not in record.message


def test_negative_reasoning_budget_is_accepted_as_no_cap(tmp_path: Path) -> None:
    write(tmp_path / "config.yml", "model:\n  reasoning_budget_tokens: -1\n")
    assert load_config([], {}, tmp_path).model.reasoning_budget_tokens == -1


def test_missing_config_flag_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"--config.*nope\.yml"):
        load_config(["--config", "nope.yml"], {}, tmp_path)


def test_booleans_and_mappings_from_every_source(tmp_path: Path) -> None:
    write(tmp_path / "config.yml", "model:\n  template_vars_default: {a: 1, b: 2}\n")
    env = {"TABBY_MODEL_TEMPLATE_VARS_DEFAULT": '{"b": 3}', "TABBY_NETWORK_DISABLE_AUTH": "true"}
    config = load_config(["--template-vars-default", "{c: 4}", "--vision", "--reasoning", "false"], env, tmp_path)
    assert config.model.template_vars_default == {"a": 1, "b": 3, "c": 4}  # deep merge
    assert (config.network.disable_auth, config.model.vision, config.model.reasoning) == (True, True, False)


def test_list_of_mappings_flag(tmp_path: Path) -> None:
    config = load_config(["--loras", "{name: a}", "{name: b, scaling: 0.5}"], {}, tmp_path)
    assert [(lora.name, lora.scaling) for lora in config.lora.loras or []] == [("a", 1.0), ("b", 0.5)]


def test_unknown_keys_give_one_warning_naming_them(tmp_path: Path, config_log: pytest.LogCaptureFixture) -> None:
    write(tmp_path / "config.yml", """\
        network:
          port: 5001
          prot: 5002
        model:
          foo: 1
          use_as_default: [max_seq_len, no_such_key]
        bar:
          baz: 1
        """)
    env = {"TABBY_MODEL_FOO_BAR": "1", "TABBY_LOG_LEVEL": "DEBUG", "TABBY_NETWORK_HOST": "::1"}
    config = load_config([], env, tmp_path)
    assert (config.network.port, config.network.host) == (5001, "::1")
    assert len(config_log.records) == 1
    message = config_log.records[0].getMessage()
    assert "\n" not in message
    for name in ("network.prot", "model.foo", "bar", "TABBY_MODEL_FOO_BAR", "'no_such_key'", str(tmp_path)):
        assert name in message
    assert "TABBY_LOG_LEVEL" not in message and "max_seq_len" not in message


@pytest.mark.parametrize(
    ("file", "env", "flags", "expected"),
    [
        ("network:\n  port: abc\n", {}, [], r"network\.port = 'abc' \(from .*config\.yml\)"),
        ("", {"TABBY_NETWORK_PORT": "abc"}, [], r"network\.port = 'abc' \(from env TABBY_NETWORK_PORT\)"),
        ("", {}, ["--port", "70000"], r"network\.port = '70000' \(from flag --port\): .*65535"),
        ("model:\n  cache_size: 1000\n", {}, [], r"model\.cache_size .*multiple of 256"),
        ("", {"TABBY_MODEL_ENGINE": "vllm"}, [], r"model\.engine = 'vllm' \(from env TABBY_MODEL_ENGINE\)"),
        ("", {"TABBY_MODEL_GPU_SPLIT": "[1, x"}, [], r"env TABBY_MODEL_GPU_SPLIT: .* not a valid YAML"),
        ("model:\n  cache_mode: Q5\n", {}, [], r"model\.cache_mode .*FP16"),
        ("network:\n  api_servers: [oai, grpc]\n", {}, [], r"network\.api_servers .*grpc"),
        ("network: 5\n", {}, [], r"section network must hold keys"),
        ("", {}, ["--prot", "5"], r"command line: .*--prot"),
    ],
)
def test_invalid_values_name_key_and_source(
    tmp_path: Path, file: str, env: dict, flags: list[str], expected: str
) -> None:
    write(tmp_path / "config.yml", file)
    with pytest.raises(ConfigError, match=expected) as caught:
        load_config(flags, env, tmp_path)
    assert "pydantic" not in str(caught.value)


def test_broken_yaml_names_file_and_line(tmp_path: Path) -> None:
    path = write(tmp_path / "config.yml", "network:\n  port: 5000\n  host: [oops\n")
    with pytest.raises(ConfigError, match=rf"{path}: invalid YAML at line \d+"):
        load_config([], {}, tmp_path)


def test_valid_values_are_normalised(tmp_path: Path) -> None:
    write(tmp_path / "config.yml", "network:\n  api_servers: [oai, Kobold]\nmodel:\n  cache_mode: ' 8, 6'\n")
    config = load_config([], {}, tmp_path)
    assert config.network.api_servers == ["OAI", "KOBOLD"]
    assert config.model.cache_mode == "8,6"


def test_sample_config_is_valid_and_quiet(tmp_path: Path, config_log: pytest.LogCaptureFixture) -> None:
    config = load_config(["--config", str(SAMPLE)], {}, tmp_path)
    assert config_log.records == []
    assert config.model.model_dir == "models" and config.model.engine == "auto"
    places = {"config_dir", "work_dir"}
    assert config.model_dump(exclude=places) == TabbyConfig().model_dump(exclude=places)


def test_sample_config_lists_every_key() -> None:
    sample = yaml.safe_load(SAMPLE.read_text(encoding="utf-8"))
    assert list(sample) == list(SECTIONS)
    for section, model in SECTIONS.items():
        assert list(sample[section]) == list(model.model_fields), section


def test_flags_are_unique_and_prefixed_only_on_collision() -> None:
    class First(BaseModel):
        shared_key: int = 0
        only_first: int = 0

    class Second(BaseModel):
        shared_key: int = 0

    flags = [option.flag for option in _options({"first": First, "second": Second})]
    assert flags == ["--first-shared-key", "--only-first", "--second-shared-key"]
    # No key name is shared today, so every flag is upstream's plain --<key>.
    assert all(option.flag == "--" + option.key.replace("_", "-") for option in _options(SECTIONS))


def test_add_config_arguments_documents_every_flag() -> None:
    parser = argparse.ArgumentParser(prog="tabby-fixed serve")
    add_config_arguments(parser)
    text = parser.format_help()
    for flag in ("--config", "--port", "--gpu-split", "--engine", "--override-preset", "--max-request-bytes"):
        assert flag in text
    assert "(default: 5000)" in text


def test_relative_paths_are_read_from_the_working_directory_as_upstream(tmp_path: Path) -> None:
    write(tmp_path / "conf" / "config.yml", "model:\n  model_dir: weights\n")
    config = load_config(["--config", "conf/config.yml"], {}, tmp_path)
    assert config.resolve(config.model.model_dir) == tmp_path / "weights"  # neither exists: upstream's place
    (tmp_path / "conf" / "weights").mkdir()
    assert config.resolve(config.model.model_dir) == tmp_path / "conf" / "weights"  # only beside the config
    (tmp_path / "weights").mkdir()
    assert config.resolve(config.model.model_dir) == tmp_path / "weights"  # both: upstream's wins
    assert config.resolve("/abs/models") == Path("/abs/models")
    assert config.resolve("~/models") == Path.home() / "models"
    assert load_config([], {}, tmp_path).resolve("models") == tmp_path / "models"


# ---- per-model settings ----------------------------------------------------------------------------------------------


OVERLAY = """\
model:
  tool_format: qwen3_coder
  max_seq_len:
  unknown_thing: 1
draft_model:
  draft_mode: ngram
"""


def test_overlay_missing_or_blank(tmp_path: Path, config_log: pytest.LogCaptureFixture) -> None:
    assert model_overlay(tmp_path) == {}
    write(tmp_path / "tabby_config.yml", OVERLAY)
    assert model_overlay(tmp_path) == {"model": {"tool_format": "qwen3_coder"}, "draft_model": {"draft_mode": "ngram"}}
    assert len(config_log.records) == 1 and "model.unknown_thing" in config_log.records[0].getMessage()


@pytest.fixture
def server_config(tmp_path: Path) -> TabbyConfig:
    write(tmp_path / "config.yml", """\
        model:
          model_name: startup
          max_seq_len: 16384
          cache_mode: Q8
          tool_format: hermes
          use_as_default: [max_seq_len, draft_num_tokens]
        draft_model:
          draft_num_tokens: 3
          draft_cache_mode: Q4
        """)
    return load_config([], {}, tmp_path)


def test_startup_load_takes_config_then_overlay(tmp_path: Path, server_config: TabbyConfig) -> None:
    folder = tmp_path / "models" / "startup"
    write(folder / "tabby_config.yml", OVERLAY)
    model, draft = load_settings(server_config, folder)
    assert (model.model_name, model.max_seq_len, model.cache_mode) == ("startup", 16384, "Q8")
    assert model.tool_format == "qwen3_coder"  # the folder wins
    assert (draft.draft_mode, draft.draft_num_tokens, draft.draft_cache_mode) == ("ngram", 3, "Q4")


def test_api_load_takes_use_as_default_then_request_then_overlay(tmp_path: Path, server_config: TabbyConfig) -> None:
    folder = tmp_path / "models" / "other"
    write(folder / "tabby_config.yml", OVERLAY)
    request = {"model_name": "other", "cache_size": 8192, "max_seq_len": None, "skip_queue": True,
               "draft_model": {"draft_model_name": "small", "draft_rope_alpha": None}}
    model, draft = load_settings(server_config, folder, request)
    assert (model.model_name, model.cache_size) == ("other", 8192)
    assert model.max_seq_len == 16384  # use_as_default; the request's None does not clear it
    assert model.cache_mode == "FP16"  # not in use_as_default
    assert model.tool_format == "qwen3_coder"
    assert (draft.draft_model_name, draft.draft_num_tokens, draft.draft_cache_mode) == ("small", 3, "FP16")
    assert draft.draft_mode == "ngram"


def test_api_load_without_overlay_or_defaults(tmp_path: Path) -> None:
    model, draft = load_settings(TabbyConfig(config_dir=tmp_path), tmp_path, {"model_name": "m", "max_seq_len": 4096})
    assert (model.model_name, model.max_seq_len, draft.draft_mode) == ("m", 4096, "model")


def test_bad_load_values_name_their_source(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"model\.cache_size = 100 \(from load request\)"):
        load_settings(TabbyConfig(config_dir=tmp_path), tmp_path, {"model_name": "m", "cache_size": 100})
    write(tmp_path / "tabby_config.yml", "draft_model:\n  draft_mode: sometimes\n")
    with pytest.raises(ConfigError, match=r"draft_model\.draft_mode = 'sometimes' \(from .*tabby_config\.yml\)"):
        load_settings(TabbyConfig(config_dir=tmp_path), tmp_path)
