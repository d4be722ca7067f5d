"""Every route upstream TabbyAPI serves is served here too (the list is read from its source)."""

from __future__ import annotations

from pathlib import Path

from starlette.routing import Match

from tabby_fixed.config import load_config
from tabby_fixed.server.app import create_app

UPSTREAM = Path(__file__).with_name("upstream_routes.txt")


def upstream_routes() -> set[str]:
    lines = UPSTREAM.read_text(encoding="utf-8").splitlines()
    return {line for line in lines if line and not line.startswith("#")}


def served_routes(*servers: str, routes: set[str] | None = None) -> set[str]:
    """Which of ``routes`` (default: upstream's) the app built for these API families answers,
    asked the way Starlette routes a request (a full match: path and method)."""
    config = load_config(["--disable-auth", "true", "--api-servers", *servers], environ={}, cwd=Path.cwd())
    app = create_app(config)

    def served(route: str) -> bool:
        method, path = route.split()
        scope = {"type": "http", "method": method, "path": path, "root_path": "", "headers": []}
        return any(candidate.matches(scope)[0] == Match.FULL for candidate in app.router.routes)

    return {route for route in (upstream_routes() if routes is None else routes) if served(route)}


def test_the_fixture_holds_upstreams_56_routes():
    routes = upstream_routes()
    assert len(routes) == 56
    assert sum(route.split()[1].startswith("/api/") for route in routes) == 23


def test_every_upstream_route_is_served_with_both_api_servers():
    assert upstream_routes() - served_routes("OAI", "Kobold") == set()


def test_api_servers_chooses_the_families():
    oai_only = served_routes("OAI")
    kobold_only = served_routes("Kobold")
    assert "POST /v1/chat/completions" in oai_only and "POST /api/v1/generate" not in oai_only
    assert "POST /api/v1/generate" in kobold_only and "POST /v1/chat/completions" not in kobold_only
    assert "GET /v1/models" in kobold_only  # the core routes are always served, as upstream
