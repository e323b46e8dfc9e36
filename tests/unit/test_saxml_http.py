"""`tpu-launcher sax` against a FAKE Saxml HTTP server: a stand-in for the sax-http image (Saxml's
model servers need TPUs) on 127.0.0.1 that records each request and answers with the JSON the
GKE Saxml tutorial shows. Asserted: the method, path and JSON each command sends, the answer
printed, and the refusals a user can hit."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from launcher.cli import main
from launcher.client.serve.saxml_http import SaxRequest, sax

pytestmark = pytest.mark.unit


class FakeSaxHttp(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str, dict]]] = []
    published: ClassVar[dict[str, dict]] = {}

    def _handle(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append((self.command, self.path, body))
        model = body["model"]
        if self.path == "/publish":
            self.published[model] = body
            answer = {"model": model, "path": body["model_path"],
                      "checkpoint": body["checkpoint"], "replicas": body["replicas"]}  # fmt: skip
        elif model not in self.published:
            self.send_response(404)
            self.end_headers()
            self.wfile.write(f"model {model} not found".encode())
            return
        elif self.path == "/listcell":
            p = self.published[model]
            answer = {"model": model, "model_path": p["model_path"], "checkpoint": p["checkpoint"],
                      "max_replicas": p["replicas"], "active_replicas": p["replicas"]}  # fmt: skip
        elif self.path == "/generate":
            answer = [[f"echo: {body['query']}", -0.5]]
        else:  # /unpublish
            del self.published[model]
            answer = {"model": model}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = _handle

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def fake_sax():
    FakeSaxHttp.seen.clear()
    FakeSaxHttp.published.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeSaxHttp)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


MODEL = "/sax/test/spmd"
CLASS = "saxml.server.pax.lm.params.lm_cloud.LmCloudSpmd175B32Test"


def test_publish_list_generate_unpublish_send_the_tutorials_json(fake_sax, capsys):
    for argv in (
        ["publish", "--model-path", CLASS, "--replicas", "2"],
        ["list"],
        ["generate", "--query", "How many days are in a week?"],
        ["unpublish"],
    ):
        assert main(["sax", *argv, "--model", MODEL, "--url", fake_sax]) == 0
    assert FakeSaxHttp.seen == [
        ("POST", "/publish", {"model": MODEL, "model_path": CLASS, "checkpoint": "None",
                              "replicas": 2}),
        ("GET", "/listcell", {"model": MODEL}),
        ("POST", "/generate", {"model": MODEL, "query": "How many days are in a week?"}),
        ("POST", "/unpublish", {"model": MODEL}),
    ]  # fmt: skip
    out = capsys.readouterr().out
    assert '"active_replicas": 2' in out and "echo: How many days are in a week?" in out


def test_the_servers_refusal_is_shown_with_what_to_check(fake_sax):
    with pytest.raises(Exception) as e:
        sax(SaxRequest("generate", MODEL, query="hi"), fake_sax, None, "default")
    assert "answered POST /generate with 404: model /sax/test/spmd not found" in str(e.value)
    assert "tpu-launcher sax list" in str(e.value)


def test_no_server_and_bad_names_are_refused_before_sending(capsys):
    assert main(["sax", "list", "--model", MODEL, "--url", "http://127.0.0.1:9"]) == 2
    assert "no Saxml HTTP server answers at http://127.0.0.1:9" in capsys.readouterr().err
    assert main(["sax", "list", "--model", "spmd", "--url", "http://127.0.0.1:9"]) == 2
    assert "name it /sax/<cell>/<model>" in capsys.readouterr().err
    assert main(["sax", "publish", "--model", MODEL, "--url", "http://127.0.0.1:9"]) == 2
    assert "--model-path: is required to publish" in capsys.readouterr().err
    assert main(["sax", "generate", "--model", MODEL, "--url", "http://127.0.0.1:9"]) == 2
    assert "PROMPT: is empty" in capsys.readouterr().err


def test_a_release_is_reached_through_its_http_service(capsys):
    argv = ["sax", "list", "--model", MODEL, "--release", "tpu", "--namespace", "ml", "--dry-run"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "app.kubernetes.io/instance=tpu,app.kubernetes.io/component=saxml-http" in out
    assert "-n ml port-forward" in out
    assert 'GET http://127.0.0.1:<port>/listcell {"model": "/sax/test/spmd"}' in out
