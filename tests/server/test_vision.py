"""Images in chat messages reach the engine as bytes with a marker where they were: the openai
SDK's image parts, Anthropic image blocks and Responses input_image, on a scripted model with a
vision tower; every other case is a clear 400."""

from __future__ import annotations

import base64
import io
import random
from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest
import yaml
from fastapi import FastAPI
from fastapi.responses import Response
from PIL import Image

from tests.live_server import LiveServer, live_app
from tests.server.conftest import API_KEY, make_models, serve

SEER = {"vision_tower": True, "responses": [{"match": r"\A(?P<text>.*)\Z", "output": "saw: {text}"}]}


def png(color: str = "red", size: tuple[int, int] = (4, 3)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, format="PNG")
    return out.getvalue()


def noise(side: int = 120) -> bytes:
    """A PNG that does not compress: random pixels."""
    out = io.BytesIO()
    Image.frombytes("RGB", (side, side), random.Random(side).randbytes(side * side * 3)).save(out, format="PNG")
    return out.getvalue()


def jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (5, 5), "blue").save(out, format="JPEG")
    return out.getvalue()


def data_uri(data: bytes, kind: str = "image/png") -> str:
    return f"data:{kind};base64,{base64.b64encode(data).decode()}"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    models = make_models(tmp_path_factory.mktemp("vision"))
    (models / "seer").mkdir()
    (models / "seer" / "scripted.yml").write_text(yaml.safe_dump(SEER))
    return models.parent


@pytest.fixture(scope="module")
def seer(root: Path) -> Iterator[LiveServer]:
    yield from serve(root, "seer", "--vision", "true")


@pytest.fixture(scope="module")
def images_host() -> Iterator[LiveServer]:
    """Where image URLs point: a local server, never the internet."""
    app = FastAPI()

    @app.get("/cat.jpg")
    async def cat() -> Response:
        return Response(jpeg(), media_type="image/jpeg")

    @app.get("/big.png")
    async def big() -> Response:
        return Response(noise(), media_type="image/png")

    @app.get("/page.html")
    async def page() -> Response:
        return Response(b"<html></html>", media_type="text/html")

    with live_app(app) as server:
        yield server


def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.v1, api_key=API_KEY, max_retries=0)


def seen(server: LiveServer) -> list:
    engine = server.app.state.model.engine  # the scripted engine, inside the server's metrics wrapper
    return getattr(engine, "inner", engine).images_seen


def ask(server: LiveServer, *parts: dict) -> str:
    with client(server) as chat:
        reply = chat.chat.completions.create(model="seer", messages=[{"role": "user", "content": list(parts)}])
    return reply.choices[0].message.content


def test_image_parts_reach_the_engine_where_they_were(seer: LiveServer, images_host: LiveServer):
    before = len(seen(seer))
    answer = ask(seer, {"type": "text", "text": "compare "},
                 {"type": "image_url", "image_url": {"url": data_uri(png()), "detail": "high"}},
                 {"type": "text", "text": " with "},
                 {"type": "image_url", "image_url": {"url": images_host.url + "/cat.jpg"}})
    images = seen(seer)[before:]
    assert [(image.data, image.media_type) for image in images] == [(png(), "image/png"), (jpeg(), "image/jpeg")]
    assert answer == f"saw: compare {images[0].marker} with {images[1].marker}"
    assert images[0].marker != images[1].marker


def test_anthropic_image_blocks_and_responses_input_image(seer: LiveServer):
    before = len(seen(seer))
    with anthropic.Anthropic(base_url=seer.url, api_key=API_KEY, max_retries=0) as claude:
        claude.messages.create(model="seer", max_tokens=50, messages=[{"role": "user", "content": [
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": base64.b64encode(png("green")).decode()}},
            {"type": "text", "text": "what colour?"}]}])
    with client(seer) as responses:
        responses.responses.create(model="seer", input=[{"role": "user", "content": [
            {"type": "input_text", "text": "and this?"},
            {"type": "input_image", "image_url": data_uri(png("white"))}]}])
    assert [image.data for image in seen(seer)[before:]] == [png("green"), png("white")]


def test_the_model_card_says_it_takes_images(seer: LiveServer, server: LiveServer):
    for live, expected in ((seer, True), (server, False)):
        with client(live) as models:
            card = models.models.retrieve(live.app.state.model.name)
        assert card.model_extra["parameters"]["use_vision"] is expected


def test_a_text_only_model_refuses_images(server: LiveServer):
    with client(server) as chat, pytest.raises(openai.BadRequestError) as refused:
        chat.chat.completions.create(model="tester", messages=[{"role": "user", "content": [
            {"type": "text", "text": "RAW:x"}, {"type": "image_url", "image_url": {"url": data_uri(png())}}]}])
    assert refused.value.code == "images_unsupported" and "does not take images" in refused.value.message


def test_a_vision_tower_needs_model_vision_on(root: Path):
    for server in serve(root, "seer"):
        with pytest.raises(openai.BadRequestError) as refused:
            ask(server, {"type": "image_url", "image_url": {"url": data_uri(png())}})
        assert "model.vision" in refused.value.message


@pytest.mark.parametrize(("part", "message"), [
    ({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}}, "'input_audio' cannot be read"),
    ({"type": "image_url", "image_url": {"url": "data:image/png;base64,aGVsbG8="}}, "not a PNG, JPEG"),
    ({"type": "image_url", "image_url": {"url": "data:image/png;base64,%%%"}}, "does not decode"),
    ({"type": "image_url", "image_url": {"url": "data:image/png,rawbytes"}}, "must be base64"),
    ({"type": "image_url", "image_url": {"url": "ftp://example.com/cat.png"}}, "http(s) URL or a data: URI"),
    ({"type": "image_url", "image_url": {}}, "needs image_url.url"),
], ids=["audio", "not an image", "bad base64", "not base64", "ftp", "no url"])
def test_unusable_input_is_a_clear_400(seer: LiveServer, part: dict, message: str):
    before = len(seen(seer))
    with pytest.raises(openai.BadRequestError) as refused:
        ask(seer, {"type": "text", "text": "look"}, part)
    assert message in refused.value.message
    assert len(seen(seer)) == before


def test_urls_that_do_not_give_an_image(seer: LiveServer, images_host: LiveServer):
    for path, message in (("/missing.png", "HTTP 404"), ("/page.html", "not a PNG, JPEG")):
        with pytest.raises(openai.BadRequestError) as refused:
            ask(seer, {"type": "image_url", "image_url": {"url": images_host.url + path}})
        assert message in refused.value.message


def test_disable_fetch_requests_refuses_urls_but_takes_data(root: Path, images_host: LiveServer):
    for server in serve(root, "seer", "--vision", "true", "--disable-fetch-requests", "true"):
        with pytest.raises(openai.BadRequestError) as refused:
            ask(server, {"type": "image_url", "image_url": {"url": images_host.url + "/cat.jpg"}})
        assert "disable_fetch_requests" in refused.value.message
        ask(server, {"type": "image_url", "image_url": {"url": data_uri(png())}})
        assert [image.data for image in seen(server)] == [png()]


def test_fetched_images_over_the_size_limit_are_413(root: Path, images_host: LiveServer):
    """A fetched image is held to the limit a request body is (a data: URI is inside the body already)."""
    for server in serve(root, "seer", "--vision", "true", "--max-request-bytes", str(len(noise()) // 2)):
        with pytest.raises(openai.APIStatusError) as refused:
            ask(server, {"type": "image_url", "image_url": {"url": images_host.url + "/big.png"}})
        assert refused.value.status_code == 413 and "network.max_request_bytes" in refused.value.message
        assert ask(server, {"type": "image_url", "image_url": {"url": images_host.url + "/cat.jpg"}})
        assert [image.data for image in seen(server)] == [jpeg()]
