"""``tabby-fixed export-openapi`` and ``export-config``, run through the command line."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import yaml

from tabby_fixed.cli import main
from tabby_fixed.config import SECTIONS, TabbyConfig, load_config


def test_export_openapi_documents_the_chosen_api_families(tmp_path: Path, capsys: pytest.CaptureFixture):
    both, oai = tmp_path / "both.json", tmp_path / "oai.json"
    assert main(["export-openapi", "--export-path", str(both), "--api-servers", "OAI", "Kobold"]) == 0
    assert main(["export-openapi", "--export-path", str(oai)]) == 0
    assert f"wrote {both}" in capsys.readouterr().out
    both_paths, oai_paths = json.loads(both.read_text())["paths"], json.loads(oai.read_text())["paths"]
    assert {"/api/v1/generate", "/api/extra/generate/stream", "/v1/chat/completions",
            "/v1/models/{model_id}"} <= both_paths.keys()
    assert "/v1/chat/completions" in oai_paths and "/api/v1/generate" not in oai_paths
    assert not (tmp_path / "api_tokens.yml").exists() and not Path("api_tokens.yml").exists()


def test_export_openapi_refuses_an_unknown_api_family(tmp_path: Path, capsys: pytest.CaptureFixture):
    assert main(["export-openapi", "--export-path", str(tmp_path / "x.json"), "--api-servers", "Ollama"]) == 2
    assert "Ollama" in capsys.readouterr().err and not (tmp_path / "x.json").exists()


def test_export_config_holds_every_key_and_loads_as_the_defaults(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    path = tmp_path / "exported.yml"
    assert main(["export-config", "--export-path", str(path)]) == 0
    document = yaml.safe_load(path.read_text())
    assert {section: set(block) for section, block in document.items()} == {
        section: set(model.model_fields) for section, model in SECTIONS.items()}
    caplog.set_level(logging.WARNING, logger="tabby_fixed.config")
    assert load_config(["--config", str(path)], {}, tmp_path) == TabbyConfig(config_dir=tmp_path, work_dir=tmp_path)
    assert caplog.records == []
    text = path.read_text()
    assert "  # API families to serve: OAI, Kobold.\n  api_servers: [\"OAI\"]\n" in text
