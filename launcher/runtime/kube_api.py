"""The Kubernetes API from inside a pod, with the pod's own service-account credentials: the few
reads and patches the in-cluster commands make (helm test's pod list, a release's slices
released and asked for again). Tests give a server, token and CA of their own."""

from __future__ import annotations

import json
import os
import ssl
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

IN_CLUSTER = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TIMEOUT_S = 10


@dataclass(frozen=True)
class KubeApi:
    server: str
    token: str
    ca_file: str
    namespace: str

    @classmethod
    def in_cluster(cls, namespace: str | None = None) -> KubeApi:
        host, port = os.environ["KUBERNETES_SERVICE_HOST"], os.environ["KUBERNETES_SERVICE_PORT"]
        return cls(
            f"https://{host}:{port}",
            (IN_CLUSTER / "token").read_text().strip(),
            str(IN_CLUSTER / "ca.crt"),
            namespace or (IN_CLUSTER / "namespace").read_text().strip(),
        )

    def _call(self, method: str, path: str, body: Any = None, content_type: str = "") -> Any:
        headers = {"Authorization": f"Bearer {self.token}"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = content_type or "application/json"
        request = urllib.request.Request(
            self.server + path, data=data, headers=headers, method=method
        )
        context = ssl.create_default_context(cafile=self.ca_file)
        with urllib.request.urlopen(request, context=context, timeout=TIMEOUT_S) as resp:
            return json.load(resp)

    def pods(self, selector: str) -> list[dict]:
        query = urllib.parse.quote(selector)
        return self._call("GET", f"/api/v1/namespaces/{self.namespace}/pods?labelSelector={query}")[
            "items"
        ]

    def raycluster(self, name: str) -> dict:
        return self._call("GET", self._raycluster_path(name))

    def patch_raycluster(self, name: str, ops: list[dict]) -> dict:
        """A JSON patch (RFC 6902): a `test` op first makes it apply only to what was read."""
        return self._call("PATCH", self._raycluster_path(name), ops, "application/json-patch+json")

    def _raycluster_path(self, name: str) -> str:
        return f"/apis/ray.io/v1/namespaces/{self.namespace}/rayclusters/{name}"
