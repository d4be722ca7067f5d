"""``logging.log_chat_completion_requests``: each chat request and its rendered prompt as files.

As upstream: ``logs/debug/<UTC time>_<id>.json`` holds the request (method, path, query, headers
and body, credentials redacted) and ``.txt`` beside it the exact prompt text sent to the
tokenizer, so a bug report can be replayed. The files hold whole conversations; the setting is
for debugging only.
"""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fastapi import Request

from .request_log import redacted_headers

logger = logging.getLogger(__name__)

SECRET_KEYS = frozenset({"api_key", "admin_key", "authorization", "token", "hf_token", "x-api-key", "x-admin-key"})


def redacted(value: Any) -> Any:
    """A JSON value with every credential-named key's value replaced, at any depth."""
    if isinstance(value, dict):
        return {key: "[redacted]" if str(key).lower() in SECRET_KEYS else redacted(item)
                for key, item in value.items()}
    if isinstance(value, list):
        return [redacted(item) for item in value]
    return value


def _write(folder: Path, stem: str, record: dict[str, Any], prompt: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}.json"
    path.write_text(json.dumps(record, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    path.with_suffix(".txt").write_text(prompt, encoding="utf-8")
    return path


async def write_chat_log(request: Request, body: bytes, prompt: str) -> None:
    """Write the two files under the configured ``logs/debug``; a failure is logged, never the request's."""
    now = datetime.now(timezone.utc)
    record = {
        "schema": "tabby-fixed.chat_completion_request_log.v1",
        "created_at": now.isoformat(),
        "request": {"method": request.method, "path": request.url.path,
                    "query": redacted(dict(request.query_params)), "headers": redacted_headers(request.scope),
                    "body": redacted(json.loads(body))},
    }
    folder = request.app.state.config.resolve("logs/debug")
    try:
        path = await asyncio.to_thread(_write, folder, f"{now:%Y%m%dT%H%M%S.%fZ}_{uuid.uuid4().hex[:8]}", record,
                                       prompt)
    except OSError as error:
        logger.error("could not write the chat request log under %s: %s", folder, error)
        return
    logger.info("chat request logged to %s (prompt: %s)", path, path.with_suffix(".txt").name)
