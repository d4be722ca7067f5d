"""``POST /v1/download`` and ``tabby-fixed download`` against a stand-in Hub (HF_ENDPOINT), never the internet."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tabby_fixed.cli import main
from tests.hub_standin import Hub, Repo
from tests.live_server import LiveServer, live_app
from tests.server.conftest import ADMIN_KEY, API_KEY, make_models, serve

ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}
WEIGHTS = bytes(range(256)) * 40_000  # 10 MB: several chunks
MAIN = {"config.json": b'{"architectures": ["Tiny"]}', "model.safetensors": WEIGHTS, "tokenizer.json": b"{}",
        "old/pytorch_model.bin": b"legacy", "README.md": b"# tiny"}


@pytest.fixture(scope="module")
def hub() -> Iterator[tuple[Hub, LiveServer]]:
    standin = Hub({
        "org/tiny-model": Repo({"main": MAIN, "v2": {"config.json": b'{"v": 2}', "README.md": b"v2"}}),
        "org/private-model": Repo({"main": {"config.json": b"{}"}}, token="hf_secret"),
        "org/broken-model": Repo({"main": {"config.json": b"{}", "model.safetensors": WEIGHTS}},
                                 short={"model.safetensors"}),
        "org/tiny-lora": Repo({"main": {"adapter_config.json": b"{}"}}),
        "org/slow-model": Repo({"main": {"config.json": b"{}", "model.safetensors": WEIGHTS}}, slow=True),
    })
    with live_app(standin.app()) as server:
        yield standin, server


@pytest.fixture
def endpoint(hub: tuple[Hub, LiveServer], monkeypatch: pytest.MonkeyPatch) -> Hub:
    monkeypatch.setenv("HF_ENDPOINT", hub[1].url)
    hub[0].requests.clear()
    return hub[0]


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workspace of its own: downloads must not show up in the other tests' model lists."""
    return make_models(tmp_path_factory.mktemp("downloads")).parent


@pytest.fixture(scope="module")
def server(root: Path) -> Iterator[LiveServer]:
    yield from serve(root, "tester", "--lora-dir", str(root / "loras"))


def download(server: LiveServer, headers: dict | None = None, **body) -> httpx.Response:
    return httpx.post(server.v1 + "/download", headers=ADMIN if headers is None else headers, json=body, timeout=60)


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(".")] if folder.is_dir() else []


def test_downloads_the_wanted_files_into_model_dir(server: LiveServer, root: Path, endpoint: Hub):
    response = download(server, repo_id="org/tiny-model", exclude=["*.bin"])
    assert response.status_code == 200, response.text
    folder = root / "models" / "tiny-model"
    assert response.json() == {"download_path": str(folder)}
    got = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    assert got == {path: content for path, content in MAIN.items() if not path.endswith(".bin")}
    assert "get org/tiny-model@main/old/pytorch_model.bin" not in endpoint.requests
    assert leftovers(root / "models") == []
    listed = httpx.get(server.v1 + "/models", headers=ADMIN).json()
    assert "tiny-model" in [card["id"] for card in listed["data"]]


def test_revision_include_and_folder_name(server: LiveServer, root: Path, endpoint: Hub):
    response = download(server, repo_id="org/tiny-model", revision="v2", include=["*.json"], folder_name="tiny-v2")
    assert response.status_code == 200, response.text
    folder = root / "models" / "tiny-v2"
    assert [p.name for p in folder.iterdir()] == ["config.json"]
    assert (folder / "config.json").read_bytes() == b'{"v": 2}'


def test_a_private_repository_needs_its_token(server: LiveServer, root: Path, endpoint: Hub):
    refused = download(server, repo_id="org/private-model")
    assert refused.status_code == 400 and refused.json()["error"]["code"] == "download_failed"
    assert "org/private-model" in refused.json()["error"]["message"]
    assert not (root / "models" / "private-model").exists()
    allowed = download(server, repo_id="org/private-model", token="hf_secret")
    assert allowed.status_code == 200 and (root / "models" / "private-model" / "config.json").is_file()


def test_failures_leave_nothing_behind(server: LiveServer, root: Path, endpoint: Hub):
    for body in ({"repo_id": "org/no-such-model"}, {"repo_id": "org/tiny-model", "revision": "nope",
                                                    "folder_name": "nope"},
                 {"repo_id": "org/broken-model"}, {"repo_id": "org/tiny-model", "include": ["*.gguf"],
                                                   "folder_name": "nothing"}):
        response = download(server, **body)
        assert response.status_code == 400, body
        assert response.json()["error"]["code"] == "download_failed"
    broken = download(server, repo_id="org/broken-model").json()["error"]["message"]
    assert "model.safetensors" in broken and "bytes" in broken
    assert not {"no-such-model", "nope", "broken-model", "nothing"} & {p.name for p in (root / "models").iterdir()}
    assert leftovers(root / "models") == []


def test_refused_before_any_network(server: LiveServer, endpoint: Hub):
    existing = download(server, repo_id="org/existing", folder_name="tester")
    assert existing.status_code == 400 and "already exists" in existing.json()["error"]["message"]
    escape = download(server, repo_id="org/tiny-model", folder_name="../outside")
    assert escape.status_code == 400 and escape.json()["error"]["param"] == "folder_name"
    kind = download(server, repo_id="org/tiny-model", repo_type="dataset")
    assert kind.status_code == 400 and kind.json()["error"]["param"] == "repo_type"
    missing = download(server)
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "repo_id"
    assert download(server, headers={"authorization": f"Bearer {API_KEY}"}, repo_id="org/x").status_code == 401
    assert endpoint.requests == []


def test_a_lora_goes_to_lora_dir(server: LiveServer, root: Path, endpoint: Hub):
    response = download(server, repo_id="org/tiny-lora", repo_type="lora")
    assert response.json() == {"download_path": str(root / "loras" / "tiny-lora")}
    assert (root / "loras" / "tiny-lora" / "adapter_config.json").is_file()


def test_the_download_command(tmp_path: Path, endpoint: Hub, capsys: pytest.CaptureFixture):
    models = tmp_path / "models"
    assert main(["download", "org/tiny-model", "--exclude", "*.bin", "README.md", "--model-dir", str(models)]) == 0
    assert sorted(p.name for p in (models / "tiny-model").iterdir()) == ["config.json", "model.safetensors",
                                                                          "tokenizer.json"]
    assert f"downloaded org/tiny-model to {models / 'tiny-model'}" in capsys.readouterr().out
    assert main(["download", "org/no-such-model", "--model-dir", str(models)]) == 1
    assert "org/no-such-model" in capsys.readouterr().err
    assert main(["download", "org/tiny-model", "--model-dir", str(models)]) == 1  # the folder exists now
    assert "already exists" in capsys.readouterr().err


def test_a_client_that_goes_away_cancels_the_download(server: LiveServer, root: Path, endpoint: Hub):
    with pytest.raises(httpx.ReadTimeout):  # the file takes seconds to arrive; the client gives up at once
        httpx.post(server.v1 + "/download", headers=ADMIN, json={"repo_id": "org/slow-model"}, timeout=1.0)
    deadline = time.monotonic() + 10
    while leftovers(root / "models") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers(root / "models") == [] and not (root / "models" / "slow-model").exists()
