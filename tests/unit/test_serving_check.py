"""helm test's check of a vLLM release, against a FAKE vLLM: a stand-in for the OpenAI-compatible
server (vLLM's TPU backend needs a TPU), answering /v1/models and /v1/completions on 127.0.0.1
with the response shapes of the OpenAI API that vLLM serves, and with its --api-key rule: a /v1/
request without `Authorization: Bearer <key>` gets 401 (vLLM's api_server: its auth middleware)."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from launcher.runtime.serving_check import PROMPT, check

pytestmark = pytest.mark.unit


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
        type(self).requests.append(body)
        choice = {"index": 0, "text": self.completion, "finish_reason": "length"}
        self._reply({"object": "text_completion", "model": body["model"], "choices": [choice]})

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def fake_vllm():
    FakeVllm.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeVllm)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", KEY)  # as the chart's test pod gets it from the Secret


def test_passes_when_the_served_model_completes(fake_vllm, capsys):
    assert check(fake_vllm, "demo", timeout=5) == 0
    (request,) = FakeVllm.requests
    assert request["model"] == "demo" and request["prompt"] == PROMPT
    assert request["temperature"] == 0  # greedy: the same model answers the same
    assert "' Paris'" in capsys.readouterr().out


def test_names_the_served_models_when_the_name_is_wrong(fake_vllm, capsys):
    assert check(fake_vllm, "llama", timeout=5) == 1
    assert "serves ['demo'], not 'llama'" in capsys.readouterr().err


def test_an_empty_completion_fails(fake_vllm, capsys, monkeypatch):
    monkeypatch.setattr(FakeVllm, "completion", "")
    assert check(fake_vllm, "demo", timeout=5) == 1
    assert "empty completion" in capsys.readouterr().err


def test_a_server_that_never_answers_is_named():
    assert check("http://127.0.0.1:9", "demo", timeout=0.1) == 1  # discard port: nothing listens


def test_fails_without_the_api_key(fake_vllm, capsys, monkeypatch):
    monkeypatch.delenv("VLLM_API_KEY")
    assert check(fake_vllm, "demo", timeout=5) == 1
    assert "no API key (VLLM_API_KEY is empty)" in capsys.readouterr().err


def test_fails_with_another_key(fake_vllm, capsys, monkeypatch):
    monkeypatch.setenv("VLLM_API_KEY", "not-the-key")
    assert check(fake_vllm, "demo", timeout=5) == 1
    assert "HTTP 401; the Secret named by vllm.apiKey.secretName" in capsys.readouterr().err
    assert FakeVllm.requests == []  # nothing was generated


def test_fails_when_the_server_answers_without_a_key(fake_vllm, capsys, monkeypatch):
    """A server started without --api-key serves anyone: the check must not pass it."""
    monkeypatch.setattr(FakeVllm, "api_key", None)
    assert check(fake_vllm, "demo", timeout=5) == 1
    assert "without the API key answered it" in capsys.readouterr().err
