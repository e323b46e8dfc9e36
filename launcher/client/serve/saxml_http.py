"""`tpu-launcher sax publish|generate|list|unpublish`: Saxml's HTTP server (the chart's
`saxml.http`, the sax-http image) from a workstation, through a port-forward of a release's
Service (--release) or at an address (--url).

What each sends is the GKE Saxml tutorial's (Serve an LLM using TPUs on GKE with Saxml):
    POST /publish    {"model": "/sax/test/spmd", "model_path": "saxml.server.pax.lm.params.
                      lm_cloud.LmCloudSpmd175B32Test", "checkpoint": "None", "replicas": 2}
    POST /generate   {"model": "/sax/test/spmd", "query": "How many days are in a week?"}
    GET  /listcell   {"model": "/sax/test/spmd"}
    POST /unpublish  {"model": "/sax/test/spmd"}
Each answer is JSON; it is printed as it came.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import urllib.error
import urllib.request
from dataclasses import dataclass

from launcher.client.kube_context import add_kube_context_option
from launcher.core.errors import UsageError

HTTP_COMPONENT = "saxml-http"  # the chart's app.kubernetes.io/component of the HTTP Service
HTTP_PORT = 8888  # the tutorial's (and the chart's default saxml.http.service.port)
ACTIONS = {  # action: (method, path)
    "publish": ("POST", "/publish"),
    "generate": ("POST", "/generate"),
    "list": ("GET", "/listcell"),
    "unpublish": ("POST", "/unpublish"),
}


@dataclass(frozen=True)
class SaxRequest:
    action: str
    model: str
    model_path: str | None = None
    checkpoint: str | None = None
    replicas: int = 1
    query: str | None = None

    def body(self) -> dict:
        """The JSON Saxml's HTTP server takes for this action. Raises UsageError."""
        parts = self.model.split("/")
        if len(parts) != 4 or parts[:2] != ["", "sax"] or not all(parts[2:]):
            raise UsageError(
                "--model",
                f"{self.model!r} is not a Sax model name",
                "name it /sax/<cell>/<model>, in the release's cell (saxml.cell, default "
                "/sax/test): --model /sax/test/llama",
            )
        if self.action == "publish":
            if not self.model_path:
                raise UsageError(
                    "--model-path",
                    "is required to publish",
                    "name the Saxml model class, e.g. "
                    "--model-path saxml.server.pax.lm.params.lm_cloud.LLaMA7BFP16TPUv5e",
                )
            if self.replicas < 1:
                raise UsageError("REPLICAS", f"must be at least 1, got {self.replicas}", "1")
            return {
                "model": self.model,
                "model_path": self.model_path,
                "checkpoint": self.checkpoint or "None",  # Saxml's word for random weights
                "replicas": self.replicas,
            }
        if self.action == "generate":
            if not self.query:
                raise UsageError("PROMPT", "is empty", 'give the query: PROMPT="hello"')
            return {"model": self.model, "query": self.query}
        return {"model": self.model}


def call(url: str, request: SaxRequest, timeout: float = 600) -> object:
    """Sends `request` to the Saxml HTTP server at `url`; its JSON answer. Raises UsageError
    with the server's own message when it refuses."""
    method, path = ACTIONS[request.action]
    data = json.dumps(request.body()).encode()
    http = urllib.request.Request(
        url.rstrip("/") + path,
        data=data,
        method=method,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(http, timeout=timeout) as response:
            raw = response.read().decode()
    except urllib.error.HTTPError as e:
        said = e.read().decode(errors="replace").strip()
        raise UsageError(
            "--model",
            f"Saxml's HTTP server answered {method} {path} with {e.code}: {said or e.reason}",
            "check the model name and, for publish, --model-path and --checkpoint; "
            "`tpu-launcher sax list --model ...` shows what the cell serves",
        ) from None
    except (urllib.error.URLError, OSError) as e:
        raise UsageError(
            "--url",
            f"no Saxml HTTP server answers at {url} ({getattr(e, 'reason', e)})",
            "pass --release <release> (a release with serving.engine=saxml) to port-forward "
            f"its HTTP Service, or --url http://<load balancer address>:{HTTP_PORT}",
        ) from None
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def sax(
    request: SaxRequest,
    url: str | None,
    release: str | None,
    namespace: str,
    dry_run: bool = False,
) -> int:
    """One action against a release's Saxml (port-forwarded) or `url`; prints the answer."""
    body = request.body()  # refuse a bad request before any port-forward
    method, path = ACTIONS[request.action]
    with contextlib.ExitStack() as stack:
        if release:
            from launcher.client.release.helm_release import find_service, port_forward

            service, port = find_service(release, namespace, HTTP_COMPONENT, dry_run)
            url = stack.enter_context(port_forward(namespace, f"service/{service}", port, dry_run))
        if not url:
            raise UsageError(
                "--url",
                "no Saxml HTTP server named",
                f"pass --release <release> (port-forwarded) or --url http://<address>:{HTTP_PORT}",
            )
        print(f"{method} {url.rstrip('/')}{path} {json.dumps(body)}", flush=True)
        if dry_run:
            return 0
        print(json.dumps(call(url, request), indent=1), flush=True)
    return 0


def run_sax(ns: argparse.Namespace) -> int:
    request = SaxRequest(ns.action, ns.model, ns.model_path, ns.checkpoint, ns.replicas, ns.query)
    return sax(request, ns.url, ns.release, ns.namespace, ns.dry_run)


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("sax", help="Saxml's HTTP server: publish, generate, list, unpublish")
    p.add_argument("action", choices=list(ACTIONS), help="what to ask the server: %(choices)s")
    p.add_argument("--model", required=True, help="the Sax model name, /sax/<cell>/<model>")
    p.add_argument("--model-path", help="publish: the Saxml model class")
    p.add_argument("--checkpoint", help="publish: its checkpoint (default: None, random weights)")
    p.add_argument("--replicas", type=int, default=1, help="publish: model server replicas")
    p.add_argument("--query", help="generate: the prompt")
    p.add_argument("--url", help="the HTTP server, http://host:8888 (else --release)")
    p.add_argument("--release", help="a release with serving.engine=saxml: port-forward it")
    p.add_argument("--namespace", default="default", help="the release's namespace")
    add_kube_context_option(p)
    p.add_argument("--dry-run", "--dry_run", action="store_true", help="print the request only")
    p.set_defaults(func=run_sax)
