"""A FAKE of the Hugging Face Hub, on 127.0.0.1: the Hub cannot be reached from the test machines.
It serves model repositories from local directories through the few HTTP endpoints
huggingface_hub's `repo_info`, `list_repo_tree` and file downloads use (`snapshot_download`),
with the Hub's own answers for what the import must explain: a gated repo without a token
(401, X-Error-Code GatedRepo), a repo or a revision it does not have (404, RepoNotFound or
RevisionNotFound). A client finds it as it finds a mirror: HF_ENDPOINT.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit


@dataclass
class HubRepo:
    directory: Path
    commit: str = "0123456789abcdef0123456789abcdef01234567"
    token: str | None = None  # a gated repo: served only with this bearer token

    def files(self) -> dict[str, Path]:
        return {
            p.relative_to(self.directory).as_posix(): p
            for p in sorted(self.directory.rglob("*"))
            if p.is_file()
        }


@dataclass
class FakeHub:
    repos: dict[str, HubRepo]
    served: list[str] = field(default_factory=list)  # every file downloaded, as repo/path
    url: str = ""


def _handler(hub: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet test output
            pass

        def _error(self, status: int, code: str) -> None:
            body = json.dumps({"error": code}).encode()
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def _json(self, value: object) -> None:
            body = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _repo(self, repo_id: str) -> HubRepo | None:
            repo = hub.repos.get(repo_id)
            if repo is None:
                self._error(404, "RepoNotFound")
                return None
            if repo.token and self.headers.get("Authorization") != f"Bearer {repo.token}":
                self._error(401, "GatedRepo")
                return None
            return repo

        def do_HEAD(self) -> None:
            self.do_GET()

        def do_GET(self) -> None:
            parts = [unquote(p) for p in urlsplit(self.path).path.strip("/").split("/")]
            if parts[:2] == ["api", "models"]:  # /api/models/ORG/NAME/(revision|tree)/REV[/...]
                at = next((i for i in (3, 4) if i < len(parts) and parts[i] in ("revision",
                           "tree")), None)  # fmt: skip
                if at is None:
                    return self._error(404, "EntryNotFound")
                repo = self._repo("/".join(parts[2:at]))
                if repo is None:
                    return
                if parts[at + 1] not in ("main", repo.commit):
                    return self._error(404, "RevisionNotFound")
                files = repo.files()
                if parts[at] == "revision":
                    siblings = [{"rfilename": name} for name in files]
                    return self._json({"id": "/".join(parts[2:at]), "sha": repo.commit,
                                       "siblings": siblings, "private": False})  # fmt: skip
                return self._json([
                    {"type": "file", "path": name, "size": path.stat().st_size,
                     "oid": hashlib.sha1(path.read_bytes()).hexdigest()}
                    for name, path in files.items()
                ])  # fmt: skip
            if "resolve" in parts:  # /ORG/NAME/resolve/REV/PATH
                at = parts.index("resolve")
                repo_id = "/".join(parts[:at])
                repo = self._repo(repo_id)
                if repo is None:
                    return
                if parts[at + 1] not in ("main", repo.commit):
                    return self._error(404, "RevisionNotFound")
                name = "/".join(parts[at + 2 :])
                path = repo.files().get(name)
                if path is None:
                    return self._error(404, "EntryNotFound")
                body = path.read_bytes()
                self.send_response(200)
                self.send_header("X-Repo-Commit", repo.commit)
                self.send_header("ETag", f'"{hashlib.sha256(body).hexdigest()}"')
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command == "GET":
                    hub.served.append(f"{repo_id}/{name}")
                    self.wfile.write(body)
                return None
            return self._error(404, "EntryNotFound")

    return Handler


@contextmanager
def fake_hub(repos: dict[str, HubRepo]) -> Iterator[FakeHub]:
    hub = FakeHub(repos)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(hub))
    hub.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield hub
    finally:
        server.shutdown()
        server.server_close()
