"""Reading the images a request names: ``data:`` URIs, and http(s) URLs unless
``network.disable_fetch_requests`` forbids fetching them.

Every way an image can be unusable is the client's to fix and gets a 400 that says which image
and why: a scheme we do not read, a fetch that is off or fails, base64 that does not decode,
bytes that are no PNG, JPEG, GIF, WebP or BMP image, or more than the size limit. The image
format is told from the bytes themselves (the declared media type is often wrong), so nothing
that is not an image reaches an engine.
"""

from __future__ import annotations

import base64
import binascii
from urllib.parse import urlsplit

import httpx

from .errors import ApiError

#: Seconds a fetch of one image may take, all told.
FETCH_TIMEOUT = 30.0

_SIGNATURES = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
               (b"GIF89a", "image/gif"), (b"BM", "image/bmp"))


def media_type(data: bytes) -> str | None:
    """The image format the bytes are in, by their signature; None for anything else."""
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((kind for signature, kind in _SIGNATURES if data.startswith(signature)), None)


async def read_image(url: str, *, where: str, allow_fetch: bool, max_bytes: int) -> tuple[bytes, str]:
    """The image's bytes and media type. ``where`` names the image in error messages (its field)."""
    scheme = urlsplit(url).scheme.lower() if isinstance(url, str) else ""
    if scheme == "data":
        data = _decode_data_uri(url, where)
    elif scheme in ("http", "https"):
        if not allow_fetch:
            raise ApiError(400, f"{where}: fetching image URLs is turned off on this server "
                                f"(network.disable_fetch_requests); send the image as a data: URI.", param=where)
        data = await _fetch(url, where, max_bytes)
    else:
        raise ApiError(400, f"{where}: an image must be an http(s) URL or a data: URI, not {url[:40]!r}.",
                       param=where)
    if len(data) > max_bytes:
        raise _too_large(where, len(data), max_bytes)
    kind = media_type(data)
    if kind is None:
        raise ApiError(400, f"{where}: the data is not a PNG, JPEG, GIF, WebP or BMP image.", param=where)
    return data, kind


def _decode_data_uri(url: str, where: str) -> bytes:
    header, comma, payload = url.partition(",")
    if not comma or not header.lower().endswith(";base64"):
        raise ApiError(400, f"{where}: a data: URI must be base64, as data:image/png;base64,....", param=where)
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError):
        raise ApiError(400, f"{where}: the data: URI's base64 does not decode.", param=where) from None


async def _fetch(url: str, where: str, max_bytes: int) -> bytes:
    try:
        async with httpx.AsyncClient(follow_redirects=True, timeout=FETCH_TIMEOUT) as client, \
                client.stream("GET", url) as response:
            if response.status_code != 200:
                raise ApiError(400, f"{where}: fetching {url} answered HTTP {response.status_code}.", param=where)
            chunks, size = [], 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > max_bytes:
                    raise _too_large(where, size, max_bytes)
                chunks.append(chunk)
            return b"".join(chunks)
    except httpx.HTTPError as error:
        raise ApiError(400, f"{where}: fetching {url} failed: {type(error).__name__}: {error}", param=where) from None


def _too_large(where: str, size: int, limit: int) -> ApiError:
    return ApiError(413, f"{where}: the image is {size} bytes or more; this server takes images of at most {limit} "
                         f"bytes (network.max_request_bytes).", param=where, code="request_too_large")
