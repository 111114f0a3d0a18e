"""A stand-in for the Hugging Face Hub on 127.0.0.1, for tests that run the real ``huggingface_hub``
client against it (selected with ``HF_ENDPOINT``). The real Hub cannot be reached from the test
machines, so this serves just the endpoints ``snapshot_download`` calls:

- ``GET /api/models/{repo}/revision/{revision}``: model info (``sha`` = the commit a branch, tag
  or commit resolves to; ``siblings``);
- ``GET /api/models/{repo}/tree/{revision}``: the file list (``type``, ``path``, ``size``, ``oid``);
- ``HEAD``/``GET /{repo}/resolve/{revision}/{filename}``: a file, with ``X-Repo-Commit``, ``ETag``
  and ``Content-Length``.

Errors carry the Hub's ``X-Error-Code`` header, which the client maps to its exceptions: a missing
repository → 404 ``RepoNotFound``; an unknown revision → 404 ``RevisionNotFound``; a missing file →
404 ``EntryNotFound``; a gated repository without the right ``Authorization: Bearer`` token → 401
``GatedRepo``. Every request is recorded in :attr:`StandInHub.requests` (method, path)."""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit


class StandInHub:
    """Repositories of files in memory behind a local HTTP server (see the module docstring)."""

    def __init__(self, token: str = "hf_standin_token") -> None:
        self.token = token
        self.repos: dict[str, dict] = {}
        self.requests: list[tuple[str, str]] = []
        self._server: ThreadingHTTPServer | None = None

    # -- content ----------------------------------------------------------------------------------

    def add(self, repo_id: str, files: dict[str, bytes], *, refs: tuple[str, ...] = ("main",), gated: bool = False) -> str:
        """Add a commit of ``files`` to ``repo_id``, pointed at by the branches/tags ``refs``; its sha."""
        digest = hashlib.sha1(repo_id.encode())
        for name in sorted(files):
            digest.update(name.encode() + hashlib.sha256(files[name]).digest())
        repo = self.repos.setdefault(repo_id, {"commits": {}, "refs": {}, "gated": gated})
        digest.update(str(len(repo["commits"])).encode())
        commit = digest.hexdigest()
        repo["commits"][commit] = dict(files)
        for ref in refs:
            repo["refs"][ref] = commit
        return commit

    def add_folder(self, repo_id: str, folder: Path, **kwargs) -> str:
        files = {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        return self.add(repo_id, files, **kwargs)

    # -- server -----------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        assert self._server is not None, "start() first"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> StandInHub:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def do_GET(self) -> None:
                hub._answer(self, body=True)

            def do_HEAD(self) -> None:
                hub._answer(self, body=False)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    # -- routes -----------------------------------------------------------------------------------

    def _answer(self, handler: BaseHTTPRequestHandler, body: bool) -> None:
        path = urlsplit(handler.path).path
        self.requests.append((handler.command, path))
        try:
            status, headers, payload = self._route(path, handler.headers.get("Authorization"))
        except _HubError as error:
            status, headers, payload = error.status, {"X-Error-Code": error.code, "X-Error-Message": error.message}, \
                json.dumps({"error": error.message}).encode()
            headers["Content-Type"] = "application/json"
        handler.send_response(status)
        for key, value in {**headers, "Content-Length": str(len(payload))}.items():
            handler.send_header(key, value)
        handler.end_headers()
        if body:
            handler.wfile.write(payload)

    def _commit(self, repo_id: str, revision: str, authorization: str | None) -> tuple[str, dict[str, bytes]]:
        repo = self.repos.get(repo_id)
        if repo is None:
            raise _HubError(404, "RepoNotFound", "Repository not found")
        if repo["gated"] and authorization != f"Bearer {self.token}":
            raise _HubError(401, "GatedRepo", f"Access to model {repo_id} is restricted. You must have access to it "
                                              "and be authenticated to access it. Please log in.")
        commit = repo["refs"].get(revision, revision)
        if commit not in repo["commits"]:
            raise _HubError(404, "RevisionNotFound", f"Invalid rev id: {revision}")
        return commit, repo["commits"][commit]

    def _route(self, path: str, authorization: str | None) -> tuple[int, dict[str, str], bytes]:
        as_json = {"Content-Type": "application/json"}
        if path.startswith("/api/models/"):
            rest = path.removeprefix("/api/models/")
            for kind in ("/revision/", "/tree/"):
                if kind in rest:
                    repo_id, _, revision = rest.partition(kind)
                    commit, files = self._commit(unquote(repo_id), unquote(revision.split("/")[0]), authorization)
                    if kind == "/tree/":
                        tree = [{"type": "file", "path": name, "size": len(data), "oid": hashlib.sha1(data).hexdigest()}
                                for name, data in sorted(files.items())]
                        return 200, as_json, json.dumps(tree).encode()
                    info = {"id": unquote(repo_id), "modelId": unquote(repo_id), "sha": commit, "private": False,
                            "gated": "manual" if self.repos[unquote(repo_id)]["gated"] else False, "disabled": False,
                            "downloads": 0, "likes": 0, "tags": [], "lastModified": "2026-01-01T00:00:00.000Z",
                            "siblings": [{"rfilename": name} for name in sorted(files)]}
                    return 200, as_json, json.dumps(info).encode()
            raise _HubError(404, "EntryNotFound", f"no such API route: {path}")
        if "/resolve/" in path:
            repo_id, _, tail = path.lstrip("/").partition("/resolve/")
            revision, _, filename = tail.partition("/")
            commit, files = self._commit(unquote(repo_id), unquote(revision), authorization)
            data = files.get(unquote(filename))
            if data is None:
                raise _HubError(404, "EntryNotFound", f"{filename} does not exist on {revision}")
            headers = {"X-Repo-Commit": commit, "ETag": f'"{hashlib.sha256(data).hexdigest()}"',
                       "Content-Type": "application/octet-stream"}
            return 200, headers, data
        raise _HubError(404, "RepoNotFound", "Repository not found")


class _HubError(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
