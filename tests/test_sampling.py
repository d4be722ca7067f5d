"""The effective sampler: every pair of layers in priority order, forced falsy values, additive
lists, model-card defaults, preset files and where they are found."""

from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path

import pytest
import yaml

from tabby_fixed.errors import ApiError
from tabby_fixed.sampling import (
    NEUTRAL,
    Override,
    Preset,
    SamplerFields,
    load_preset,
    parse_overrides,
    preset_dirs,
    read_model_card,
    resolve,
)

REPO = Path(__file__).resolve().parents[1]

# One value per layer for temperature; a layer "absent" means it does not set it.
LAYER_VALUES = {"forced": 0.1, "request": 0.2, "preset": 0.3, "card": 0.4}


def sampler_with(layers: set[str]):
    overrides = {}
    if "forced" in layers:
        overrides["temperature"] = Override(LAYER_VALUES["forced"], force=True)
    elif "preset" in layers:
        overrides["temperature"] = Override(LAYER_VALUES["preset"])
    request = {"temperature": LAYER_VALUES["request"]} if "request" in layers else {}
    card = {"temperature": LAYER_VALUES["card"]} if "card" in layers else {}
    return resolve(request, Preset("p", overrides) if overrides else None, card)


@pytest.mark.parametrize(("higher", "lower"), [p for p in itertools.combinations(
    ["forced", "request", "preset", "card", "default"], 2) if "forced" not in p or "preset" not in p])
def test_each_layer_beats_every_lower_one(higher, lower):
    effective = sampler_with({higher, lower} - {"default"})
    assert effective.sources["temperature"] == higher
    assert effective.values["temperature"] == LAYER_VALUES.get(higher, NEUTRAL["temperature"])


def test_forced_beats_a_non_forced_value_of_another_preset_field():
    preset = Preset("p", {"top_k": Override(40), "temperature": Override(0.5, force=True)})
    effective = resolve({"temperature": 0.0, "top_k": 5}, preset, {})
    assert (effective.values["temperature"], effective.sources["temperature"]) == (0.5, "forced")
    assert (effective.values["top_k"], effective.sources["top_k"]) == (5, "request")


@pytest.mark.parametrize(("field", "falsy"), [("top_k", 0), ("temperature", 0.0), ("token_healing", False),
                                              ("stop", []), ("max_tokens", None)])
def test_falsy_forced_values_are_applied(field, falsy):
    effective = resolve({field: NEUTRAL[field] or 7 if field != "stop" else ["x"]},
                        Preset("p", {field: Override(falsy, force=True)}), {})
    assert effective.values[field] == falsy and effective.sources[field] == "forced"


def test_additive_lists_put_the_preset_first():
    preset = Preset("p", {"stop": Override(["<|im_end|>"], additive=True)})
    assert resolve({"stop": ["END"]}, preset, {}).values["stop"] == ["<|im_end|>", "END"]
    assert resolve({}, preset, {}).values["stop"] == ["<|im_end|>"]
    forced = Preset("p", {"stop": Override(["<|im_end|>"], force=True, additive=True)})
    assert resolve({"stop": ["END"]}, forced, {}).values["stop"] == ["<|im_end|>"]


def test_model_card_is_used_when_the_request_is_silent_and_ignored_when_explicit(tmp_path):
    (tmp_path / "generation_config.json").write_text(json.dumps(
        {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05, "do_sample": True,
         "eos_token_id": [1, 2]}))
    card = read_model_card(tmp_path)
    assert card == {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "repetition_penalty": 1.05}
    silent = resolve({}, None, card)
    assert silent.values["top_k"] == 20 and silent.sources["top_k"] == "card"
    explicit = resolve({"temperature": 0.0}, None, card)
    assert explicit.values["temperature"] == 0.0 and explicit.sources["temperature"] == "request"
    assert explicit.summary() == "request=temperature:0.0; card=top_k:20,top_p:0.8,repetition_penalty:1.05"


@pytest.mark.parametrize("content", ["{not json", '{"temperature": "hot"}', "[1]"])
def test_a_broken_model_card_is_ignored_not_fatal(tmp_path, content):
    (tmp_path / "generation_config.json").write_text(content)
    assert read_model_card(tmp_path) == {}


def test_request_fields_aliases_and_openai_ranges():
    fields = SamplerFields.model_validate({"max_completion_tokens": 5, "rep_pen": 1.1, "stop_sequence": "x",
                                          "presence_penalty": -1.0, "custom_token_bans": "1, 2", "logprobs": True})
    assert fields.sampler_values() == {"max_tokens": 5, "repetition_penalty": 1.1, "stop": ["x"],
                                       "presence_penalty": -1.0, "banned_tokens": [1, 2], "logprobs": 1}
    with pytest.raises(ValueError):
        SamplerFields.model_validate({"frequency_penalty": -3})


def write_preset(folder: Path, name: str, data: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.yml").write_text(yaml.safe_dump(data))


def test_presets_are_found_next_to_the_config_first_then_in_the_working_directory(tmp_path):
    config_dir, cwd = tmp_path / "etc", tmp_path / "work"
    write_preset(config_dir / "sampler_overrides", "mine", {"top_k": {"override": 1}})
    write_preset(cwd / "sampler_overrides", "mine", {"top_k": {"override": 2}})
    write_preset(cwd / "sampler_overrides", "theirs", {"top_k": {"override": 3}})
    dirs = preset_dirs(config_dir, cwd)
    assert load_preset("mine", dirs).overrides["top_k"].value == 1
    assert load_preset("theirs", dirs).overrides["top_k"].value == 3
    with pytest.raises(ApiError) as missing:
        load_preset("absent", dirs)
    assert missing.value.status == 404 and str(config_dir) in missing.value.message


def test_shipped_presets_are_found_from_any_folder_after_the_users_own(tmp_path):
    config_dir, cwd = tmp_path / "etc", tmp_path / "work"
    dirs = preset_dirs(config_dir, cwd)
    assert load_preset("safe_defaults", dirs).name == "safe_defaults"
    write_preset(cwd / "sampler_overrides", "safe_defaults", {"top_k": {"override": 7}})
    assert load_preset("safe_defaults", dirs).overrides["top_k"].value == 7


@pytest.mark.parametrize("name", ["../secret", "/etc/passwd", "a/b", ""])
def test_preset_names_cannot_leave_the_folder(tmp_path, name):
    with pytest.raises(ApiError) as error:
        load_preset(name, [tmp_path])
    assert error.value.status == 400


@pytest.mark.parametrize(("data", "message"), [
    ({"temperature": 0.5}, "needs an 'override'"), ({"tempreature": {"override": 1}}, "unknown sampler fields"),
    ({"top_p": {"override": 3}}, "top_p"), ({"top_k": {"override": 1, "force": "yes"}}, "force and additive"),
])
def test_invalid_presets_are_refused_with_the_reason(data, message):
    with pytest.raises(ApiError, match=message):
        parse_overrides(data, "preset.yml")


def test_every_shipped_preset_loads():
    folder = REPO / "sampler_overrides"
    names = sorted(p.stem for p in folder.glob("*.yml"))
    assert {"safe_defaults", "sample_preset", "qwen3_coder", "qwen3_5_thinking", "qwen3_5_instruct", "glm4_6",
            "glm4_7", "minimax_m2"} <= set(names)
    for name in names:
        preset = load_preset(name, [folder])
        assert preset.overrides, name
    assert load_preset("qwen3_coder", [folder]).overrides["top_k"] == Override(20, force=True)
    assert set(load_preset("sample_preset", [folder]).overrides) == set(NEUTRAL)


def test_a_preset_file_skips_a_bad_key_with_a_warning_and_applies_the_rest(tmp_path, caplog):
    write_preset(tmp_path, "mixed", {"top_k": {"override": 20, "force": True}, "tempreature": {"override": 1},
                                     "top_p": {"override": 3}, "min_p": 0.1, "temperature": {"override": 0.7}})
    with caplog.at_level(logging.WARNING, logger="tabby_fixed.sampling.presets"):
        preset = load_preset("mixed", [tmp_path])
    assert preset.overrides == {"top_k": Override(20, force=True), "temperature": Override(0.7)}
    for bad in ("tempreature", "top_p", "min_p"):
        assert bad in caplog.text
    assert len(caplog.records) == 3


@pytest.mark.parametrize(("sent", "breakers"), [
    ('["\\n", ":", "\\"", "*"]', ["\n", ":", '"', "*"]),  # SillyTavern's JSON string
    ('"\\n", ":"', ["\n", ":"]),  # without brackets, as upstream also reads it
    ("###", ["###"]),  # not JSON: one breaker
    (["\n", ":"], ["\n", ":"]),
])
def test_dry_sequence_breakers_as_a_json_string(sent, breakers):
    assert SamplerFields.model_validate({"dry_sequence_breakers": sent}).dry_sequence_breakers == breakers
