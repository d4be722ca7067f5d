"""API keys: generation, the upstream header matrix for both levels, and hot reload."""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import os
import re
import stat
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from starlette.requests import Request

from tabby_fixed.auth import KeyFileError, KeyStore
from tabby_fixed.errors import ApiError
from tabby_fixed.server.state import ApiPermission, AppState, require_admin, require_api

API = "api-key-one"
API2 = "api-key-two"
ADMIN = "the-admin-key"


def write_tokens(path: Path, api_key: str | list[str], admin_key: str, bump_s: int = 0) -> None:
    """Writes the file and, when asked, moves its mtime forward so a reload cannot miss it."""
    before = path.stat().st_mtime_ns if path.exists() else 0
    path.write_text(yaml.safe_dump({"api_key": api_key, "admin_key": admin_key}), encoding="utf-8")
    bump_mtime(path, before, bump_s)


def bump_mtime(path: Path, before: int, bump_s: int) -> None:
    if bump_s:
        stamp = before + bump_s * 1_000_000_000
        os.utime(path, ns=(stamp, stamp))


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    path = tmp_path / "api_tokens.yml"
    write_tokens(path, [API, API2], ADMIN)
    return path


@pytest.fixture
def store(tokens: Path) -> KeyStore:
    return KeyStore(tokens)


def request_with(store: KeyStore, headers: dict[str, str]) -> Request:
    """A real Starlette request, its headers raw as an ASGI server hands them over."""
    app = SimpleNamespace(state=AppState({"keys": store}))
    raw = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]
    return Request({"type": "http", "app": app, "headers": raw})


def outcome(check, request: Request) -> str:
    """The permission granted, or the 401 message."""
    try:
        return check(request)
    except ApiError as exc:
        assert exc.status == 401
        assert exc.body()["error"]["type"] == "authentication_error"
        return exc.message


# --- generation ---------------------------------------------------------------------------------

def test_missing_file_gets_generated_keys(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger="tabby_fixed.auth")
    path = tmp_path / "config" / "api_tokens.yml"
    store = KeyStore(path)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert re.fullmatch(r"[0-9a-f]{32}", data["api_key"])
    assert re.fullmatch(r"[0-9a-f]{32}", data["admin_key"])
    assert data["api_key"] != data["admin_key"]
    if os.name == "posix":
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert store.permission({"x-api-key": data["api_key"]}) == "api"
    assert store.permission({"x-admin-key": data["admin_key"]}) == "admin"
    logged = caplog.text
    assert str(path) in logged and data["api_key"] in logged and data["admin_key"] in logged


def test_existing_file_is_left_alone(tokens):
    before = tokens.read_bytes()
    KeyStore(tokens)
    assert tokens.read_bytes() == before


def test_disabled_auth_creates_nothing_and_admits_everyone(tmp_path):
    path = tmp_path / "api_tokens.yml"
    store = KeyStore(path, disabled=True)
    assert not path.exists()
    for headers in ({}, {"x-api-key": "wrong"}, {"authorization": "Basic nope"}):
        assert outcome(require_api, request_with(store, headers)) == "admin"
        assert outcome(require_admin, request_with(store, headers)) == "admin"
        assert store.permission(headers) == "admin"
    assert store.reload_if_changed() is False
    asyncio.run(asyncio.wait_for(store.watch(0.01), 1))


@pytest.mark.parametrize("api_key", [API, [API], [API, API2]])
def test_api_key_as_string_or_list(tmp_path, api_key):
    path = tmp_path / "api_tokens.yml"
    write_tokens(path, api_key, ADMIN)
    store = KeyStore(path)
    for key in [api_key] if isinstance(api_key, str) else api_key:
        assert store.check_api({"x-api-key": key}) == "api"
    assert store.permission({"x-api-key": ADMIN}) == "admin"


@pytest.mark.parametrize("text", [
    "api_key: [\n",
    "- a\n- b\n",
    "admin_key: x\n",
    "api_key: k\n",
    "api_key: 12345\nadmin_key: x\n",
    "api_key: []\nadmin_key: x\n",
    "api_key: [k, 5]\nadmin_key: x\n",
    "api_key: ''\nadmin_key: x\n",
    "api_key: k\nadmin_key: [x]\n",
])
def test_unusable_file_at_startup_is_fatal(tmp_path, text):
    path = tmp_path / "api_tokens.yml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(KeyFileError, match=re.escape(str(path))):
        KeyStore(path)


# --- the header matrix --------------------------------------------------------------------------

MISSING_API, INVALID_API = "Please provide an API key", "Invalid API key"
MISSING_ADMIN, INVALID_ADMIN = "Please provide an admin key", "Invalid admin key"


@pytest.mark.parametrize(("headers", "api_level", "admin_level"), [
    ({}, MISSING_API, MISSING_ADMIN),
    # An API key, from each header.
    ({"x-api-key": API}, "api", MISSING_ADMIN),
    ({"x-api-key": API2}, "api", MISSING_ADMIN),
    ({"authorization": f"Bearer {API}"}, "api", INVALID_ADMIN),
    ({"authorization": f"bearer {API2}"}, "api", INVALID_ADMIN),
    ({"x-admin-key": API}, MISSING_API, INVALID_ADMIN),
    # The admin key, from each header: valid wherever an API key is, except x-api-key on admin routes.
    ({"x-api-key": ADMIN}, "admin", MISSING_ADMIN),
    ({"x-api-key": ADMIN, "authorization": "Bearer wrong"}, "admin", INVALID_ADMIN),
    ({"authorization": f"Bearer {ADMIN}"}, "admin", "admin"),
    ({"authorization": f"BEARER {ADMIN}"}, "admin", "admin"),
    ({"x-admin-key": ADMIN}, MISSING_API, "admin"),
    # Wrong keys.
    ({"x-api-key": "wrong"}, INVALID_API, MISSING_ADMIN),
    ({"x-admin-key": "wrong"}, MISSING_API, INVALID_ADMIN),
    ({"authorization": "Bearer wrong"}, INVALID_API, INVALID_ADMIN),
    ({"authorization": "Bearer "}, INVALID_API, INVALID_ADMIN),
    ({"x-api-key": "caf\xe9"}, INVALID_API, MISSING_ADMIN),
    ({"x-api-key": API[:-1]}, INVALID_API, MISSING_ADMIN),
    # Authorization that is not Bearer, even around a right key.
    ({"authorization": API}, INVALID_API, INVALID_ADMIN),
    ({"authorization": ADMIN}, INVALID_API, INVALID_ADMIN),
    ({"authorization": f"Basic {ADMIN}"}, INVALID_API, INVALID_ADMIN),
    ({"authorization": f"Bearer  {ADMIN}"}, INVALID_API, INVALID_ADMIN),
    # The dedicated header wins over Authorization: no fallback when it is present but wrong.
    ({"x-api-key": "wrong", "authorization": f"Bearer {API}"}, INVALID_API, INVALID_ADMIN),
    ({"x-admin-key": "wrong", "authorization": f"Bearer {ADMIN}"}, "admin", INVALID_ADMIN),
    ({"x-admin-key": ADMIN, "authorization": "Bearer wrong"}, INVALID_API, "admin"),
    ({"x-api-key": API, "x-admin-key": ADMIN}, "api", "admin"),
])
def test_auth_matrix(store, headers, api_level, admin_level):
    assert outcome(require_api, request_with(store, headers)) == api_level
    assert outcome(require_admin, request_with(store, headers)) == admin_level


def test_header_names_are_case_insensitive(store):
    request = request_with(store, {"X-Admin-Key": ADMIN, "X-API-Key": API})
    assert request.headers["x-admin-key"] == ADMIN
    assert require_api(request) == "api"
    assert require_admin(request) == "admin"


def test_every_candidate_key_is_compared(store, monkeypatch):
    calls = []

    def counting(a, b):
        calls.append((a, b))
        return hmac.compare_digest(a, b)

    monkeypatch.setattr("tabby_fixed.auth.hmac", SimpleNamespace(compare_digest=counting))
    for key in (ADMIN, API, API2, "wrong"):
        calls.clear()
        store.permission({"x-api-key": key})
        assert len(calls) == 3


def test_dependency_alias_points_at_the_check():
    assert ApiPermission.__metadata__[0].dependency is require_api


# --- permission() for listing routes ------------------------------------------------------------

@pytest.mark.parametrize(("headers", "expected"), [
    ({}, None),
    ({"x-admin-key": ADMIN}, "admin"),
    ({"x-admin-key": API}, "api"),
    ({"x-api-key": API}, "api"),
    ({"x-api-key": ADMIN}, "admin"),
    ({"authorization": f"Bearer {API2}"}, "api"),
    ({"authorization": f"bEaReR {ADMIN}"}, "admin"),
    ({"authorization": API}, "api"),
    ({"authorization": "Bearer wrong"}, None),
    ({"x-api-key": "wrong"}, None),
    # The first header present decides.
    ({"x-admin-key": "wrong", "x-api-key": API}, None),
    ({"x-admin-key": API, "authorization": f"Bearer {ADMIN}"}, "api"),
    ({"x-api-key": API, "authorization": f"Bearer {ADMIN}"}, "api"),
])
def test_permission(store, headers, expected):
    assert store.permission(headers) == expected
    assert store.permission(request_with(store, headers).headers) == expected


# --- hot reload ---------------------------------------------------------------------------------

def test_reload_picks_up_a_changed_file(store, tokens):
    assert store.reload_if_changed() is False
    write_tokens(tokens, "fresh-key", "fresh-admin", bump_s=5)
    assert store.reload_if_changed() is True
    assert store.permission({"x-api-key": "fresh-key"}) == "api"
    assert store.permission({"x-admin-key": "fresh-admin"}) == "admin"
    assert store.permission({"x-api-key": API}) is None
    assert store.permission({"x-admin-key": ADMIN}) is None
    assert store.reload_if_changed() is False


def test_reload_notices_a_size_change_with_the_same_mtime(store, tokens):
    before = tokens.stat().st_mtime_ns
    write_tokens(tokens, [API, API2, "third-key"], ADMIN)
    os.utime(tokens, ns=(before, before))
    assert store.reload_if_changed() is True
    assert store.permission({"x-api-key": "third-key"}) == "api"


@pytest.mark.parametrize("broken", [
    b"api_key: [\n",
    b"admin_key: only\n",
    b"api_key: 5\nadmin_key: x\n",
    b"api_key: k\nadmin_key: [x]\n",
    b"\xff\xfe not utf-8",
])
def test_broken_reload_keeps_the_old_keys(store, tokens, caplog, broken):
    caplog.set_level(logging.INFO, logger="tabby_fixed.auth")
    before = tokens.stat().st_mtime_ns
    tokens.write_bytes(broken)
    bump_mtime(tokens, before, 5)
    assert store.reload_if_changed() is False
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert store.permission({"x-api-key": API}) == "api"
    assert store.permission({"x-admin-key": ADMIN}) == "admin"
    # Reported once, not on every poll; a fixed file is picked up again.
    assert store.reload_if_changed() is False
    assert len(caplog.records) == 1
    write_tokens(tokens, "fixed-key", ADMIN, bump_s=10)
    assert store.reload_if_changed() is True
    assert store.permission({"x-api-key": "fixed-key"}) == "api"


def test_deleted_file_keeps_the_old_keys(store, tokens, caplog):
    tokens.unlink()
    assert store.reload_if_changed() is False
    assert store.reload_if_changed() is False
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
    assert store.permission({"x-api-key": API}) == "api"
    write_tokens(tokens, "back-key", ADMIN)
    assert store.reload_if_changed() is True
    assert store.permission({"x-api-key": "back-key"}) == "api"


def test_watch_reloads_in_the_background(store, tokens):
    async def scenario() -> str | None:
        task = asyncio.create_task(store.watch(interval=0.01))
        write_tokens(tokens, "watched-key", ADMIN, bump_s=5)
        try:
            for _ in range(200):
                await asyncio.sleep(0.01)
                if store.permission({"x-api-key": "watched-key"}):
                    break
            return store.permission({"x-api-key": "watched-key"})
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    assert asyncio.run(scenario()) == "api"


def test_an_empty_key_file_gets_keys_written_in_place(tmp_path):
    path = tmp_path / "api_tokens.yml"
    path.touch()  # what `touch api_tokens.yml` before a docker bind mount leaves
    store = KeyStore(path)
    data = yaml.safe_load(path.read_text())
    assert store.check_api({"x-api-key": data["api_key"]}) == "api"
