#!/usr/bin/env python3
"""Keep ``patches/`` applying to upstream TabbyAPI: ``rebase``, ``continue`` and ``check``.

    python scripts/upstream.py rebase [--ref REF] [--url URL]   # make rebase [REF=...] [UPSTREAM_URL=...]
    python scripts/upstream.py continue                         # make rebase-continue
    python scripts/upstream.py check                            # make upstream-check

``rebase`` fetches upstream (from the pinned repository, or UPSTREAM_URL: a mirror, a path) into
``upstream/src`` (a git checkout this repository ignores; it never holds upstream's code),
checks out REF (default: the pinned branch's head) and applies the
series with ``git am --3way``. On success it rewrites the patches with ``git format-patch``, so
their context matches the new commit, updates ``upstream/UPSTREAM.toml`` and runs the check. On a
conflict it stops, leaves the checkout mid-``git am``, and prints the patch, the files and the
commands to finish. ``check`` runs the tool-call conformance cases through upstream's patched
parser modules, importing only what those modules need (pydantic, and a stand-in for upstream's
logger, whose real module pulls in its whole runtime).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BRANCH = "tabby-fixed"


class Paths:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.patches = root / "patches"
        self.pin = root / "upstream" / "UPSTREAM.toml"
        self.checkout = root / "upstream" / "src"
        self.base = self.checkout / ".git" / "tabby-fixed-base"


def read_pin(path: Path) -> dict[str, str]:
    """The flat ``key = "value"`` pin file (no TOML library needed on Python 3.10)."""
    pin = {}
    for line in path.read_text().splitlines():
        found = re.fullmatch(r'\s*(\w+)\s*=\s*"([^"]*)"\s*', line)
        if found:
            pin[found.group(1)] = found.group(2)
    return pin


def write_pin(path: Path, pin: dict[str, str]) -> None:
    lines = ["# The upstream TabbyAPI commit that patches/ applies to; `make rebase` keeps it current."]
    lines += [f'{key} = "{pin[key]}"' for key in ("repository", "branch", "commit", "date")]
    path.write_text("\n".join(lines) + "\n")


def git(paths: Paths, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(paths.checkout), *args], capture_output=True, text=True, check=check)


def rebase(paths: Paths, url: str | None, ref: str | None) -> int:
    pin = read_pin(paths.pin)
    url = url or pin["repository"]
    ref = ref or pin["branch"]
    if not (paths.checkout / ".git").is_dir():
        paths.checkout.mkdir(parents=True, exist_ok=True)
        git(paths, "init", "--quiet")
    if (paths.checkout / ".git" / "rebase-apply").exists():
        git(paths, "am", "--abort", check=False)
    fetched = git(paths, "fetch", "--quiet", url, ref, check=False)
    if fetched.returncode:
        print(f"Could not fetch {ref} from {url}:\n{fetched.stderr.strip()}", file=sys.stderr)
        return 2
    base = git(paths, "rev-parse", "FETCH_HEAD^{commit}").stdout.strip()
    git(paths, "checkout", "--quiet", "--force", "-B", BRANCH, base)
    git(paths, "clean", "--quiet", "-fdx")
    paths.base.write_text(f"{base}\n{ref}\n")
    series = sorted(paths.patches.glob("*.patch"))
    applied = git(paths, "-c", "user.name=tabby-fixed", "-c", "user.email=tabby-fixed@localhost", "am", "--3way",
                  "--quiet", *map(str, series), check=False)
    if applied.returncode:
        return report_conflict(paths, series)
    return finish(paths)


def resume(paths: Paths) -> int:
    if not (paths.checkout / ".git" / "rebase-apply").exists():
        print("No rebase is in progress; run `make rebase`.", file=sys.stderr)
        return 2
    continued = git(paths, "-c", "user.name=tabby-fixed", "-c", "user.email=tabby-fixed@localhost", "am",
                    "--continue", check=False)
    if continued.returncode:
        return report_conflict(paths, sorted(paths.patches.glob("*.patch")))
    return finish(paths)


def report_conflict(paths: Paths, series: list[Path]) -> int:
    apply_dir = paths.checkout / ".git" / "rebase-apply"
    number = int((apply_dir / "next").read_text()) if (apply_dir / "next").exists() else 0
    patch = series[number - 1].name if 0 < number <= len(series) else "(unknown patch)"
    files = git(paths, "diff", "--name-only", "--diff-filter=U").stdout.split()
    if not files:  # no three-way merge was possible: name the files the patch touches
        shown = git(paths, "am", "--show-current-patch=diff", check=False).stdout
        files = sorted(set(re.findall(r"^diff --git a/(\S+) ", shown, re.MULTILINE)))
    base = paths.base.read_text().split()[0] if paths.base.exists() else "?"
    where = paths.checkout.relative_to(paths.root) if paths.checkout.is_relative_to(paths.root) else paths.checkout
    print(f"\nPatch {patch} does not apply to upstream {base[:12]}.", file=sys.stderr)
    print(f"Conflicting files, in {where}:", file=sys.stderr)
    for name in files:
        print(f"  {name}", file=sys.stderr)
    print(f"\nResolve them (edit, keeping both sides' intent), then:\n"
          f"  git -C {where} add {' '.join(files) or '<files>'}\n"
          f"  make rebase-continue\n"
          f"To give up and leave the series as it was:\n"
          f"  git -C {where} am --abort", file=sys.stderr)
    return 1


def finish(paths: Paths) -> int:
    base, ref = paths.base.read_text().split()[:2]
    for old in paths.patches.glob("*.patch"):
        old.unlink()
    git(paths, "format-patch", "--quiet", "--no-signature", "--zero-commit", "-N", "-o", str(paths.patches),
        f"{base}..HEAD")
    pin = read_pin(paths.pin)
    date = git(paths, "show", "-s", "--format=%cI", base).stdout.strip()
    is_commit = re.fullmatch(r"[0-9a-f]{7,40}", ref) is not None
    write_pin(paths.pin, {"repository": pin["repository"], "branch": pin["branch"] if is_commit else ref,
                          "commit": base, "date": date})
    count = len(list(paths.patches.glob("*.patch")))
    print(f"Applied {count} patches to {base[:12]}; patches/ and upstream/UPSTREAM.toml are refreshed.")
    return check(paths)


def check(paths: Paths) -> int:
    """Run the conformance cases in a fresh interpreter, so upstream's modules load cleanly."""
    return subprocess.run([sys.executable, __file__, "check-inner", "--root", str(paths.root)]).returncode


def _package(name: str, folder: Path) -> None:
    module = types.ModuleType(name)
    module.__path__ = [str(folder)]
    sys.modules[name] = module


def check_inner(paths: Paths) -> int:
    from tabby_fixed.toolcalls.conformance import CASES, TOOLS, mismatch

    source = paths.checkout
    sys.path.insert(0, str(source))
    quiet = types.SimpleNamespace(**{level: lambda *a, **k: None for level in ("debug", "info", "warning", "error")})
    _package("common", source / "common")
    sys.modules["common.logger"] = types.SimpleNamespace(xlogger=quiet)
    for name in ("endpoints", "endpoints.OAI", "endpoints.OAI.types", "endpoints.OAI.utils",
                 "endpoints.OAI.utils.toolcall_formats"):
        _package(name, source.joinpath(*name.split(".")))
    from endpoints.OAI.utils import tools as dispatch  # type: ignore[import-not-found]

    failures = 0
    for case in CASES:
        try:
            calls = dispatch.parse_toolcalls(case.text, case.tool_format, tools=TOOLS)
        except TypeError as error:  # an unpatched dispatcher takes no tools
            calls, problem = [], f"the dispatcher does not take the request's tools ({error})"
        else:
            problem = mismatch(case, [(c.function.name, c.function.arguments) for c in calls])
        failures += problem is not None
        print(f"{'PASS' if problem is None else 'FAIL'}  {case.name}" + (f": {problem}" if problem else ""))
    print(f"{len(CASES) - failures} of {len(CASES)} conformance cases pass through upstream's patched parsers.")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description="Keep patches/ applying to upstream TabbyAPI.")
    parser.add_argument("command", choices=["rebase", "continue", "check", "check-inner"])
    parser.add_argument("--ref", default=None, help="upstream branch or commit (default: the pinned branch)")
    parser.add_argument("--url", default=None, help="upstream git URL or path (default: the pinned repository)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the tabby-fixed checkout (default: this one)")
    options = parser.parse_args()
    paths = Paths(options.root.resolve())
    if options.command == "rebase":
        return rebase(paths, options.url or None, options.ref or None)
    if options.command == "continue":
        return resume(paths)
    if options.command == "check":
        return check(paths)
    return check_inner(paths)


if __name__ == "__main__":
    sys.exit(main())
