"""Download a Hugging Face repository into ``model_dir`` (or ``lora_dir``), as upstream's
``POST /v1/download`` and ``download`` subcommand do.

The file list comes from ``huggingface_hub`` (``HfApi.list_repo_tree``), filtered by the
``include`` and ``exclude`` globs; each file is streamed from its ``resolve`` URL. Files land in a
hidden folder next to the target, which is renamed into place only when every file is complete,
so a failed or cancelled download leaves nothing half-written under a model name. ``HF_ENDPOINT``
(read at each download) points at a mirror instead of huggingface.co.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from .config import TabbyConfig
from .errors import ApiError
from .names import plain_name

#: ``(path in the repo, bytes so far, its size)`` after each chunk.
Progress = Callable[[str, int, int], None]


class DownloadError(RuntimeError):
    """The download could not finish; nothing was left in the target folder."""


class DownloadCancelled(DownloadError):
    pass


@dataclass(frozen=True)
class DownloadSpec:
    """Upstream's download request: which repository, where to, and which of its files."""

    repo_id: str
    repo_type: str = "model"  # "lora" puts it in lora_dir; it is a model repository either way
    folder_name: str | None = None
    revision: str | None = None
    token: str | None = None
    include: list[str] = field(default_factory=lambda: ["*"])
    exclude: list[str] = field(default_factory=list)
    chunk_limit: int | None = None  # bytes per read; None: 2 MB
    timeout: float | None = None  # seconds per network read; None: no limit

    def wants(self, path: str) -> bool:
        return any(fnmatch.fnmatch(path, pattern) for pattern in self.include) and not any(
            fnmatch.fnmatch(path, pattern) for pattern in self.exclude)


def target_folder(config: TabbyConfig, spec: DownloadSpec) -> Path:
    """``model_dir/<folder_name or the repo's name>``; an existing folder is never overwritten."""
    if spec.repo_type not in ("model", "lora"):
        raise ApiError(400, f"repo_type must be 'model' or 'lora', not {spec.repo_type!r}.", param="repo_type")
    base = config.lora.lora_dir if spec.repo_type == "lora" else config.model.model_dir
    name = plain_name(spec.folder_name or spec.repo_id.rstrip("/").split("/")[-1], "folder_name")
    target = config.resolve(base) / name
    if target.exists():
        raise ApiError(400, f"{target} already exists; choose another folder_name or remove it.",
                       param="folder_name")
    return target


def download(config: TabbyConfig, spec: DownloadSpec, progress: Progress | None = None,
             cancel: threading.Event | None = None) -> Path:
    """Download the repository's wanted files into their folder (blocking) and return its path."""
    target = target_folder(config, spec)
    endpoint = os.environ.get("HF_ENDPOINT") or None
    files = _listing(spec, endpoint)
    if not files:
        raise DownloadError(f"No file in {spec.repo_id} matches include {spec.include} and exclude {spec.exclude}.")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.parent / f".{target.name}.partial-{uuid.uuid4().hex[:8]}"
    try:
        with httpx.Client(follow_redirects=True, timeout=spec.timeout,
                          headers={"authorization": f"Bearer {spec.token}"} if spec.token else {}) as client:
            for path, size in files:
                _fetch(client, _url(spec, path, endpoint), _inside(partial, path), path, size, spec, progress,
                       cancel)
        partial.rename(target)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target


def _listing(spec: DownloadSpec, endpoint: str | None) -> list[tuple[str, int]]:
    from huggingface_hub import HfApi
    from huggingface_hub.hf_api import RepoFile

    try:
        tree = HfApi(endpoint=endpoint).list_repo_tree(spec.repo_id, recursive=True, revision=spec.revision,
                                                       token=spec.token or False)
        return [(entry.path, entry.size) for entry in tree if isinstance(entry, RepoFile) and spec.wants(entry.path)]
    except Exception as error:  # not found, gated, no network: the library says which
        raise DownloadError(f"Could not list {spec.repo_id}: {_first_line(error)}") from error


def _url(spec: DownloadSpec, path: str, endpoint: str | None) -> str:
    from huggingface_hub import hf_hub_url

    return hf_hub_url(spec.repo_id, path, revision=spec.revision, endpoint=endpoint)


def _inside(folder: Path, path: str) -> Path:
    """Where a repository file goes; a path that would leave the folder is refused."""
    destination = (folder / path).resolve()
    if not destination.is_relative_to(folder.resolve()):
        raise DownloadError(f"The repository lists a file outside its folder: {path!r}.")
    return destination


def _fetch(client: httpx.Client, url: str, destination: Path, path: str, size: int, spec: DownloadSpec,
           progress: Progress | None, cancel: threading.Event | None) -> None:
    destination.parent.mkdir(parents=True, exist_ok=True)
    done = 0
    try:
        with client.stream("GET", url) as response, destination.open("wb") as out:
            if response.status_code != 200:
                response.read()
                raise DownloadError(f"{path}: HTTP {response.status_code}: {response.text[:200]}")
            for chunk in response.iter_bytes(spec.chunk_limit or 2_000_000):
                if cancel is not None and cancel.is_set():
                    raise DownloadCancelled("The download was cancelled; its files were removed.")
                out.write(chunk)
                done += len(chunk)
                if progress:
                    progress(path, done, size)
    except httpx.HTTPError as error:
        raise DownloadError(f"{path}: {type(error).__name__}: {error}") from error
    if done != size:
        raise DownloadError(f"{path}: got {done} bytes, the repository lists {size}.")


def _first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
