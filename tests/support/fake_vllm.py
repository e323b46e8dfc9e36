"""A FAKE vLLM: a stand-in for the OpenAI-compatible server (vLLM's TPU backend needs a TPU),
answering /v1/models, /v1/completions and /v1/chat/completions on 127.0.0.1 with the response
shapes of the OpenAI API that vLLM serves, and with its --api-key rule: a /v1/ request without
`Authorization: Bearer <key>` gets 401 (vLLM's api_server: its auth middleware)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

KEY = "s3cret"


class FakeVllm(BaseHTTPRequestHandler):
    model = "demo"
    completion = " Paris"
    api_key: str | None = KEY  # None: a server started without --api-key
    requests: ClassVar[list[dict]] = []

    def _authorized(self) -> bool:
        if self.api_key is None or self.headers.get("Authorization") == f"Bearer {self.api_key}":
            return True
        self._reply({"error": "Unauthorized"}, 401)
        return False

    def _reply(self, body: dict, status: int = 200) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # http.server's name
        if not self._authorized():
            return
        if self.path == "/v1/models":
            self._reply({"object": "list", "data": [{"id": self.model, "object": "model"}]})
        else:
            self._reply({"error": "not found"}, 404)

    def do_POST(self) -> None:
        if not self._authorized():
            return
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append({"path": self.path, **body})
        usage = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
        if self.path == "/v1/chat/completions":
            message = {"role": "assistant", "content": self.completion}
            choice = {"index": 0, "message": message, "finish_reason": "length"}
            kind = "chat.completion"
        else:
            choice = {"index": 0, "text": self.completion, "finish_reason": "length"}
            kind = "text_completion"
        self._reply({"object": kind, "model": body["model"], "choices": [choice], "usage": usage})

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def fake_vllm():
    FakeVllm.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeVllm)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
