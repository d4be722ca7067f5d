"""Images in chat messages: read each one and put its marker where it was, so the prompt holds
the image's place and the engine gets its bytes.

Chat completions send ``image_url`` parts; Messages ``image`` blocks and Responses
``input_image`` parts arrive here as the same parts. A model that does not take images gets a
400, never a silent drop: an answer about an image the model never saw is worse than an error.
"""

from __future__ import annotations

import uuid
from typing import Any

from ..config import TabbyConfig
from ..engine.base import ImageInput
from ..errors import ApiError
from ..images import read_image
from .models import LoadedModel
from .requests import ChatCompletionRequest, ContentPart


def _url(part: ContentPart, where: str) -> str:
    """The URL of an image part: OpenAI's ``{"url"}``, a bare string, or Anthropic's ``source``."""
    source: Any = part.image_url
    if isinstance(source, str):
        return source
    if isinstance(source, dict) and source.get("type") == "base64":
        return f"data:{source.get('media_type') or 'image/png'};base64,{source.get('data') or ''}"
    if isinstance(source, dict) and isinstance(source.get("url"), str):
        return source["url"]
    raise ApiError(400, f"{where}: an image part needs image_url.url (an http(s) URL or a data: URI).",
                   param=where)


async def attach_images(chat: ChatCompletionRequest, model: LoadedModel,
                        config: TabbyConfig) -> tuple[ChatCompletionRequest, tuple[ImageInput, ...]]:
    """The request with each image part replaced by a text part holding its marker, and the images."""
    found = [(m, p, part) for m, message in enumerate(chat.messages) if isinstance(message.content, list)
             for p, part in enumerate(message.content) if part.type != "text"]
    if not found:
        return chat, ()
    for m, p, part in found:
        if part.type != "image_url":
            raise ApiError(400, f"messages[{m}].content[{p}]: content parts of type {part.type!r} cannot be "
                                f"read here; send text and images.", param=f"messages.{m}.content.{p}.type")
    if not model.engine.info.vision:
        raise ApiError(400, f"The model '{model.name}' does not take images: it has no vision tower, or model.vision "
                            f"is off (set model.vision: true for a model that has one).", code="images_unsupported",
                       param="messages")
    nonce = uuid.uuid4().hex[:12]  # a marker no message text will contain by chance
    messages = [message.model_copy(update={"content": list(message.content)}) if isinstance(message.content, list)
                else message for message in chat.messages]
    images = []
    budget = config.network.max_request_bytes  # for all of a request's images together, not each
    for index, (m, p, part) in enumerate(found):
        where = f"messages.{m}.content.{p}.image_url"
        data, kind = await read_image(_url(part, where), where=where,
                                      allow_fetch=not config.network.disable_fetch_requests, max_bytes=budget)
        budget -= len(data)
        marker = f"<$IMG_{nonce}_{index}$>"
        images.append(ImageInput(marker, data, kind))
        # A message with an image part has list content, which the type checker cannot see here.
        messages[m].content[p] = ContentPart(type="text", text=marker)  # type: ignore[index]
    return chat.model_copy(update={"messages": messages}), tuple(images)
