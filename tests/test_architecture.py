"""ARCHITECTURE.md's module table stays the package's: every module is listed, nothing listed is gone."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tabby_fixed"


def listed_modules(text: str) -> set[str]:
    """The paths in the first column of the module table."""
    return set(re.findall(r"^\| `([\w/]+\.py)` \|", text, flags=re.MULTILINE))


def test_every_module_is_listed_and_every_listed_module_exists():
    modules = {path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*.py")}
    listed = listed_modules((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    assert sorted(modules - listed) == [], "modules missing from ARCHITECTURE.md"
    assert sorted(listed - modules) == [], "ARCHITECTURE.md lists modules that are gone"


def test_the_table_is_read_row_by_row():
    assert listed_modules("| `a.py` | x |\n| `server/b.py` | y |\n`c.py` in prose\n") == {"a.py", "server/b.py"}
