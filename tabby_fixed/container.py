"""``tabby-fixed-container``: the image's entry point, so upstream TabbyAPI's compose file works unchanged.

It accepts upstream's command line (``main.py`` and its flags; upstream's image runs
``python3 main.py``), and when started as root it does the two things that need root, then
drops to an unprivileged user for good:

- makes the cache folders (``TRITON_CACHE_DIR``, ``EXLLAMAV3_TUNE_CACHE``, ``HOME``) and the
  working folder (where ``api_tokens.yml`` is written when none is mounted) belong to that user;
- switches to uid ``PUID`` and gid ``PGID`` (default 1000).

Started as another user (compose's ``user:``), it only creates the cache folders. Then, as the
user the server will run as, it checks the files a compose file mounts (``config.yml``, ``api_tokens.yml``)
and stops with one line naming the path and the fix when Docker made a directory where a file
was meant to be mounted or the user cannot read it. Everything else is ``tabby-fixed serve``'s.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterable
from pathlib import Path

#: Leading words of upstream's command line that name its launcher, not a flag.
_UPSTREAM_LAUNCHER = ("python3", "python", "main.py", "/app/main.py")
_CACHE_VARIABLES = ("TRITON_CACHE_DIR", "EXLLAMAV3_TUNE_CACHE", "HOME")


class MountError(Exception):
    """A mounted path the server cannot use; the message names it and the fix, on one line."""


def server_arguments(argv: Iterable[str]) -> list[str]:
    """``tabby-fixed`` arguments from the container's command: upstream's ``[python3] main.py`` dropped."""
    args = list(argv)
    while args and args[0] in _UPSTREAM_LAUNCHER:
        args.pop(0)
    return args


def _own(path: Path, uid: int, gid: int) -> None:
    """Give path and everything below it to uid:gid, touching only what another user owns."""
    for folder, dirs, files in os.walk(path):
        for name in (".", *dirs, *files):
            entry = os.path.join(folder, name)
            info = os.lstat(entry)
            if (info.st_uid, info.st_gid) != (uid, gid):
                os.lchown(entry, uid, gid)


def make_cache_dirs() -> list[Path]:
    """The cache folders the environment names, created when missing."""
    folders = [Path(value) for value in map(os.environ.get, _CACHE_VARIABLES) if value and value != "/"]
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
    return folders


def prepare_as_root(uid: int, gid: int, workdir: Path) -> None:
    """Make the cache folders and the working folder usable by uid:gid; the working folder is not
    walked (it holds the mounted models), only the folder itself changes hands."""
    for folder in make_cache_dirs():
        _own(folder, uid, gid)
    info = workdir.stat()
    if (info.st_uid, info.st_gid) != (uid, gid):
        os.chown(workdir, uid, gid)


def drop_privileges(uid: int, gid: int) -> None:
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)


def _flag(args: list[str], name: str) -> str | None:
    for index, arg in enumerate(args):
        if arg == name and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def _who() -> str:
    return f"uid {os.getuid()} (gid {os.getgid()})"


def check_mounts(args: list[str], workdir: Path) -> None:
    """Raise MountError for a config or key file the server, running as this user, could not use."""
    named = _flag(args, "--config")
    config = workdir / named if named else workdir / "config.yml"
    keys = config.parent / "api_tokens.yml"
    for path, what in ((config, "config file"), (keys, "key file")):
        if not path.exists():
            continue
        if path.is_dir():
            raise MountError(
                f"{path} is a directory, not a {what}: Docker makes one when the host file to mount does not exist. "
                f"Remove that directory on the host, create the file (an empty api_tokens.yml gets new keys; "
                f"config_sample.yml is a template for config.yml) and start again")
        if not os.access(path, os.R_OK):
            _refuse(path, "read", what)
        if path == keys and path.stat().st_size == 0 and not os.access(path, os.W_OK):
            _refuse(path, "write (it is empty, so new keys are written to it)", what)


def _refuse(path: Path, action: str, what: str) -> None:
    info = path.stat()
    raise MountError(
        f"the server runs as {_who()} and cannot {action} the {what} {path} (owner uid {info.st_uid}, mode "
        f"{stat.S_IMODE(info.st_mode):o}); on the host run chown {os.getuid()}:{os.getgid()} on it or chmod it "
        f"readable, or set PUID and PGID to its owner")


def main(argv: list[str] | None = None) -> int:
    args = server_arguments(sys.argv[1:] if argv is None else argv)
    workdir = Path.cwd()
    try:
        if os.geteuid() == 0:
            uid, gid = int(os.environ.get("PUID", "1000")), int(os.environ.get("PGID", "1000"))
            prepare_as_root(uid, gid, workdir)
            if uid != 0:  # PUID=0 keeps root, for hosts whose files only root may read
                drop_privileges(uid, gid)
        else:  # started as a user already (compose's `user:`): the caches must be theirs to write
            make_cache_dirs()
        check_mounts(args, workdir)
    except (MountError, ValueError, OSError) as error:
        print(f"tabby-fixed: {error}", file=sys.stderr)
        return 1
    os.execvp("tabby-fixed", ["tabby-fixed", *args])
    return 1  # not reached: exec replaces this process
