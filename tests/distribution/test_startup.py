"""Start-up failures end in one line that says what to fix and a non-zero exit, with no traceback,
and they come before the model loads; a server that starts says what it did not do, and
``tabby-fixed health`` finds it where the config and environment put it."""

from __future__ import annotations

import socket
import sys

import yaml

from tabby_fixed.bundled import DEMO_MODELS_DIR

from .processes import checkout_env, free_port, last_line, run_cli, running


def assert_one_line_failure(result, code: int, *fragments: str) -> None:
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr, result.stderr
    line = last_line(result.stderr)
    assert line.startswith("tabby-fixed: "), result.stderr
    for fragment in fragments:
        assert fragment in line, line


def test_a_missing_model_dir_is_named_with_the_fix(tmp_path):
    result = run_cli(["--model-dir", "nowhere", "--model-name", "demo", "--port", "0"], tmp_path)
    assert_one_line_failure(result, 1, f"model.model_dir {tmp_path / 'nowhere'} does not exist", "--model-dir")


def test_an_unknown_model_names_the_folder_searched(tmp_path):
    result = run_cli(["--model-dir", str(DEMO_MODELS_DIR), "--model-name", "ghost", "--port", "0"], tmp_path)
    assert_one_line_failure(result, 1, "'ghost'", str(DEMO_MODELS_DIR), "folder names")


def test_a_model_that_fails_to_load_is_one_line(tmp_path):
    (tmp_path / "models" / "broken" / "template").mkdir(parents=True)  # a folder where a template file belongs
    (tmp_path / "models" / "broken" / "scripted.yml").write_text(yaml.safe_dump({"chat_template": "template"}))
    result = run_cli(["--model-dir", "models", "--model-name", "broken", "--port", "0"], tmp_path)
    assert_one_line_failure(result, 1, "loading model.model_name 'broken' failed: IsADirectoryError")


def test_a_port_in_use_is_found_before_the_model_loads(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = run_cli(["--demo", "--port", str(port)], tmp_path)
    assert_one_line_failure(result, 1, f"port {port} on 127.0.0.1 is already in use", "--port")
    assert "loaded demo" not in result.stderr and not (tmp_path / "api_tokens.yml").exists()


def test_a_bad_key_file_is_named_and_kept(tmp_path):
    keys = tmp_path / "api_tokens.yml"
    keys.write_text("api_key: [\n")
    result = run_cli(["--demo", "--port", "0"], tmp_path)
    assert_one_line_failure(result, 1, str(keys), "delete it")
    assert keys.read_text() == "api_key: [\n"
    keys.write_text(yaml.safe_dump({"api_key": 5, "admin_key": "x"}))
    assert_one_line_failure(run_cli(["--demo", "--port", "0"], tmp_path), 1, "api_key must be")


def test_mount_points_that_are_directories_are_named(tmp_path):
    (tmp_path / "api_tokens.yml").mkdir()
    assert_one_line_failure(run_cli(["--demo", "--port", "0"], tmp_path), 1, "api_tokens.yml is a directory")
    (tmp_path / "config.yml").mkdir()
    assert_one_line_failure(run_cli(["--demo", "--port", "0"], tmp_path), 2, "config.yml is a directory")


def test_debug_adds_the_traceback(tmp_path):
    result = run_cli(["--model-dir", "nowhere", "--model-name", "demo", "--port", "0", "--debug"], tmp_path)
    assert result.returncode == 1 and "Traceback" in result.stderr
    assert last_line(result.stderr).startswith("tabby-fixed: model.model_dir")


def test_a_start_without_a_model_or_keys_says_so_and_health_finds_its_port(tmp_path):
    port = free_port()
    env = checkout_env(TABBY_NETWORK_PORT=str(port))
    command = [sys.executable, "-m", "tabby_fixed", "serve", "--model-dir", str(DEMO_MODELS_DIR),
               "--disable-auth", "true"]
    with running(command, tmp_path, env, port, tmp_path / "server.log") as server:
        output = server.output()
        assert run_cli(["health"], tmp_path, env).returncode == 0
    assert "No model loaded" in output and "POST /v1/model/load" in output
    assert "WARNING" in output and "Authentication is disabled" in output
    stopped = run_cli(["health"], tmp_path, env)
    assert stopped.returncode == 1 and last_line(stopped.stderr).startswith(f"tabby-fixed health: http://127.0.0.1:{port}")
