"""The pipeline below ``server/`` knows nothing of HTTP: no module outside ``server/`` imports
fastapi, starlette or the server's modules (its request models included). Only the command line,
which starts the server or exports its OpenAPI document, sits above it."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "tabby_fixed"
HTTP = ("fastapi", "starlette", "tabby_fixed.server")
ABOVE_THE_SERVER = {"cli.py", "exports.py"}


def imported_modules(source: str, where: str) -> set[str]:
    """Every module (and imported name) the source of ``tabby_fixed/<where>`` imports, relative
    imports resolved against its package."""
    package = ("tabby_fixed", *Path(where).parent.parts)
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else ()
            module = ".".join([*base, *([node.module] if node.module else [])])
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def is_http(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in HTTP)


def test_nothing_below_the_server_imports_http_or_the_server():
    offenders = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if where.startswith("server/") or where in ABOVE_THE_SERVER:
            continue
        http = sorted(m for m in imported_modules(path.read_text(encoding="utf-8"), where) if is_http(m))
        if http:
            offenders[where] = http
    assert offenders == {}


def test_the_check_sees_every_way_of_importing():
    assert is_http("fastapi.responses") and is_http("starlette") and not is_http("fastapi_extra")
    found = imported_modules("from .server.requests import ChatMessage\n", "chat.py")
    assert "tabby_fixed.server.requests.ChatMessage" in found
    assert "tabby_fixed.server" in imported_modules("from ..server import requests\n", "engine/base.py")
    assert "tabby_fixed.server.requests" in imported_modules("from .. import server\nimport x\n"
                                                             "from ..server import requests\n", "engine/base.py")
    assert "fastapi" in imported_modules("def f():\n    import fastapi\n", "engine/base.py")
