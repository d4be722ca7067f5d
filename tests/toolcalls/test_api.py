"""The public surface other code and external checks rely on."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

import tabby_fixed.toolcalls as toolcalls
from tabby_fixed.toolcalls import FORMATS, ToolCallParser, UnknownFormatError, detect_format


def test_exports_are_exactly_the_public_names():
    public = {name for name, value in vars(toolcalls).items()
              if not name.startswith("_") and not inspect.ismodule(value)}
    assert set(toolcalls.__all__) == public


def test_the_library_imports_no_server_engine_or_torch():
    code = ("import sys, tabby_fixed.toolcalls, tabby_fixed.reasoning; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "{'fastapi', 'starlette', 'uvicorn', 'torch', 'exllamav3', 'jinja2', 'pydantic'}))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"


@pytest.mark.parametrize(("alias", "canonical"), [
    ("qwen3_coder", "qwen3_coder"), ("qwen3_5", "qwen3_coder"), ("step3_5", "qwen3_coder"), ("step3_7", "qwen3_coder"),
    ("hermes", "hermes"), ("qwen3", "hermes"), ("qwen2_5", "hermes"), ("glm4_5", "glm4_5"), ("glm4_6", "glm4_5"),
    ("glm4_7", "glm4_7"), ("minimax_m2", "minimax_m2"), ("minimax_m2_5", "minimax_m2"),
])
def test_tabbyapi_names_and_aliases(alias, canonical):
    assert FORMATS[alias].names[0] == canonical
    assert ToolCallParser(alias).format is FORMATS[canonical]


def test_unknown_format_names_the_known_ones():
    with pytest.raises(UnknownFormatError, match="qwen3_coder") as error:
        ToolCallParser("qwen4_xml")
    assert "qwen4_xml" in str(error.value) and isinstance(error.value, ValueError)


def test_detect_format_without_a_template():
    assert detect_format(None) is None and detect_format("{{ messages }}") is None


def test_stream_contract_misuse_is_an_error_not_silence():
    stream = ToolCallParser("qwen3_coder").stream()
    with pytest.raises(RuntimeError):
        _ = stream.result
    stream.close()
    assert stream.close() == []
    with pytest.raises(RuntimeError):
        stream.feed("late")
