#!/usr/bin/env python3
"""Keep ``patches/`` applying to upstream TabbyAPI, without ever losing a patch.

    python scripts/upstream.py rebase [--ref REF] [--url URL]   # make rebase [REF=...] [UPSTREAM_URL=...]
    python scripts/upstream.py continue                         # make rebase-continue
    python scripts/upstream.py skip                             # make rebase-skip
    python scripts/upstream.py check [--url URL]                # make upstream-check

``rebase`` fetches upstream (the pinned repository, or URL: a mirror, a path) into ``upstream/src``
(ignored by git), checks out REF (default: the pinned branch's head) and applies the series with
``git am --3way``. When every patch applied, it runs the check against the new commit, and only
when the series kept its length (less the patches dropped on purpose with ``skip``) and the check
passed does it rewrite ``patches/`` with ``git format-patch`` and the pin. Otherwise nothing under
``patches/`` or ``upstream/UPSTREAM.toml`` changes. On a conflict it stops mid-``git am`` and
prints git's own message, the files with what happened to each, and the commands to go on.

``check`` applies the committed series to the pinned commit and runs ``scripts/upstream_check.py``:
upstream's real endpoint, stock and patched side by side, and upstream's own tests. ``--check CMD``
(``UPSTREAM_CHECK=...`` in make) replaces that check with a shell command run in the checkout.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BRANCH = "tabby-fixed"
IDENTITY = ("-c", "user.name=tabby-fixed", "-c", "user.email=tabby-fixed@users.noreply.github.com")


class Paths:
    def __init__(self, root: Path, venv: Path | None = None) -> None:
        self.root = root
        self.patches = root / "patches"
        self.pin = root / "upstream" / "UPSTREAM.toml"
        self.checkout = root / "upstream" / "src"
        self.stock = root / "upstream" / "stock"
        self.logs = root / "upstream" / "logs"
        self.venv = (venv or root / ".upstream-venv").resolve()
        self.state = self.checkout / ".git" / "tabby-fixed-rebase.json"
        self.in_am = self.checkout / ".git" / "rebase-apply"

    def shown(self, path: Path) -> str:
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)


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
    return subprocess.run(["git", "-C", str(paths.checkout), *IDENTITY, *args], capture_output=True, text=True,
                          check=check)


def subject(patch: Path) -> str:
    """A patch file's subject line, unfolded and without ``[PATCH]``."""
    header = patch.read_text().split("\n\n", 1)[0]
    found = re.search(r"^Subject: (?:\[PATCH[^\]]*\] )?(.*(?:\n .*)*)", header, re.MULTILINE)
    return re.sub(r"\n ", " ", found.group(1)) if found else patch.name


def checkout_upstream(paths: Paths, url: str, ref: str) -> str | None:
    """``upstream/src`` at REF on a fresh branch; its commit, or None (reported) when fetching failed."""
    if not (paths.checkout / ".git").is_dir():
        paths.checkout.mkdir(parents=True, exist_ok=True)
        git(paths, "init", "--quiet")
    if paths.in_am.exists():
        git(paths, "am", "--abort", check=False)
    known = git(paths, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    if re.fullmatch(r"[0-9a-f]{40}", ref) and known.returncode == 0:
        base = known.stdout.strip()  # a pinned commit already here: no network needed
    else:
        fetched = git(paths, "fetch", "--quiet", url, ref, check=False)
        if fetched.returncode:
            print(f"Could not fetch {ref} from {url}:\n{fetched.stderr.strip()}", file=sys.stderr)
            return None
        base = git(paths, "rev-parse", "FETCH_HEAD^{commit}").stdout.strip()
    git(paths, "checkout", "--quiet", "--force", "-B", BRANCH, base)
    git(paths, "clean", "--quiet", "-fdx")
    return base


def apply_series(paths: Paths) -> subprocess.CompletedProcess[str]:
    return git(paths, "am", "--3way", *map(str, sorted(paths.patches.glob("*.patch"))), check=False)


def rebase(paths: Paths, url: str | None, ref: str | None, check_command: str | None) -> int:
    pin = read_pin(paths.pin)
    url, ref = url or pin["repository"], ref or pin["branch"]
    base = checkout_upstream(paths, url, ref)
    if base is None:
        return 2
    series = [p.name for p in sorted(paths.patches.glob("*.patch"))]
    paths.state.write_text(json.dumps({"base": base, "ref": ref, "series": series, "skipped": []}))
    applied = apply_series(paths)
    if applied.returncode:
        return report_conflict(paths, applied)
    return finish(paths, check_command)


def rebase_in_progress(paths: Paths) -> bool:
    if paths.in_am.exists() and paths.state.exists():
        return True
    print("No rebase is in progress; run `make rebase`.", file=sys.stderr)
    return False


def go_on(paths: Paths, check_command: str | None, am_option: str) -> int:
    """``git am --continue`` or ``--skip``, then the next conflict's report or the finish."""
    result = git(paths, "am", am_option, check=False)
    if result.returncode:
        return report_conflict(paths, result)
    return finish(paths, check_command)


def resume(paths: Paths, check_command: str | None) -> int:
    return go_on(paths, check_command, "--continue") if rebase_in_progress(paths) else 2


def skip(paths: Paths, check_command: str | None) -> int:
    """Drop the patch that stopped the rebase, saying which, and go on with the rest."""
    if not rebase_in_progress(paths):
        return 2
    state = json.loads(paths.state.read_text())
    name = current_patch(paths, state)
    print(f"Dropping {name}: \"{subject(paths.patches / name)}\".\n"
          f"When the rebase finishes, patches/ will no longer hold it (git history keeps it).")
    state["skipped"].append(name)
    paths.state.write_text(json.dumps(state))
    return go_on(paths, check_command, "--skip")


def current_patch(paths: Paths, state: dict) -> str:
    number = int((paths.in_am / "next").read_text())
    return state["series"][number - 1]


def _conflict_lines(paths: Paths, files_in_patch: list[str]) -> tuple[list[str], list[str], list[str]]:
    """(a line per file saying what happened, files to `git add`, files to `git rm`)."""
    status = {line[3:]: line[:2] for line in git(paths, "status", "--porcelain").stdout.splitlines()}
    lines, to_add, to_remove = [], [], []
    unmerged = [name for name, code in status.items() if "U" in code or code in ("AA", "DD")]
    for name in unmerged or files_in_patch:
        code, exists = status.get(name, ""), (paths.checkout / name).exists()
        if code == "DU":
            lines.append(f"  {name}: deleted upstream, changed by the patch"
                         + (" (the patch's version is in the tree)" if exists else ""))
            to_remove.append(name)
            if exists:
                to_add.append(name)
        elif code == "UD":
            lines.append(f"  {name}: deleted by the patch, changed upstream")
            to_remove.append(name)
        elif not exists:
            lines.append(f"  {name}: not in upstream at this commit")
        else:
            lines.append(f"  {name}: " + ("both changed; conflict markers in the file" if code
                                          else "the patch's hunks did not apply (no merge was possible)"))
            to_add.append(name)
    return lines, to_add, to_remove


def report_conflict(paths: Paths, result: subprocess.CompletedProcess[str]) -> int:
    where = paths.shown(paths.checkout)
    state = json.loads(paths.state.read_text())
    message = (result.stdout + result.stderr).strip()
    if not paths.in_am.exists():  # git am gave up entirely
        print(f"git am failed in {where}:\n{message}", file=sys.stderr)
        return 1
    name = current_patch(paths, state)
    shown = git(paths, "am", "--show-current-patch=diff", check=False).stdout
    in_patch = sorted(set(re.findall(r"^diff --git a/(\S+) ", shown, re.MULTILINE)))
    print(f"\nPatch {name} does not apply to upstream {state['base'][:12]}. git says:", file=sys.stderr)
    print("\n".join("  | " + line for line in message.splitlines()), file=sys.stderr)
    lines, to_add, to_remove = _conflict_lines(paths, in_patch)
    staged_nothing = git(paths, "diff", "--cached", "--quiet", check=False).returncode == 0
    if not lines or (staged_nothing and "No changes" in message):
        print(f"\nNothing is left of this patch after the resolution (upstream may already have its change).\n"
              f"  make rebase-skip      # drop {name} from the series\n"
              f"To give up and leave patches/ as they are:\n  git -C {where} am --abort", file=sys.stderr)
        return 1
    print(f"\nFiles, in {where}:", *lines, sep="\n", file=sys.stderr)
    if "no merge was possible" in "".join(lines):
        print(f"\nNo merge was possible, so the tree is as upstream has it: make the patch's changes by hand\n"
              f"(git -C {where} am --show-current-patch=diff shows them; git -C {where} apply --reject\n"
              f"applies the hunks that still fit).", file=sys.stderr)
    print("\nResolve them (keeping both sides' intent), then:", file=sys.stderr)
    if to_add:
        print(f"  git -C {where} add {' '.join(to_add)}", file=sys.stderr)
    if to_remove:
        print(f"  git -C {where} rm {' '.join(to_remove)}   # instead, for a file that should stay deleted",
              file=sys.stderr)
    print(f"  make rebase-continue\n"
          f"Or drop this patch from the series:\n  make rebase-skip\n"
          f"Or give up and leave patches/ as they are:\n  git -C {where} am --abort", file=sys.stderr)
    return 1


def finish(paths: Paths, check_command: str | None) -> int:
    """Rewrite patches/ and the pin, but only for a whole series that passed the check."""
    state = json.loads(paths.state.read_text())
    base, ref, series, skipped = state["base"], state["ref"], state["series"], state["skipped"]
    kept = [name for name in series if name not in skipped]
    applied = git(paths, "log", "--reverse", "--format=%s", f"{base}..HEAD").stdout.splitlines()
    missing = [name for name in kept if subject(paths.patches / name) not in applied]
    if len(applied) != len(kept) or missing:
        print(f"The series had {len(series)} patches ({len(skipped)} dropped with rebase-skip), but "
              f"{len(applied)} are on upstream {base[:12]}. Not applied, though not skipped:", file=sys.stderr)
        print(*(f"  {name}" for name in missing), sep="\n", file=sys.stderr)
        print("patches/ and upstream/UPSTREAM.toml are unchanged. If upstream already has such a patch, "
              "remove it from patches/ yourself and run `make rebase` again.", file=sys.stderr)
        return 1
    status = run_check(paths, base, check_command)
    if status:
        print(f"The check failed on the rebased series; patches/ and upstream/UPSTREAM.toml are unchanged "
              f"(the rebased checkout is in {paths.shown(paths.checkout)}).", file=sys.stderr)
        return status
    with tempfile.TemporaryDirectory() as fresh:
        git(paths, "format-patch", "--quiet", "--no-signature", "--zero-commit", "-N", "-o", fresh, f"{base}..HEAD")
        for old in paths.patches.glob("*.patch"):
            old.unlink()
        for new in sorted(Path(fresh).glob("*.patch")):
            shutil.copy(new, paths.patches / new.name)
    pin = read_pin(paths.pin)
    date = git(paths, "show", "-s", "--format=%cI", base).stdout.strip()
    is_commit = re.fullmatch(r"[0-9a-f]{7,40}", ref) is not None
    write_pin(paths.pin, {"repository": pin["repository"], "branch": pin["branch"] if is_commit else ref,
                          "commit": base, "date": date})
    paths.state.unlink()
    print(f"Applied {len(applied)} patches to {base[:12]}"
          + (f" (dropped: {', '.join(skipped)})" if skipped else "")
          + "; patches/ and upstream/UPSTREAM.toml are refreshed.")
    return 0


def run_check(paths: Paths, base: str, check_command: str | None) -> int:
    """The given command in the checkout, or the real check: stock ``base`` against the patched checkout."""
    if check_command:
        return subprocess.run(check_command, shell=True, cwd=paths.checkout).returncode
    import upstream_check

    git(paths, "worktree", "prune")
    if not (paths.stock / ".git").exists():
        git(paths, "worktree", "add", "--force", "--detach", str(paths.stock), base)
    subprocess.run(["git", "-C", str(paths.stock), "checkout", "--quiet", "--force", "--detach", base], check=True)
    subprocess.run(["git", "-C", str(paths.stock), "clean", "--quiet", "-fdx"], check=True)
    return upstream_check.check(paths.stock, paths.checkout, paths.venv, paths.logs)


def check(paths: Paths, url: str | None, check_command: str | None) -> int:
    """The committed series on the pinned commit, checked."""
    if paths.in_am.exists():
        print(f"A rebase is in progress in {paths.shown(paths.checkout)}; finish it (make rebase-continue) "
              "or abort it before checking.", file=sys.stderr)
        return 2
    pin = read_pin(paths.pin)
    base = checkout_upstream(paths, url or pin["repository"], pin["commit"])
    if base is None:
        return 2
    applied = apply_series(paths)
    if applied.returncode:
        git(paths, "am", "--abort", check=False)
        print(f"The series does not apply to the pinned commit {base[:12]}; run `make rebase`.\n"
              f"{(applied.stdout + applied.stderr).strip()}", file=sys.stderr)
        return 1
    print(f"Applied {len(list(paths.patches.glob('*.patch')))} patches to the pinned commit {base[:12]}.")
    return run_check(paths, base, check_command)


def main() -> int:
    parser = argparse.ArgumentParser(description="Keep patches/ applying to upstream TabbyAPI.")
    parser.add_argument("command", choices=["rebase", "continue", "skip", "check"])
    parser.add_argument("--ref", default=None, help="upstream branch or commit (default: the pinned branch)")
    parser.add_argument("--url", default=None, help="upstream git URL or path (default: the pinned repository)")
    parser.add_argument("--check", default=None, help="a shell command to run in the checkout instead of the check")
    parser.add_argument("--venv", type=Path, default=None, help="upstream's virtual environment")
    parser.add_argument("--root", type=Path, default=ROOT, help="the tabby-fixed checkout (default: this one)")
    options = parser.parse_args()
    paths = Paths(options.root.resolve(), options.venv)
    if options.command == "rebase":
        return rebase(paths, options.url, options.ref, options.check)
    if options.command == "continue":
        return resume(paths, options.check)
    if options.command == "skip":
        return skip(paths, options.check)
    return check(paths, options.url, options.check)


if __name__ == "__main__":
    sys.exit(main())
