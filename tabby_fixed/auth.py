"""API keys: the ``api_tokens.yml`` file, its hot reload, and the two auth levels routes depend on.

Which headers are read, in which order, and what each failure says all follow upstream TabbyAPI,
so clients written against it keep working; only the error body differs (OpenAI-shaped, see
``errors.py``).

The keys live in one immutable snapshot that a reload swaps in whole, because FastAPI runs the
sync dependencies below in worker threads while the watcher reloads on the event loop.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import yaml
from fastapi import Depends, Request

from tabby_fixed.config import yaml_problem
from tabby_fixed.errors import unauthorized

logger = logging.getLogger(__name__)

Permission = Literal["admin", "api"]


class KeyFileError(ValueError):
    """``api_tokens.yml`` exists but cannot be used.

    Fatal at startup (a server with no usable keys would lock everyone out), only a warning on
    reload (the keys already in use stay valid).
    """


@dataclass(frozen=True)
class _Keys:
    api: tuple[bytes, ...]
    admin: bytes


def _parse(text: str) -> _Keys:
    data = yaml.safe_load(text)
    if not isinstance(data, dict):
        raise KeyFileError("expected a mapping with api_key and admin_key")
    api, admin = data.get("api_key"), data.get("admin_key")
    api_keys = [api] if isinstance(api, str) else api
    if not isinstance(api_keys, list) or not api_keys or not all(isinstance(k, str) and k for k in api_keys):
        raise KeyFileError("api_key must be a non-empty string or a non-empty list of them")
    if not isinstance(admin, str) or not admin:
        raise KeyFileError("admin_key must be a non-empty string")
    return _Keys(tuple(k.encode() for k in api_keys), admin.encode())


def _any_match(given: bytes, keys: Iterable[bytes]) -> bool:
    """Compares against every key so the time taken says nothing about which one (if any) matched."""
    found = False
    for key in keys:
        found |= hmac.compare_digest(given, key)
    return found


def _bearer_token(authorization: str) -> str | None:
    """The scheme is case-insensitive (RFC 7235), so "bearer" and "BEARER" count too."""
    return authorization[7:] if authorization[:7].lower() == "bearer " else None


def _presented_key(headers: Mapping[str, str], header: str, what: str) -> str | None:
    """The key in the level's own header, else the Bearer token; None for a non-Bearer authorization."""
    key = headers.get(header)
    if key:
        return key
    authorization = headers.get("authorization")
    if not authorization:
        raise unauthorized(f"Please provide {what}")
    return _bearer_token(authorization)


class KeyStore:
    """The keys from ``api_tokens.yml``, or, when auth is disabled, a store that admits everyone.

    ``headers`` arguments must look names up case-insensitively (Starlette's ``Headers``) or use
    lowercase names, as ASGI servers deliver them.
    """

    def __init__(self, path: Path, disabled: bool = False) -> None:
        self.path = Path(path)
        self.disabled = disabled
        self._keys: _Keys | None = None
        self._stamp: tuple[int, int] | None = None
        if disabled:
            logger.warning("Authentication is disabled (network.disable_auth): every route, the admin routes "
                           "included, answers without a key. Only do this on a trusted network.")
            return
        if self.path.is_dir():
            raise KeyFileError(f"{self.path} is a directory, not a file (a container runtime makes one when the "
                               f"file to mount did not exist); remove it so new keys are written, or mount a file")
        if not self.path.exists() or self._empty():
            self._generate()
        # Stat before reading: a write in between then shows up as a change on the next poll.
        self._stamp = self._stat()
        self._keys = self._read()
        logger.info("API keys: %s (edits take effect within 2 s)", self.path)

    def permission(self, headers: Mapping[str, str]) -> Permission | None:
        """What the caller may do, for routes that answer everyone but show admins more.

        As upstream, the first header present decides, even when a later one holds a better key;
        a missing or unknown key gives ``None`` instead of an error.
        """
        if self.disabled:
            return "admin"
        key = headers.get("x-admin-key") or headers.get("x-api-key") or headers.get("authorization")
        if not key:
            return None
        token = _bearer_token(key)
        return self._classify(key if token is None else token)

    def check_api(self, headers: Mapping[str, str]) -> Permission:
        """Admits API and admin keys; ``x-api-key``, when present, is the only header looked at."""
        if self.disabled:
            return "admin"
        key = _presented_key(headers, "x-api-key", "an API key")
        permission = self._classify(key) if key else None
        if permission is None:
            raise unauthorized("Invalid API key")
        return permission

    def check_admin(self, headers: Mapping[str, str]) -> Permission:
        """Admits only the admin key, and never from ``x-api-key`` (upstream ignores it here)."""
        if self.disabled:
            return "admin"
        key = _presented_key(headers, "x-admin-key", "an admin key")
        if not key or self._classify(key) != "admin":
            raise unauthorized("Invalid admin key")
        return "admin"

    def reload_if_changed(self) -> bool:
        """Picks up edits (new keys, revoked keys) without a restart; True when new keys took effect.

        A file that cannot be read or parsed is reported once and the previous keys stay in force,
        so a half-written edit never locks everyone out.
        """
        if self.disabled:
            return False
        try:
            stamp = self._stat()
        except OSError as exc:
            if self._stamp is not None:
                logger.warning("Cannot read %s (%s); keeping the previous API keys", self.path, exc)
                self._stamp = None
            return False
        if stamp == self._stamp:
            return False
        self._stamp = stamp
        try:
            keys = self._read()
        except (OSError, KeyFileError) as exc:
            logger.warning("Could not reload API keys: %s; keeping the previous keys", exc)
            return False
        self._keys = keys
        logger.info("Reloaded API keys from %s", self.path)
        return True

    async def watch(self, interval: float = 2.0) -> None:
        """Polls instead of using file-system events so it behaves the same on every OS and on
        Docker bind mounts. Runs until cancelled; returns at once when auth is disabled."""
        if self.disabled:
            return
        while True:
            await asyncio.sleep(interval)
            self.reload_if_changed()

    def _classify(self, key: str) -> Permission | None:
        keys = self._keys
        if keys is None:
            return None
        given = key.encode()
        # Both comparisons run before either result is used, so timing does not reveal the kind.
        is_admin = hmac.compare_digest(given, keys.admin)
        is_api = _any_match(given, keys.api)
        if is_admin:
            return "admin"
        return "api" if is_api else None

    def _stat(self) -> tuple[int, int]:
        st = self.path.stat()
        return st.st_mtime_ns, st.st_size

    def _read(self) -> _Keys:
        try:
            return _parse(self.path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise KeyFileError(f"{self.path}: cannot read: {exc.strerror or exc}") from exc
        except yaml.YAMLError as exc:
            raise KeyFileError(f"{self.path}: {yaml_problem(exc)}") from exc
        except (UnicodeDecodeError, KeyFileError) as exc:
            raise KeyFileError(f"{self.path}: {exc}") from exc

    def _empty(self) -> bool:
        """An empty file, such as one created to be bind-mounted into a container, counts as missing."""
        return self.path.is_file() and not self.path.read_text(encoding="utf-8", errors="replace").strip()

    def _generate(self) -> None:
        api_key, admin_key = secrets.token_hex(16), secrets.token_hex(16)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = yaml.safe_dump({"api_key": api_key, "admin_key": admin_key}, sort_keys=False)
        # Created with owner-only permissions from the start, so the keys are never world-readable;
        # an existing empty file is written in place (a bind mount cannot be replaced).
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if self.path.exists() else os.O_EXCL), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        logger.info("No API keys were found, so new ones were written to %s", self.path)
        logger.info("Your API key is: %s", api_key)
        logger.info("Your admin key is: %s", admin_key)
        logger.info("If these keys get compromised, delete %s and restart the server.", self.path)


def require_api(request: Request) -> Permission:
    """Dependency for routes that need an API (or admin) key."""
    return request.app.state.keys.check_api(request.headers)


def require_admin(request: Request) -> Permission:
    """Dependency for routes that need the admin key."""
    return request.app.state.keys.check_admin(request.headers)


ApiPermission = Annotated[str, Depends(require_api)]
AdminPermission = Annotated[str, Depends(require_admin)]
