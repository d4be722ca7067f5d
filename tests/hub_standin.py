"""A stand-in for the Hugging Face Hub's two download routes, so downloads are tested without the
internet: the tree listing ``huggingface_hub`` reads, and the ``resolve`` URLs files come from.

Its answers copy the Hub's: file and directory entries with ``type``, ``path``, ``size`` and
``oid``; 404 with ``X-Error-Code: RepoNotFound`` / ``RevisionNotFound``; 401 for a private
repository without its token; large files redirected to another host path, as the Hub sends
them to its CDN.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse


@dataclass
class Repo:
    revisions: dict[str, dict[str, bytes]]  # revision -> path -> content
    token: str | None = None  # private: this token is needed
    short: set[str] = field(default_factory=set)  # paths served shorter than listed (a broken transfer)
    slow: bool = False  # files trickle in, 64 KiB every 50 ms


@dataclass
class Hub:
    repos: dict[str, Repo]
    requests: list[str] = field(default_factory=list)

    def app(self) -> FastAPI:
        app = FastAPI()

        def refused(request: Request, repo_id: str, revision: str) -> Response | None:
            repo = self.repos.get(repo_id)
            if repo is None or (repo.token and request.headers.get("authorization") != f"Bearer {repo.token}"):
                status = 404 if repo is None or not request.headers.get("authorization") else 401
                return JSONResponse({"error": "Repository Not Found"}, status_code=status if repo else 404,
                                    headers={"X-Error-Code": "RepoNotFound"})
            if revision not in repo.revisions:
                return JSONResponse({"error": f"Invalid rev id: {revision}"}, status_code=404,
                                    headers={"X-Error-Code": "RevisionNotFound"})
            return None

        @app.get("/api/models/{owner}/{name}/tree/{revision}")
        async def tree(request: Request, owner: str, name: str, revision: str) -> Response:
            repo_id = f"{owner}/{name}"
            self.requests.append(f"tree {repo_id}@{revision}")
            if (answer := refused(request, repo_id, revision)) is not None:
                return answer
            files = self.repos[repo_id].revisions[revision]
            folders = sorted({path.rsplit("/", 1)[0] for path in files if "/" in path})
            return JSONResponse(
                [{"type": "directory", "path": folder, "oid": hashlib.sha1(folder.encode()).hexdigest()}
                 for folder in folders]
                + [{"type": "file", "path": path, "size": len(content), "oid": hashlib.sha1(content).hexdigest()}
                   for path, content in files.items()])

        @app.get("/{owner}/{name}/resolve/{revision}/{path:path}")
        async def resolve(request: Request, owner: str, name: str, revision: str, path: str) -> Response:
            repo_id = f"{owner}/{name}"
            self.requests.append(f"get {repo_id}@{revision}/{path}")
            if (answer := refused(request, repo_id, revision)) is not None:
                return answer
            if path.endswith(".safetensors"):
                return RedirectResponse(f"/cdn/{repo_id}/{revision}/{path}", status_code=302)
            return self._content(repo_id, revision, path)

        @app.get("/cdn/{owner}/{name}/{revision}/{path:path}")
        async def cdn(owner: str, name: str, revision: str, path: str) -> Response:
            return self._content(f"{owner}/{name}", revision, path)

        return app

    def _content(self, repo_id: str, revision: str, path: str) -> Response:
        repo = self.repos[repo_id]
        content = repo.revisions[revision].get(path)
        if content is None:
            return JSONResponse({"error": "Entry not found"}, status_code=404,
                                headers={"X-Error-Code": "EntryNotFound"})
        if repo.slow:
            async def trickle() -> AsyncIterator[bytes]:
                for start in range(0, len(content), 65536):
                    await asyncio.sleep(0.05)
                    yield content[start:start + 65536]

            return StreamingResponse(trickle(), media_type="application/octet-stream",
                                     headers={"content-length": str(len(content))})
        return Response(content[: len(content) // 2] if path in repo.short else content,
                        media_type="application/octet-stream")
